"""What `import portlayer` adds to `import torch`, and what selecting the backend on first use costs.

Goal: `import portlayer` adds <= 50 ms. Run: python bench/import_time.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

ROUNDS = 7
PROGRAMS = {
    "import torch": "import torch",
    "import torch, portlayer": "import torch, portlayer",
    "... + first API call": "import torch, portlayer; portlayer.device()",
}


def wall_ms(program: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", program], check=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    samples: dict[str, list[float]] = {name: [] for name in PROGRAMS}
    for _ in range(ROUNDS):  # interleaved: each round runs every program once
        for name, program in PROGRAMS.items():
            samples[name].append(wall_ms(program))
    anchor = statistics.median(samples["import torch"])
    print(f"median wall time of {ROUNDS} interleaved runs each (fresh interpreters)")
    for name, times in samples.items():
        median = statistics.median(times)
        print(f"{name:<28}{median:>9.1f} ms   +{median - anchor:6.1f} ms   ratio {median / anchor:.3f}")
    print("goal: import portlayer adds <= 50 ms")


if __name__ == "__main__":
    main()
