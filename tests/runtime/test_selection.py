"""Choosing the backend: PORTLAYER_BACKEND, then probing; failures are one clear line."""

import dataclasses

import pytest

from portlayer.errors import PortlayerError
from portlayer.selection import select
from tests.accelerator import selected_without_accelerators
from tests.processes import run_python


def test_without_accelerators_the_probe_falls_back_to_cpu():
    selection = selected_without_accelerators()
    assert selection["backend"] == "cpu"
    assert selection["reason"] == "no accelerator found"
    assert list(selection["probes"])[-1] == "cpu"
    assert not any(available for available, _ in list(selection["probes"].values())[:-1])


def test_a_selection_cannot_be_changed():
    with pytest.raises(dataclasses.FrozenInstanceError):
        select("cpu").probes[0].available = False


def test_the_environment_variable_forces_a_backend(monkeypatch):
    monkeypatch.setenv("PORTLAYER_BACKEND", "CPU")
    selection = select()
    assert selection.backend.name == "cpu"
    assert selection.reason == "forced by PORTLAYER_BACKEND=cpu"


def test_an_unknown_backend_names_the_choices(monkeypatch):
    monkeypatch.setenv("PORTLAYER_BACKEND", "bogus")
    with pytest.raises(PortlayerError) as error:
        select()
    assert str(error.value) == (
        "PORTLAYER_BACKEND=bogus is not a backend portlayer knows; "
        "choose one of npu, musa, mlu, hpu, sdaa, supa, xpu, cuda, mps, cpu"
    )


def test_a_missing_plugin_is_named_with_how_to_install_it():
    # mlu: a plugin no host of the suite has (the stand-in accelerator of tests/accelerator.py is npu or musa).
    with pytest.raises(
        PortlayerError, match=r"^backend 'mlu' needs the torch_mlu package, which is not installed \(install"
    ):
        select("mlu")


def test_a_backend_without_a_device_says_so():
    error = selected_without_accelerators("cuda")["error"]
    assert error == "backend 'cuda' cannot be used: no device visible"


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        (
            "bogus",
            "portlayer: error: PORTLAYER_BACKEND=bogus is not a backend portlayer knows; choose one of",
        ),
        (
            "npu",
            "portlayer: error: PORTLAYER_BACKEND=npu needs the torch_npu package, which is not installed",
        ),
    ],
)
def test_doctor_fails_with_one_line_and_exit_2(backend, message):
    result = run_python(
        "from portlayer.cli import main; main(['doctor'])",
        fake_plugins=False,
        env={"PORTLAYER_BACKEND": backend},
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(message)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no-such-command"], "portlayer: error: No such command 'no-such-command'.\n"),
        (["doctor", "--bogus"], "portlayer: error: No such option '--bogus'.\n"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(argv, message, capsys):
    from portlayer.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err == message


@pytest.mark.parametrize(
    ("argv", "usage"), [([], "Usage: portlayer [OPTIONS]"), (["parity"], "Usage: portlayer parity")]
)
def test_a_bare_command_prints_its_usage_not_an_error_line(argv, usage, capsys):
    from portlayer.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2  # as ruff and click: usage shown because arguments were missing
    err = capsys.readouterr().err
    assert err.startswith(usage) and "\nCommands:\n" in err
    assert "error:" not in err
