"""`dump` + `diff`: per-module statistics from two runs (two machines) name the module that diverges."""

from __future__ import annotations

import json

import pytest
import torch

from portlayer.train.locate import DumpError, collect, diff, read_dump, write_dump
from portlayer.train.locate.stats import SAMPLE_SIZE, Stats, sample_indices
from tests.locate.models import (  # noqa: F401 (one_thread is a fixture)
    conv1d_in_bf16,
    on_device_only,
    one_thread,
    tiny_gpt2,
    wrong_eps,
)


@pytest.fixture(scope="module")
def clean_dump(tmp_path_factory):
    model, batch = tiny_gpt2()
    path = tmp_path_factory.mktemp("dumps") / "clean.json"
    write_dump(collect(model, batch, model_name="tiny-gpt2"), path)
    return path


def faulty_dump(path, fault_at, fault, *, full=False):
    model, batch = tiny_gpt2()
    on_device_only(fault_at(model), fault)
    write_dump(collect(model, batch, model_name="tiny-gpt2", full=full), path)
    return path


def test_dump_round_trips(clean_dump):
    dump = read_dump(clean_dump)
    write_dump(dump, clean_dump.with_name("again.json"))
    assert json.loads(clean_dump.read_text()) == json.loads(clean_dump.with_name("again.json").read_text())
    ln = next(call for call in dump.calls if call.key == "transformer.h.0.ln_1")
    assert (ln.module_type, ln.depth, dump.calls[ln.parent].key) == ("LayerNorm", 3, "transformer.h.0")
    (out,) = ln.outputs
    assert out.shape == [2, 12, 32] and out.dtype == "float32" and len(out.sample) == SAMPLE_SIZE
    assert abs(out.mean) < 1e-5  # a fresh layer norm: zero mean, unit scale
    assert dump.side.backend == "cpu" and dump.side.dtype == "float32"
    assert set(dump.params) == {name for name, _ in tiny_gpt2()[0].named_parameters()}


def test_the_sample_is_fixed_by_position_and_matches_the_tensor():
    t = torch.arange(1000, dtype=torch.float32).reshape(10, 100)
    stats = Stats.of(t)
    assert stats.sample == [float(i) for i in sample_indices(1000)]
    assert sample_indices(1000) == sample_indices(1000) and len(set(sample_indices(1000))) > 60
    assert Stats.of(torch.ones(3)).sample == [1.0, 1.0, 1.0]  # small tensors: every element
    assert (stats.min, stats.max, stats.norm) == (0.0, 999.0, pytest.approx(float(t.norm())))


def test_same_run_twice_reports_no_divergence(clean_dump):
    result = diff(read_dump(clean_dump), read_dump(clean_dump))
    assert not result.diverged
    assert all(row.output.rel == 0.0 for row in result.rows)


def test_diff_names_the_layer_norm_with_a_wrong_eps(clean_dump, tmp_path):
    faulty = faulty_dump(tmp_path / "b.json", lambda m: m.transformer.h[1].ln_1, wrong_eps)
    result = diff(read_dump(clean_dump), read_dump(faulty))
    assert result.culprit_name == "transformer.h.1.ln_1"
    assert "its inputs by 0.00e+00" in result.summary()


def test_diff_names_the_layer_computed_in_bf16(clean_dump, tmp_path):
    faulty = faulty_dump(
        tmp_path / "b.json", lambda m: m.transformer.h[0].mlp.c_fc, conv1d_in_bf16, full=True
    )
    assert faulty.with_name("b.json.pt").is_file()
    result = diff(read_dump(clean_dump), read_dump(faulty))
    assert result.culprit_name == "transformer.h.0.mlp.c_fc"


def test_float64_against_float32_is_rounding_only(clean_dump):
    model, batch = tiny_gpt2()
    exact = collect(model, batch, model_name="tiny-gpt2", dtype=torch.float64)
    result = diff(exact, read_dump(clean_dump))
    assert not result.diverged
    assert [side.dtype for _, side in result.sides] == ["float64", "float32"]
    assert 0 < max(row.output.rel for row in result.rows) < 1e-5


def test_unreadable_and_mismatched_dumps_are_refused(clean_dump, tmp_path):
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(DumpError, match="not a readable JSON dump"):
        read_dump(tmp_path / "junk.json")
    with pytest.raises(DumpError, match="no such file"):
        read_dump(tmp_path / "missing.json")
    document = json.loads(clean_dump.read_text())
    document["version"] = 99
    (tmp_path / "future.json").write_text(json.dumps(document))
    with pytest.raises(DumpError, match="dump version 99"):
        read_dump(tmp_path / "future.json")
    model, batch = tiny_gpt2(seed=1)  # another batch
    other = collect(model, batch, model_name="tiny-gpt2")
    with pytest.raises(DumpError, match="different batches"):
        diff(read_dump(clean_dump), other)
