import contextlib

import pytest
import torch

from tests.trainer.helpers import CPU_BF16_STEPS


@pytest.fixture(scope="session", autouse=True)
def portlayer_cache(tmp_path_factory):
    """One corpus, tokenizer and token cache per test session, away from the user's ~/.cache."""
    path = tmp_path_factory.mktemp("portlayer-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PORTLAYER_CACHE", str(path))
        yield path


@contextlib.contextmanager
def torch_switches_kept():
    """Training in-process flips process-wide switches (deterministic algorithms, matmul precision): put them
    back after."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    precision = torch.get_float32_matmul_precision()
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_float32_matmul_precision(precision)


@pytest.fixture
def restore_torch_switches():
    with torch_switches_kept():
        yield


@pytest.fixture(scope="session")
def cpu_bf16_run(tmp_path_factory, portlayer_cache):
    """The run file of a tiny preset's bf16 parity run on the cpu, recorded as the H200's was (1 rank, 2
    micro-batches of the preset's batch) for its first CPU_BF16_STEPS steps, trained once per session (tests that
    share it are in one xdist group)."""
    from portlayer.train import runfile
    from portlayer.train.presets import get_preset
    from portlayer.train.train import Options, train

    made = {}

    def run(preset_name: str):
        if preset_name not in made:
            preset = get_preset(preset_name)
            options = Options(
                preset=preset, steps=CPU_BF16_STEPS, per_device_batch=preset.per_device_batch, grad_accum=2,
                seq_len=preset.seq_len, lr=preset.lr, warmup_steps=preset.warmup_steps, precision="bf16",
                parity=True, quiet=True,
            )  # fmt: skip
            with torch_switches_kept():
                record = train(options)
            made[preset_name] = tmp_path_factory.mktemp("bf16") / f"{preset_name}.cpu-bf16.json"
            runfile.write_run(made[preset_name], record)
        return made[preset_name]

    return run
