"""Each log reader on a real public log (tests/parity/data/logs/README.md cites repository, commit and license):
detected from its content, the figures read by eye from the file, and the format's pitfalls (duplicated lines,
steps from 0, a NaN left out, an lr printed for the next step, a resumed run's repeated steps)."""

import math

import pytest

from portlayer.train.logs import LogError, read_log
from portlayer.train.logs import tensorboard as tb
from portlayer.train.logs.numbers import FLOAT32, Resolution
from tests.parity.logs_data import LOGS


def test_trainer_state_reads_the_training_entries_and_leaves_evaluations_out():
    series = read_log(LOGS / "trainer_state_viz.trainer_state.json")
    assert series.format == "trainer_state.json"
    assert len(series.points) == 30  # of 216 log_history entries: 186 are evaluations of six eval sets
    first, last = series.points[0], series.points[-1]
    assert (first.step, first.values) == (401, {"loss": 1.1074, "grad_norm": 5.49674654006958, "lr": 1e-05})
    assert (last.step, last.values["loss"]) == (12030, 0.0549)
    assert series.loss_is_interval_mean  # HuggingFace logs the mean since its previous log
    # transformers of that time rounded the logged loss to 4 decimals; never the norm or the lr.
    assert series.resolution("loss") == Resolution(absolute=5e-5)
    assert series.resolution("lr") == Resolution()


def test_ms_swift_2_writes_every_line_twice_which_is_one_step():
    series = read_log(LOGS / "swift2_internvl.logging.head120.jsonl")
    assert series.format == "ms-swift logging.jsonl"
    assert [point.step for point in series.points[:4]] == [1, 5, 10, 15]
    assert len(series.points) == 60  # 120 lines
    assert series.points[1].values == {"loss": 4.96214485, "grad_norm": 476.0, "lr": 5.6e-07}
    assert series.notes == ()  # identical repeats (but for the speed) are no resumed run
    # Every float rounded to 8 decimals: an lr of 5.6e-07 may be anything within 5e-9 of it.
    assert series.resolution("lr") == Resolution(absolute=5e-9)


def test_megatron_iteration_lines_amid_start_up_noise_and_a_slurm_kill():
    series = read_log(LOGS / "lumi_rocm_megatron.lines1560-1604.log")
    assert series.format == "Megatron-LM log"
    assert [point.step for point in series.points] == list(range(1, 18))
    assert series.points[0].values == {"loss": 10.9923, "grad_norm": 62.521, "lr": 1.49169e-04}
    assert series.points[-1].values == {"loss": 8.424495, "grad_norm": 4.336, "lr": 2.235706e-05}
    # `%.6E` for the loss and lr: seven significant digits; `%.3f` for the norm.
    assert series.resolution("loss") == Resolution(relative=5e-7)
    assert series.resolution("grad_norm") == Resolution(absolute=5e-4)


def test_mindspeed_llm_fsdp2_lines_read_as_megatron_and_a_second_run_overwrites_the_first():
    series = read_log(LOGS / "mindspeed_llm_fsdp2_doc_excerpt.log")
    assert series.format == "Megatron-LM log"
    assert [point.step for point in series.points] == [1, 2, 3]
    # The excerpt pastes two runs' iterations 1-3: the later wins, as after a resume, and a note says so.
    assert series.points[0].values == {"loss": 3.316887, "grad_norm": 70.959, "lr": 1.666667e-07}
    assert series.notes == (f"{LOGS / 'mindspeed_llm_fsdp2_doc_excerpt.log'}: 3 steps logged again with other"
                            " values (a resumed run?): the later kept",)  # fmt: skip


def test_deepspeed_step_lines_give_the_next_steps_learning_rate_and_no_loss():
    series = read_log(LOGS / "dschat_step1_sft_opt1.3b.head200.log")
    assert series.format == "DeepSpeed log"
    assert series.quantities() == ("lr",)  # DeepSpeed's engine prints no loss
    # `step=10, skipped=6, lr=[9.649992967150629e-06, …]` is printed after the schedule stepped: step 11's lr.
    assert (series.points[0].step, series.points[0].values) == (11, {"lr": 9.649992967150629e-06})
    assert [point.step for point in series.points[:3]] == [11, 21, 31]


def test_a_real_summary_writer_file_decodes_with_its_checksums_and_repeated_steps():
    data = (LOGS / "tb_reducer_duplicate_steps.events.out.tfevents.1622966509.janoshs-mbp.lan.86059.0").read_bytes()
    records, cut = tb.records(data, "tb")
    assert not cut
    assert all(tb.masked_crc32c(record) == checksum for record, checksum in records)
    found = [scalar for record, _ in records for scalar in tb.scalars(record)]
    assert {tag for _, tag, _, _ in found} == {"dup_steps/foo", "dup_steps/bar"}
    foo = [step for step, tag, _, _ in found if tag == "dup_steps/foo"]
    assert foo == [*range(100), *range(90, 200)]  # a resumed writer: steps 90-99 twice
    assert all(is_float32 for *_, is_float32 in found)


