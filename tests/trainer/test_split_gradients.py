"""A split model's step is the whole model's: cut into pipeline stages (`--pp`), or split by tensor parallel with the
sequence split too (`--tp --sp`), each rank's gradients for its part, its losses and the clipping norm are the
whole model's taking the same step (tests/trainer/split_gradients.py, on 2 ranks)."""

import json
import os
import subprocess
import sys

from tests.processes import HUNG_S, REPO
from tests.trainer.helpers import TINY_PRESETS


def test_each_rank_of_a_split_model_holds_the_whole_models_gradients_for_its_part():
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(REPO / "tests" / "trainer" / "split_gradients.py")]  # fmt: skip
    ranks = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=HUNG_S)
    assert ranks.returncode == 0, ranks.stdout[-2000:] + ranks.stderr[-4000:]
    (line,) = [line for line in ranks.stdout.splitlines() if line.startswith("[")]
    differences = json.loads(line)
    assert len(differences) == 2  # each rank's
    for worst in differences:
        assert set(worst["--pp 2"]) == set(TINY_PRESETS)
        assert set(worst["--tp 2 --sp"]) == {"bert-base-uncased-tiny", "mixtral-8x7b-tiny"}
        # The same kernels on the same numbers; what differs is the order the summed gradients are added in.
        assert max(max(by_preset.values()) for by_preset in worst.values()) < 1e-6, worst
