"""Run after migrate, a public DeepSpeed ZeRO-2 program: DeepSpeedExamples' training/bf16_master_weight/train.py
(public/deepspeed_bf16_master_weight/, unmodified, its provenance beside it), migrated with
`--target neutral` and `--target npu`, trains a small language model on 2 ranks under torchrun with DeepSpeed's
engine at ZeRO stage 2: on the cpu (DeepSpeed's cpu accelerator over gloo) and on the stand-in npu (DeepSpeed's
own npu accelerator over the stand-in's hccl).

The program is written for CUDA: `torch.cuda.set_device`, `torch.cuda.manual_seed_all`, its memory report
through `torch.cuda.memory_allocated` and friends, `torch.autocast(device_type="cuda")`. Its memory report is
the device's own count, so on the stand-in npu it must show bytes held, and on the cpu (no device) none.

What the test gives the program instead of its author's setup (all through its own arguments and inputs): a
DeepSpeed config with ZeRO stage 2 and torch's AdamW (`torch_adam`: DeepSpeed's fused Adam would compile an op
for minutes), tiny model arguments, and local stand-ins for the tokenizer ("gpt2") and dataset ("wikitext")
it downloads, which the loaders find as folders of those names in the run's folder.

DeepSpeed's npu accelerator reads ASCEND_HOME_PATH, which CANN's set_env.sh sets on a real host; the stand-in
npu's environment sets it (tests/fake_device.py).
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import pytest

from tests.run_after_migrate.launch import TARGETS, Target, assert_trains, finish, start

PROGRAM = Path(__file__).resolve().parent / "public" / "deepspeed_bf16_master_weight" / "train.py"
BATCH = 4
ARGS = [
    "--use_real_data",
    "--deepspeed_config", "ds_config.json",
    "--hidden_dim", "32", "--num_layers", "1", "--num_heads", "2",
    "--batch_size", str(BATCH), "--seq_length", "16",
    "--num_steps", "12", "--warmup_steps", "0", "--log_interval", "1",
]  # fmt: skip
# Buckets the size of the tiny model: DeepSpeed's default (5e8 elements) allocates 2 GB per rank at each step.
BUCKET = 100_000
DEEPSPEED_CONFIG = {
    "train_micro_batch_size_per_gpu": BATCH,
    "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "torch_adam": True}},
    "zero_optimization": {"stage": 2, "reduce_bucket_size": BUCKET, "allgather_bucket_size": BUCKET},
    "torch_autocast": {"enabled": False},
}
WORDS = [
    *("the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to"),
    *("park", "with", "ball", "red", "blue", "green", "big", "small", "fast", "slow"),
]

def write_inputs(folder: Path) -> None:
    """The program's config and the local "gpt2" tokenizer and "wikitext" dataset its loaders find by name."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    (folder / "ds_config.json").write_text(json.dumps(DEEPSPEED_CONFIG))
    # Its end-of-text token inside the base vocabulary: the program sizes the model by `tokenizer.vocab_size`.
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["<eos>", *WORDS])}, unk_token="<eos>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>").save_pretrained(folder / "gpt2")
    dataset = folder / "wikitext"
    (dataset / "wikitext-103-raw-v1").mkdir(parents=True)
    rng = random.Random(0)
    # The program keeps lines over 50 characters and reads the first 5% of them.
    lines = (" ".join(rng.choice(WORDS) for _ in range(16)) for _ in range(2000))
    (dataset / "wikitext-103-raw-v1" / "train.txt").write_text("\n".join(lines) + "\n")
    (dataset / "README.md").write_text(
        "---\nconfigs:\n- config_name: wikitext-103-raw-v1\n  data_files:\n"
        "  - split: train\n    path: wikitext-103-raw-v1/train.txt\n---\n"
    )


@pytest.mark.parametrize("target", [t for t in TARGETS if t.name in ("neutral", "npu")], ids=str)
def test_migrated_zero2_program_trains_on_two_ranks(target: Target, tmp_path):
    script = tmp_path / PROGRAM.name
    shutil.copyfile(PROGRAM, script)
    target.prepare(script)
    migrated = script.read_text()
    assert "torch.cuda" not in migrated and '"cuda"' not in migrated
    write_inputs(tmp_path)

    output = finish(start(script, ARGS, target, 2), f"{PROGRAM.name} ({target}, torchrun x2)")

    for rank in (0, 1):
        found = [float(v) for v in re.findall(rf"\[Rank {rank}\] Step \d+: loss=(\S+?),", output)]
        assert len(found) == 12, f"rank {rank}: {found}\n{output[-3000:]}"
        assert_trains(found, f"{PROGRAM.name} rank {rank} ({target})")
    # Each rank's closing report: the device's peak and current allocation, in bytes.
    memory = [(int(peak), int(now)) for peak, now in re.findall(r"peak_mem_bytes=(\d+) alloc_mem_bytes=(\d+)", output)]
    assert len(memory) == 2, output[-3000:]
    if target.device_type == "cpu":
        assert memory == [(0, 0), (0, 0)]
    else:
        assert all(peak >= now > 0 for peak, now in memory), memory