def test_tensorboard_tags_of_no_training_quantity_are_refused_in_one_line():
    path = LOGS / "tb_reducer_duplicate_steps.events.out.tfevents.1622966509.janoshs-mbp.lan.86059.0"
    with pytest.raises(LogError, match="no step that logged a loss, gradient norm or learning rate"):
        read_log(path)


def test_huggingface_tensorboard_events_hold_float32_of_its_trainer_state():
    """generated_hf_tiny/: one HuggingFace Trainer run written both ways by transformers itself."""
    events, state = read_log(LOGS / "generated_hf_tiny"), read_log(LOGS / "generated_hf_tiny/trainer_state.json")
    assert events.format == "TensorBoard events"
    assert [p.step for p in events.points] == [p.step for p in state.points] == list(range(1, 31))
    for from_events, from_state in zip(events.points, state.points):
        for quantity, value in from_state.values.items():
            assert from_events.values[quantity] == pytest.approx(value, rel=FLOAT32.relative, abs=1e-12)
    assert events.resolution("loss") == FLOAT32


def test_a_csv_counting_steps_from_0_is_read_from_1_and_says_so():
    series = read_log(LOGS / "deepspeed_bf16_master_weight.baseline_loss.head200.csv")
    assert series.format == "CSV file"
    assert (series.points[0].step, series.points[0].values) == (1, {"loss": 11.125})
    assert series.points[-1].step == 200
    assert any("counted from 0 in the file, from 1 here" in note for note in series.notes)


def test_a_file_no_reader_knows_is_one_line_naming_the_formats(tmp_path):
    unknown = tmp_path / "notes.txt"
    unknown.write_text("training went fine\n")
    with pytest.raises(LogError) as raised:
        read_log(unknown)
    assert str(raised.value) == (
        f"{unknown}: not a training log this reads (tensorboard, portlayer, trainer_state, ms-swift, jsonl,"
        " megatron, deepspeed, csv); name one with --format"
    )


def test_json_nan_and_infinity_as_python_writes_them(tmp_path):
    state = tmp_path / "trainer_state.json"
    state.write_text('{"log_history": [{"loss": 2.5, "grad_norm": NaN, "learning_rate": 1e-3, "step": 1},'
                     ' {"loss": Infinity, "grad_norm": 1.5, "learning_rate": 1e-3, "step": 2}]}')  # fmt: skip
    series = read_log(state)
    assert math.isnan(series.points[0].values["grad_norm"])
    assert series.points[1].values["loss"] == math.inf


def test_megatron_leaves_a_nan_loss_out_of_the_line_and_counts_it(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(
        " iteration        1/       2 | learning rate: 1.000000E-04 | lm loss: 7.500000E+00 | grad norm: 2.500 |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        " iteration        2/       2 | learning rate: 1.000000E-04 | grad norm: 2.400 |"
        " number of skipped iterations:   0 | number of nan iterations:   1 |\n"
        " validation loss at iteration 2 | lm loss value: 7.400000E+00 | lm loss PPL: 1.6E+03 |\n"
    )
    series = read_log(log)
    assert [point.step for point in series.points] == [1, 2]
    assert math.isnan(series.points[1].values["loss"])


def test_a_resumed_append_only_log_keeps_the_later_values_and_counts_them(tmp_path):
    log = tmp_path / "log.jsonl"
    rows = [(1, 3.0), (2, 2.9), (3, 2.8), (2, 2.95), (3, 2.85), (4, 2.7)]
    log.write_text("".join(f'{{"step": {step}, "loss": {loss}}}\n' for step, loss in rows))
    series = read_log(log)
    assert [point.values["loss"] for point in series.points] == [3.0, 2.95, 2.85, 2.7]
    assert any("2 steps logged again with other values" in note for note in series.notes)


def test_format_forces_a_reader_and_a_wrong_one_fails_in_one_line():
    with pytest.raises(LogError, match="not a UTF-8 text file"):
        read_log(LOGS / "generated_hf_tiny/events.out.tfevents.1795740650.vm.22943.0", format="megatron")
    forced = read_log(LOGS / "deepspeed_bf16_master_weight.bf16_full_loss.head200.csv", format="csv")
    assert forced.points[0].values == {"loss": 11.1134033203125}
