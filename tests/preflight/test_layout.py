"""Preflight under a layout (--tp, --pp): a rank's share of the model as the trainer splits it, the activations a
pipeline stage keeps in flight, the collectives each layout runs, and the layouts refused."""

import json

import pytest
import torch
from click.testing import CliRunner

from portlayer.cli import cli
from portlayer.preflight.communication import step_traffic
from portlayer.preflight.model_source import Training, from_config_file
from portlayer.preflight.per_rank import predict
from portlayer.strategies.layout import Layout
from portlayer.strategies.tensor_parallel import COLWISE, ROWWISE, tensor_plan

# A Qwen2 of 4 layers: split by --tp 2 (4 heads), cut by --pp 2.
QWEN = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 128, "intermediate_size": 320,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 1024,
        "max_position_embeddings": 256, "tie_word_embeddings": False}
BATCH, SEQ = 2, 64


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen") / "config.json"
    path.write_text(json.dumps(QWEN))
    return path


@pytest.fixture(scope="module")
def model_source(config):
    return from_config_file(config, batch_size=BATCH, seq_len=SEQ, overrides={})


@pytest.fixture(scope="module")
def plan(model_source):
    """The trainer's own plan for the model: {layer name: colwise | rowwise}, and the model (real, tiny)."""
    torch.manual_seed(0)
    model = model_source.build(Training())
    return tensor_plan(model, 2), model


def rank(model_source, nproc: int, layout: Layout, grad_accum: int = 1):
    training = Training(nproc=nproc, layout=layout, grad_accum=grad_accum)
    prediction = predict(model_source, training)
    return prediction, step_traffic(prediction, training)


