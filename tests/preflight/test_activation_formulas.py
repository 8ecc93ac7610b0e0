"""Preflight's activations per layer against Korthikanti et al. 2022's closed forms (portlayer/preflight/
activation_formulas.py), within 10% where the paper's assumptions hold, and by what is explained where not."""

import pytest

from portlayer.preflight import activation_formulas as paper
from portlayer.preflight.activation_formulas import EAGER, FUSED, Activations
from portlayer.preflight.model_source import Training
from portlayer.preflight.per_rank import On, predict
from portlayer.preflight.plan import Shape, source
from portlayer.preflight.targets import get_target
from portlayer.strategies.layout import Layout
from portlayer.train.presets import CONFIG_DIR

SHAPES = [(2048, 1, 12288, 96), (1024, 4, 4096, 32), (512, 8, 768, 12), (128, 56, 1024, 16)]  # s, b, h, a
# bert-base: the paper's block (layer norms, a GeLU MLP of 4h, biases, dropout), at a batch whose peak holds every layer's activations (the loss's, not the
# embedding gradient's at the backward's end) and where the attention's s x s tensors weigh in (4as/h = 32 sbh).
# Its published config, kept in the repository (nothing is downloaded).
BERT, BATCH, SEQ = str(CONFIG_DIR / "bert-base-uncased.json"), 8, 512


@pytest.mark.parametrize(("s", "b", "h", "a"), SHAPES)
@pytest.mark.parametrize("t", [1, 2, 8])
def test_the_tensor_by_tensor_count_at_the_papers_assumptions_is_its_equations(s, b, h, a, t):
    assert paper.layer_bytes(s, b, h, a) == pytest.approx(paper.no_parallelism(s, b, h, a))
    assert paper.layer_bytes(s, b, h, a, t) == pytest.approx(paper.tensor_parallel(s, b, h, a, t))
    assert paper.layer_bytes(s, b, h, a, t, sequence_parallel=True) == pytest.approx(
        paper.sequence_parallel(s, b, h, a, t))
    # Eq. (4): the first stage of any pipeline depth holds the whole model's layers' worth under 1F1B.
    assert paper.first_pipeline_stage(s, b, h, a, t, layers=24) == pytest.approx(
        24 * paper.sequence_parallel(s, b, h, a, t))


def layer_activations(tensor: int, sequence: bool = False, **training) -> tuple[int, int]:
    """(preflight's activations per layer on a rank of --tp `tensor` (--sp), s*b*h) for bert-base on an H100's
    kernels."""
    layout = Layout(tensor, sequence=sequence)
    shape = Shape(None, BATCH, SEQ, {}, Training(nproc=tensor, layout=layout, **training), config_path=BERT)
    model = source(shape)
    prediction = predict(model, shape.training, on=On(get_target("cuda"), (9, 0)))
    return prediction.scaled.layer_activations, SEQ * BATCH * model.config.hidden_size


@pytest.mark.parametrize("tensor", [1, 2, 4])
@pytest.mark.parametrize(
    ("training", "saved"),
    [
        # The trainer's step in fp32: sdpa's fused kernel (no s x s tensor kept), dropout's 1-byte masks.
        ({}, Activations(element=4, dropout=True, attention=FUSED)),
        # Parity mode: eager attention keeps the softmax output; no dropout.
        ({"parity": True}, Activations(element=4, dropout=False, attention=EAGER)),
    ],
)
def test_activations_per_layer_are_the_papers_count_within_10_percent(tensor, training, saved):
    measured, _ = layer_activations(tensor, **training)
    counted = paper.layer_bytes(SEQ, BATCH, 768, 12, tensor, saved=saved)
    assert abs(measured - counted) <= 0.10 * counted, (measured, counted)


def autocast_extra(sbh: int, h: int, t: int, fp32_weights: bool) -> float:
    """What a layer keeps under bf16 autocast beyond the paper's 16-bit count. Layer norm runs in fp32 and keeps
    its input as an fp32 copy (2 x 4sbh, not 2 x 2sbh), and q, k and v each cast the norm's fp32 output to bf16
    (3 x 2sbh, not one 2sbh input): 8 sbh, outside the split matmuls. Over fp32 weights (the trainer's bf16),
    autocast also keeps the bf16 copy it made of each weight until the forward ends: 2 bytes x 12h² a layer
    (q, k, v, o: 4h²; the MLP: 8h²), split like the weights."""
    return 8 * sbh + (2 * 12 * h * h / t if fp32_weights else 0)


@pytest.mark.parametrize("tensor", [1, 2])
@pytest.mark.parametrize("training", [{"weights": "bf16"}, {"precision": "bf16"}])
def test_under_bf16_autocast_a_layer_keeps_what_autocast_adds_to_the_papers_16_bit_count(tensor, training):
    # The paper's own element size; the fused attention keeps no s x s tensor.
    measured, sbh = layer_activations(tensor, **training)
    counted = paper.layer_bytes(SEQ, BATCH, 768, 12, tensor, saved=Activations(2, dropout=True, attention=FUSED))
    extra = autocast_extra(sbh, 768, tensor, fp32_weights="precision" in training)
    assert abs(measured - (counted + extra)) <= 0.10 * counted, (measured / sbh, counted / sbh, extra / sbh)
    assert abs(measured - counted) > 0.10 * counted  # the paper's count alone is not enough: the extra is real


@pytest.mark.parametrize("tensor", [2, 4])
def test_sequence_parallel_keeps_the_gathered_inputs_of_the_qkv_and_mlp_matmuls_whole(tensor):
    # Megatron keeps the QKV's and the first MLP matmul's input split along the sequence and gathers it again in
    # the backward (§4.2.2); the trainer's DTensor layers keep what they gathered: those two inputs stay whole,
    # 2 x (1 - 1/t) x 4 sbh in fp32 more than eq. (3)'s count, traded for one all-gather less in the backward.
    measured, sbh = layer_activations(tensor, sequence=True)
    saved = Activations(element=4, dropout=True, attention=FUSED)
    counted = paper.layer_bytes(SEQ, BATCH, 768, 12, tensor, sequence_parallel=True, saved=saved)
    gathered_whole = 2 * saved.element * sbh * (1 - 1 / tensor)
    assert abs(measured - (counted + gathered_whole)) <= 0.10 * counted, (measured / sbh, counted / sbh)
    assert abs(measured - counted) > 0.10 * counted
