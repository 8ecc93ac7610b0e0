"""What `import portlayer` adds to `import torch`, and what selecting the backend on first use costs.

Goal: `import portlayer` adds <= 50 ms. Each round is a fresh interpreter that times its own imports,
so interpreter start-up noise stays out of the figures. Run: python bench/import_time.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

ROUNDS = 7
PROGRAM = """
import json, time
t0 = time.perf_counter(); import torch
t1 = time.perf_counter(); import portlayer
t2 = time.perf_counter(); portlayer.device()
t3 = time.perf_counter()
print(json.dumps({"torch": t1 - t0, "portlayer": t2 - t1, "first_call": t3 - t2}))
"""


def main() -> None:
    rounds = [
        json.loads(
            subprocess.run([sys.executable, "-c", PROGRAM], check=True, capture_output=True, text=True).stdout
        )
        for _ in range(ROUNDS)
    ]
    median = {key: statistics.median(r[key] for r in rounds) * 1000 for key in rounds[0]}
    anchor = median["torch"]
    print(f"median of {ROUNDS} fresh interpreters")
    print(f"import torch                   {anchor:8.1f} ms")
    print(
        f"import portlayer (after torch) {median['portlayer']:8.1f} ms   ratio {(anchor + median['portlayer']) / anchor:.3f}"
    )
    print(
        f"first API call (selects)       {median['first_call']:8.1f} ms   ratio {(anchor + median['portlayer'] + median['first_call']) / anchor:.3f}"
    )
    print("goal: import portlayer adds <= 50 ms")


if __name__ == "__main__":
    main()
