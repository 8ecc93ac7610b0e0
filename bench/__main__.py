"""Run every benchmark in this folder, one after another: python -m bench"""

import runpy
import sys
from pathlib import Path

for script in sorted(Path(__file__).parent.glob("*.py")):
    if script.name.startswith("_"):
        continue
    print(f"\n== {script.name}", flush=True)
    sys.argv = [str(script)]
    runpy.run_path(str(script), run_name="__main__")