def test_a_tensor_parallel_rank_holds_a_tp_th_of_the_layers_the_trainer_splits_and_the_rest_whole(model_source, plan):
    split_layers, model = plan
    split = sum(p.numel() for name in split_layers for p in model.get_submodule(name).parameters())
    whole = sum(p.numel() for p in model.parameters()) - split
    prediction, _ = rank(model_source, 4, Layout(tensor=2))
    fp32 = 4
    assert prediction.memory.parameters == (whole + split // 2) * fp32
    assert prediction.memory.optimizer_state == 2 * prediction.memory.parameters  # AdamW's two moments
    assert prediction.memory.communication == 0  # no DDP buckets: the split averages in one flat copy


def test_tensor_parallel_all_reduces_each_rowwise_output_and_each_colwise_input_gradient(model_source, plan):
    split_layers, _ = plan
    layers, micro_batches, hidden = QWEN["num_hidden_layers"], 2, QWEN["hidden_size"]
    per_layer = {style: sum(1 for s in split_layers.values() if s == style) // layers for style in (COLWISE, ROWWISE)}
    prediction, traffic = rank(model_source, 4, Layout(tensor=2), grad_accum=micro_batches)
    found = {(t.kind, t.group, t.phase): t for t in traffic}
    activation = BATCH * SEQ * hidden * 4  # b x s x h, fp32

    for phase, style in (("forward", ROWWISE), ("backward", COLWISE)):
        all_reduce = found["all-reduce", "tp", phase]
        assert all_reduce.per_layer == per_layer[style]
        assert all_reduce.calls == per_layer[style] * layers * micro_batches
        assert all_reduce.bytes == all_reduce.calls * activation
    # Once a step: the gradients averaged over the 2 copies, and the clip norm's squares over the split.
    assert (found["all-reduce", "dp", "optimizer"].calls, found["all-reduce", "dp", "optimizer"].bytes) == (
        1, prediction.memory.parameters)
    assert (found["all-reduce", "tp", "optimizer"].calls, found["all-reduce", "tp", "optimizer"].bytes) == (1, 4)
    assert len(traffic) == 4


def test_sequence_parallel_gathers_and_scatters_the_sequence_around_each_attention_and_mlp(model_source):
    layers, micro_batches = QWEN["num_hidden_layers"], 2
    prediction, traffic = rank(model_source, 2, Layout(tensor=2, sequence=True), grad_accum=micro_batches)
    found = {(t.kind, t.phase): t for t in traffic if t.group == "tp"}
    whole = BATCH * SEQ * QWEN["hidden_size"] * 4  # the whole sequence's hidden states, fp32
    for kind in ("all-gather", "reduce-scatter"):
        for phase in ("forward", "backward"):
            assert found[kind, phase].per_layer == 2  # attention's and the MLP's
            assert found[kind, phase].bytes == found[kind, phase].calls * whole
    # Once a micro-batch: the whole sequence gathered back after the last block (forward), and the gradient of the
    # part the first block took (backward).
    assert found["all-gather", "forward"].calls == (2 * layers + 1) * micro_batches
    assert found["all-gather", "backward"].calls == (2 * layers + 1) * micro_batches
    assert ("all-reduce", "forward") not in found and ("all-reduce", "backward") not in found
    assert prediction.memory.activations < rank(model_source, 2, Layout(tensor=2), micro_batches)[0].memory.activations


def test_the_first_1f1b_stage_holds_the_whole_models_layers_worth_of_activations(model_source):
    # Korthikanti et al. §4.2.3, eq. (4): p micro-batches of L/p layers each; GPipe holds all m.
    whole, _ = rank(model_source, 1, Layout())
    one_f_one_b, _ = rank(model_source, 2, Layout(pipeline=2), grad_accum=2)
    gpipe, _ = rank(model_source, 2, Layout(pipeline=2, schedule="gpipe"), grad_accum=4)
    layer = whole.scaled.layer_activations
    assert layer > 0
    first = one_f_one_b.scaled.first_stage_activations("training")
    assert first == whole.scaled.activations("training")
    assert gpipe.scaled.first_stage_activations("training") - first == (
        4 * 2 - 2 * 2) * layer  # micro-batches in flight x layers of the stage
    # Beside the largest stage's activations, torch's receive buffers: a micro-batch's hidden states, each.
    assert one_f_one_b.scaled.activations("training") >= first + 2 * BATCH * SEQ * QWEN["hidden_size"] * 4
    # The stage's own blocks, and the layers every stage keeps (embeddings, final norm, LM head) whole.
    block = (whole.scaled.at("training", "parameters", 1) - whole.scaled.at("training", "parameters", 0))
    assert one_f_one_b.memory.parameters == whole.scaled.at("training", "parameters", 0) + 2 * block


def test_a_pipeline_sends_each_micro_batch_on_and_sums_the_shared_layers_gradients(model_source):
    prediction, traffic = rank(model_source, 2, Layout(pipeline=2), grad_accum=3)
    found = {(t.kind, t.phase, t.group): t for t in traffic if t.group == "pp"}
    hidden = BATCH * SEQ * QWEN["hidden_size"] * 4
    for phase in ("forward", "backward"):
        assert (found["send/recv", phase, "pp"].calls, found["send/recv", phase, "pp"].bytes) == (3, 3 * hidden)
    shared = 2 * QWEN["vocab_size"] * QWEN["hidden_size"] + QWEN["hidden_size"]  # embeddings, LM head, final norm
    assert [t.bytes for t in traffic if (t.kind, t.phase, t.group) == ("all-reduce", "optimizer", "pp")] == [
        shared * 4, 4]


def run(*args):
    return CliRunner().invoke(cli, ["preflight", *map(str, args)])


def test_the_report_names_the_collectives_a_910b_runs_for_the_layout(config, tmp_path):
    report_path = tmp_path / "report.json"
    result = run("--config", config, "--batch-size", BATCH, "--seq-len", SEQ, "--tp", 2, "--pp", 2, "--nproc", 8,
                 "--grad-accum", 2, "--device", "910b", "--report", report_path)

    assert result.exit_code == 0, result.output
    assert "ddp on 8 ranks (--tp 2 --pp 2 (1f1b), 2 data parallel)" in result.output
    lines = result.output.split("communication per rank and step (HCCL collectives):\n")[1].splitlines()
    report = json.loads(report_path.read_text())
    assert report["shape"]["layout"] == {"tensor": 2, "pipeline": 2, "sequence": False, "schedule": "1f1b"}
    assert {(c["kind"], c["group"]) for c in report["communication"]} == {
        ("all-reduce", "tp"), ("all-reduce", "dp"), ("all-reduce", "pp"), ("send/recv", "pp")}
    for collective, line in zip(report["communication"], lines):
        assert line.startswith(f"  {collective['kind']} over {collective['group']} ({collective['ranks']} ranks), ")


def test_each_collective_is_a_finding_in_the_machine_formats(config):
    result = run("--config", config, "--batch-size", BATCH, "--seq-len", SEQ, "--tp", 2, "--nproc", 2,
                 "--output-format", "json")
    assert result.exit_code == 0, result.output
    collectives = [f["message"] for f in json.loads(result.output) if f["code"] == "PF301"]
    assert [message.split(":")[0] for message in collectives] == [
        "all-reduce over tp (2 ranks), forward", "all-reduce over tp (2 ranks), backward",
        "all-reduce over tp (2 ranks), optimizer"]  # one copy of the model: no data-parallel average


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tp", 2, "--nproc", 3], "world size 3 is no multiple of --tp 2"),
        (["--tp", 3, "--nproc", 3], "the model's 4 attention heads do not split over --tp 3"),
        (["--pp", 3, "--nproc", 3, "--grad-accum", 3], "the model's 4 layers do not split over --pp 3"),
        (["--pp", 2, "--nproc", 2], "a 1F1B pipeline of 2 stages needs at least 2 micro-batches"),
        (["--sp", "--nproc", 2], "--sp splits the sequence over the --tp ranks: give --tp 2 or more"),
        (["--tp", 2, "--sp", "--nproc", 2, "--seq-len", 63], "--seq-len 63 does not split over --tp 2 (--sp)"),
        (["--tp", 2, "--nproc", 2, "--strategy", "zero2"], "--tp 2 composes with --strategy ddp, not yet with zero2"),
        (["--tp", 2, "--nproc", 2, "--lora-r", 4], "--tp 2 with --lora-r"),
    ],
)
def test_a_layout_that_does_not_divide_is_one_line_and_exit_2(args, message, config, tmp_path):
    report_path = tmp_path / "report.json"
    result = run("--config", config, "--report", report_path, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not report_path.exists()


@pytest.mark.parametrize(("args", "message"), [(["--tp", 0], "Invalid value for '--tp'"),
                                               (["--pp-schedule", "zb"], "Invalid value for '--pp-schedule'")])
def test_a_layout_option_out_of_range_exits_2_as_click_says(args, message, config):
    result = run("--config", config, *args)
    assert result.exit_code == 2 and message in result.output


def test_gpt2s_fused_attention_layer_is_refused_as_the_trainer_refuses_it(tmp_path):
    result = run("--preset", "gpt2-tiny", "--tp", 2, "--nproc", 2)
    assert result.exit_code == 2
    assert "tensor parallel splits pairs of nn.Linear layers, and GPT2Block runs none" in result.output
    assert len(result.output.strip().splitlines()) == 1
