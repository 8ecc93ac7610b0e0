"""The bundled CUDA example in its four forms, on the active device: bitwise the same losses (issue 29).

    python tools/example_forms.py [--steps 30] [--nproc 1] [--work DIR]

examples/cuda_ddp_train.py as written, migrated with `--target neutral` and `--target torch`, and through the
drop-in (its `import torch` line made `import portlayer.torch as torch`), each under torchrun, each writing
rank 0's losses (`--losses_out`). Exit 0 when all four lists are equal float for float, 1 when not (the
differing step printed), 2 when a form fails to run. On a GPU host the original runs on CUDA and nccl, as
written; the other three go through portlayer, which picks the same device.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda_ddp_train.py"
FORMS = ("as written", "neutral", "torch", "drop-in")


def prepare(form: str, folder: Path) -> Path:
    """The example in `form`, in a folder of its own; returns the script's path."""
    folder.mkdir(parents=True)
    script = folder / EXAMPLE.name
    shutil.copy2(EXAMPLE, script)
    if form in ("neutral", "torch"):
        migrate = [sys.executable, "-m", "portlayer", "migrate", str(script), "--target", form]
        subprocess.run(migrate, check=True, stdout=subprocess.DEVNULL)
    elif form == "drop-in":
        text, count = re.subn(r"(?m)^import torch$", "import portlayer.torch as torch", script.read_text())
        if count != 1:
            raise SystemExit(f"example_forms: error: {EXAMPLE.name} has no single `import torch` line")
        script.write_text(text)
    return script


def losses(script: Path, steps: int, nproc: int) -> list[float]:
    out = script.with_name("losses.json")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               str(script), "--steps", str(steps), "--losses_out", str(out)]  # fmt: skip
    result = subprocess.run(command, cwd=script.parent, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-5:]
        raise RuntimeError(f"{script.parent.name} exited {result.returncode}: {' | '.join(tail)}")
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--nproc", type=int, default=1, help="ranks (one device each)")
    parser.add_argument("--work", type=Path, help="keep the four folders here [a temporary folder]")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="example-forms-"))
    runs = {}
    try:
        for form in FORMS:
            runs[form] = losses(prepare(form, work / form.replace(" ", "-")), args.steps, args.nproc)
            print(f"{form:<11} {len(runs[form])} losses, last {runs[form][-1]!r}", flush=True)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"example_forms: error: {error}", file=sys.stderr)
        return 2
    written = runs["as written"]
    for form in FORMS[1:]:
        differ = [step for step, (a, b) in enumerate(zip(written, runs[form]), 1) if a != b]
        if differ or len(runs[form]) != len(written):
            print(f"example_forms: {form} differs from the example as written from step {(differ or [0])[0]}")
            return 1
    print(f"the four forms: bitwise equal losses over {len(written)} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
