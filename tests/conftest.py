import importlib.util
import os
import subprocess
import sys

import pytest

from tests import accelerator, fake_device, warm
from tests.processes import fresh_process_json

# Nothing in the tests may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# torch.compile's C++ is compiled in the compiling process: with inductor's default pool of workers, each importing
# torch, the compile test took 117 s against 87 s (2 cores, both busy).
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
# DeepSpeed's cpu accelerator compiles its shared-memory collective on first use (ninja, about a minute): once per
# checkout for every process of the run, beside the stand-in device, not in the user-wide cache that other
# checkouts' builds overwrite.
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(fake_device.REPO / "tests" / ".fake_device_cache" / "torch_extensions"))
# PORTLAYER_TESTS_ACCELERATOR=npu: the run as on a host with an accelerator (tests/accelerator.py).
accelerator.show()

# A GPU machine's own environment may lack DeepSpeed (a source archive, built here against the pinned torch). The
# GPU lane says so with this variable, and only then are the tests that need it skipped: without it, a missing
# DeepSpeed fails them, so that `make test` cannot lose them quietly.
WITHOUT_DEEPSPEED = "PORTLAYER_TESTS_WITHOUT_DEEPSPEED"


def pytest_configure(config):
    config.addinivalue_line("markers", f"deepspeed: needs DeepSpeed; skipped where {WITHOUT_DEEPSPEED}=1 (no DeepSpeed)")
    config.addinivalue_line("markers", "real_interpreter: the test's processes start a new interpreter, not the warm one")
    # The session's first process (xdist's controller) makes the warm interpreter's folder, which its workers share.
    if not hasattr(config, "workerinput"):
        warm.start_session()


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        warm.end_session()


def pytest_collection_finish(session):
    """The stand-in device compiles on first use in a checkout, about a minute on one core. Left to the tests, the
    first that needs it compiles it while a test on the other worker that needs it too waits on the lock, a core
    idle: so a run with tests on the stand-in starts the build as soon as they are collected, beside the tests that
    need none (a run without them compiles nothing, tests/stand_in/test_on_demand.py). Once built, the process only
    finds it cached; stopped half-way, it leaves nothing behind (its lock is a flock, its output a temporary
    file)."""
    # Under xdist each worker collects every test: the first worker starts the build.
    if getattr(session.config, "workerinput", {}).get("workerid", "gw0") != "gw0":
        return
    if any("stand_in_device" in item.fixturenames for item in session.items):
        subprocess.Popen(
            [sys.executable, str(fake_device.BUILD)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


def pytest_collection_modifyitems(config, items):
    if os.environ.get(WITHOUT_DEEPSPEED) != "1" or importlib.util.find_spec("deepspeed") is not None:
        return
    skip = pytest.mark.skip(reason=f"DeepSpeed is not installed on this machine ({WITHOUT_DEEPSPEED}=1)")
    for item in items:
        if "deepspeed" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def warm_interpreter(request, monkeypatch):
    """The processes a test starts with `sys.executable` start from the warm interpreter (tests/warm): the same
    program, without the seconds of imports before its first line. A test about the interpreter itself (its
    startup, an install, a venv) is marked `real_interpreter`."""
    if request.node.get_closest_marker("real_interpreter") is None:
        monkeypatch.setattr(sys, "executable", warm.python())


@pytest.fixture(scope="module")
def cpu_backend():
    """The module's tests run on portlayer's cpu backend, whatever the host has (on a GPU host the probe picks
    cuda), and the backend active before is active again after: later tests in the worker see what they would."""
    import portlayer
    from portlayer import runtime

    before = runtime.selection().backend.name
    portlayer.activate("cpu")
    yield
    portlayer.activate(before)


@pytest.fixture
def in_fresh_process():
    return fresh_process_json


@pytest.fixture(scope="session")
def stand_in_device():
    """`tests.fake_device.environment`, with the stand-in device compiled. Only the tests that start a process
    on the stand-in pay for compiling it (once per machine and source change, about a minute): they ask for
    this fixture, or call `fake_device.environment` / `torchrun` / `run_python`, which compile it first."""
    fake_device.build()
    return fake_device.environment


@pytest.fixture
def without_accelerators(monkeypatch):
    """This test means a host without accelerators: the processes it starts see none (tests/accelerator.py).
    Returns that environment, for the test's own subprocesses."""
    hidden = accelerator.hidden()
    for name in set(os.environ) - set(hidden):
        monkeypatch.delenv(name)
    for name, value in hidden.items():
        monkeypatch.setenv(name, value)
    return hidden
