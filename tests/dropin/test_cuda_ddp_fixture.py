"""The CUDA DDP example, with only `import torch` changed, trains under torchrun on 2 cpu processes.

Its loss must match plain single-process torch doing what DDP does: each step, the mean of the two ranks'
losses (DDP averages the ranks' gradients), one AdamW step.
"""

import json
import os
import subprocess
import sys

import pytest

from tests import accelerator
from tests.example_reference import REPO, STEPS, WORLD_SIZE, reference_losses
from tests.processes import HUNG_S


@pytest.fixture(scope="module")
def dropin_script(tmp_path_factory):
    original = (REPO / "examples" / "cuda_ddp_train.py").read_text()
    ported = original.replace("\nimport torch\n", "\nimport portlayer.torch as torch\n", 1)
    changed = [pair for pair in zip(original.splitlines(), ported.splitlines()) if pair[0] != pair[1]]
    assert changed == [("import torch", "import portlayer.torch as torch")]
    script = tmp_path_factory.mktemp("ported") / "cuda_ddp_train.py"
    script.write_text(ported)
    return script


def test_trains_under_torchrun_with_gloo_and_matches_plain_torch(dropin_script, tmp_path):
    losses_out = tmp_path / "losses.json"
    # Two gloo ranks on a host without accelerators (one GPU has no second device for rank 1).
    env = accelerator.hidden({k: v for k, v in os.environ.items() if not k.startswith(("PORTLAYER_", "FAKE_"))})
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={WORLD_SIZE}",
         str(dropin_script), "--steps", str(STEPS), "--losses_out", str(losses_out)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=HUNG_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    losses = json.loads(losses_out.read_text())
    assert losses == pytest.approx(reference_losses(), rel=1e-5)
    assert len(set(losses)) == STEPS  # the weights moved every step
