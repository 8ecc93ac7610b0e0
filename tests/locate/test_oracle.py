"""`locate`: one forward and backward on the device against a float64 cpu oracle names the faulty module."""

from __future__ import annotations

import torch

from portlayer.train.locate import locate
from tests.locate.models import (  # noqa: F401 (one_thread is a fixture)
    backward_off_by_one_percent,
    conv1d_in_bf16,
    on_device_only,
    one_thread,
    tiny_gpt2,
    tiny_mlp,
    wrong_eps,
)


def test_clean_model_reports_no_divergence():
    model, batch = tiny_gpt2()
    result = locate(model, batch)
    assert not result.diverged and result.culprit_name is None
    assert result.summary().startswith("no divergence")
    # Every module ran on both sides, in execution order, parents before children.
    keys = [row.key for row in result.rows]
    assert keys[:3] == ["<model>", "transformer", "transformer.wte"]
    assert keys.index("transformer.h.1.ln_2") < keys.index("transformer.h.1.mlp") < keys.index("lm_head")
    assert all(row.output.rel < 1e-5 and row.output.cos > 0.999999 for row in result.rows)


def test_wrong_layer_norm_eps_is_named_not_the_modules_after_it():
    model, batch = tiny_gpt2()
    on_device_only(model.transformer.h[0].ln_2, wrong_eps)
    result = locate(model, batch)
    assert result.culprit_name == "transformer.h.0.ln_2"
    # Downstream modules (and the model's own loss) diverge too, as the run went …
    rows = {row.key: row for row in result.rows}
    assert rows["transformer.h.1.attn"].output.rel > result.tolerance
    # … but their own error is rounding, so none of them is flagged; the enclosing block is, being
    # the one whose code includes the layer norm, and is explained by it.
    flagged = {row.key for row in result.rows if row.flagged}
    assert flagged == {"<model>", "transformer", "transformer.h.0", "transformer.h.0.ln_2"}
    assert "first divergence: transformer.h.0.ln_2 (LayerNorm)" in result.render()


def test_one_layer_computed_in_bf16_is_named():
    model, batch = tiny_gpt2()
    on_device_only(model.transformer.h[1].attn.c_proj, conv1d_in_bf16)
    result = locate(model, batch)
    assert result.culprit_name == "transformer.h.1.attn.c_proj"
    culprit = result.rows[result.culprit]
    # bf16 has 8 bits of mantissa: its own error is near 2^-8, orders above float32 rounding.
    assert 1e-4 < culprit.basis < 1e-1


def test_a_wrong_backward_is_named_although_every_output_agrees():
    model, batch = tiny_gpt2()
    on_device_only(model.transformer.ln_f, backward_off_by_one_percent)
    result = locate(model, batch)
    assert all(row.output.rel < 1e-5 for row in result.rows)
    assert result.culprit_name == "transformer.ln_f"


def test_any_module_and_batch_and_the_model_is_left_untouched():
    model, batch = tiny_mlp()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    on_device_only(model.body[2], wrong_eps)
    result = locate(model, batch)
    assert result.culprit_name == "body.2"
    assert [row.key for row in result.rows] == ["<model>", "body", "body.0", "body.1", "body.2", "body.3"]
    assert all(torch.equal(p, before[name]) and p.grad is None for name, p in model.named_parameters())
    assert next(model.parameters()).dtype == torch.float32


def test_sides_and_dtype_are_reported():
    model, batch = tiny_mlp()
    result = locate(model, batch, dtype=torch.bfloat16)
    (oracle_label, oracle), (device_label, device) = result.sides
    assert (oracle_label, oracle.device, oracle.dtype) == ("oracle", "cpu", "float64")
    assert (device_label, device.backend, device.dtype) == ("device", "cpu", "bfloat16")
    # Judged against bf16 rounding, a correct model in bf16 is clean.
    assert not result.diverged
    assert "bfloat16" in result.render().splitlines()[1]
