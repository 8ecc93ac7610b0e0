"""Preflight's memory per rank against the bytes the stand-in npu's allocator counts for the same step on
2 ranks, under each strategy, and on 2 and 4 ranks under tensor, sequence and pipeline parallel: within 5%.

The step (tests/stand_in/strategy_step.py) is preflight's for the same arguments: the model built from the
same config.json and its batch, the strategy applied by the trainer's own code (`portlayer.strategies`:
torch's DDP, fully_shard per block, DeepSpeed's engine at ZeRO 1-3 with the trainer's config, its tensor,
sequence and pipeline parallel over the groups the trainer forms), AdamW and gradient clipping, the second step
measured. The stand-in counts every byte a tensor on the device holds (no caching, no rounding), so what is
compared is the prediction itself. A pipeline's stages hold different amounts: preflight predicts the largest.
"""

import json
import re
from pathlib import Path

import pytest

from portlayer.preflight.model_source import Training, from_config_file
from portlayer.preflight.per_rank import predict
from portlayer.strategies.layout import Layout
from tests.fake_device import torchrun

STEP = Path(__file__).with_name("strategy_step.py")
# A Qwen2 of 2 layers, wide enough that weights, gradients, optimizer state and activations each weigh in.
TINY_QWEN = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 128,
             "intermediate_size": 320, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
             "vocab_size": 1024, "max_position_embeddings": 256, "tie_word_embeddings": False}
BATCH, SEQ_LEN = 2, 64
STRATEGIES = ["ddp", "fsdp2", "zero1", "zero2", "zero3"]
DATA_PARALLEL = Layout()  # no split: every rank a whole copy


def measured_and_predicted(strategy: str, directory: Path, nproc: int = 2, layout: Layout = DATA_PARALLEL,
                           grad_accum: int = 1, layers: int = 2) -> tuple[list[int], object]:
    config = directory / "config.json"
    config.write_text(json.dumps({**TINY_QWEN, "num_hidden_layers": layers}))
    split = ["--tp", layout.tensor, *(["--sp"] if layout.sequence else []), "--pp", layout.pipeline,
             "--pp-schedule", layout.schedule, "--grad-accum", grad_accum]
    run = torchrun("npu", STEP, config, strategy, BATCH, SEQ_LEN, *split, nproc=nproc, cwd=directory)
    assert run.returncode == 0, run.stdout[-4000:]
    # The ranks share one pipe: their lines may run together.
    peaks = [int(peak) for peak in re.findall(r'\{"rank": \d, "peak": (\d+)\}', run.stdout)]
    assert len(peaks) == nproc, run.stdout[-4000:]
    source = from_config_file(config, batch_size=BATCH, seq_len=SEQ_LEN, overrides={})
    return peaks, predict(source, Training("fp32", strategy, nproc=nproc, layout=layout, grad_accum=grad_accum)).memory


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_peak_per_rank_is_within_5_percent_of_the_device_allocator(strategy, tmp_path, stand_in_device):
    peaks, memory = measured_and_predicted(strategy, tmp_path)
    for peak in peaks:
        assert abs(memory.total - peak) <= 0.05 * peak, (strategy, memory, peak)


@pytest.mark.parametrize(
    ("nproc", "layout"),
    [(2, Layout(2)), (4, Layout(2)), (2, Layout(2, sequence=True))],  # one split model; two copies; --sp
    ids=["tp2", "tp2-dp2", "tp2-sp"],
)
def test_a_tensor_parallel_rank_is_within_5_percent_of_the_device_allocator(nproc, layout, tmp_path,
                                                                            stand_in_device):
    peaks, memory = measured_and_predicted("ddp", tmp_path, nproc, layout)
    for peak in peaks:
        assert abs(memory.total - peak) <= 0.05 * peak, (nproc, layout, memory, peak)


@pytest.mark.parametrize(
    ("nproc", "layout", "grad_accum"),
    [
        (2, Layout(pipeline=2), 2),  # 1F1B: the first stage holds 2 micro-batches, the last the logits too
        (2, Layout(pipeline=2, schedule="gpipe"), 4),  # every micro-batch's activations, and the last its logits
        (4, Layout(2, 2, sequence=True), 2),  # 2 stages of 2 ranks, the sequence split too
    ],
    ids=["pp2-1f1b", "pp2-gpipe", "tp2-sp-pp2"],
)
def test_a_pipeline_stage_is_within_5_percent_of_the_device_allocator(nproc, layout, grad_accum, tmp_path,
                                                                       stand_in_device):
    peaks, memory = measured_and_predicted("ddp", tmp_path, nproc, layout, grad_accum, layers=4)
    # The stages hold different amounts (the first the most activations, the last the logits): the largest.
    assert abs(memory.total - max(peaks)) <= 0.05 * max(peaks), (layout, grad_accum, memory, peaks)
