"""The warm interpreter (tests/warm) runs a program as a new interpreter runs it, only without the imports before
its first line: the suite's processes start from it, so what they show holds only if this does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from tests import warm
from tests.processes import HUNG_S, REPO

pytestmark = pytest.mark.real_interpreter

# What a program sees of its interpreter, printed as JSON; it exits with WARM_PROBE_EXIT.
PROBE = """
import json, os, sys
seen = {"preloaded": "torch" in sys.modules, "argv": sys.argv, "cwd": os.getcwd(), "name": __name__,
        "path0": sys.path[0], "variable": os.environ.get("WARM_PROBE"), "stdin": sys.stdin.read(),
        "executable": sys.executable, "site": os.environ.get("SITECUSTOMIZED")}
print(json.dumps(seen))
print("to stderr", file=sys.stderr)
sys.exit(int(os.environ.get("PYTEST_WARM_PROBE_EXIT", "0")))
"""


@pytest.fixture(scope="module")
def folder():
    made = warm.new_folder()
    yield made
    warm.stop(made)


def environment(**variables: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **variables}


def run(python, *args, env: dict, cwd: Path | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *map(str, args)], input=stdin, capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=HUNG_S)  # fmt: skip


def probe(python, script: Path, *args, env: dict, cwd: Path | None = None) -> tuple[dict, subprocess.CompletedProcess]:
    done = run(python, script, *args, env=env, cwd=cwd, stdin="a line\n")
    return json.loads(done.stdout.splitlines()[0]), done


@pytest.fixture
def script(tmp_path) -> Path:
    path = tmp_path / "probe.py"
    path.write_text(PROBE)
    return path


def test_each_environment_has_a_server_and_what_varies_per_run_picks_none(folder, script):
    before = set(folder.glob("*.sock"))
    env = environment(WARM_PROBE="keyed")
    per_run = [probe(folder / "python", script, env={**env, "PYTEST_WARM_RUN": str(n), "RANK": str(n)})[0] for n in range(2)]
    another = probe(folder / "python", script, env={**env, "WARM_PROBE": "keyed too"})[0]
    assert [seen["preloaded"] for seen in [*per_run, another]] == [True] * 3
    assert {seen["executable"] for seen in [*per_run, another]} == {str(folder / "python")}
    assert len(set(folder.glob("*.sock")) - before) == 2


def test_a_script_sees_what_a_new_interpreter_shows_it(folder, script, tmp_path):
    env = environment(WARM_PROBE="shared", PYTEST_WARM_PROBE_EXIT="3")
    work = tmp_path / "work"
    work.mkdir()
    arguments = ("x", "y z", "--flag")
    new, new_run = probe(warm.REAL, script, *arguments, env=env, cwd=work)
    warmed, warm_run = probe(folder / "python", script, *arguments, env=env, cwd=work)
    assert warmed.pop("preloaded") and not new.pop("preloaded")
    assert (new.pop("executable"), warmed.pop("executable")) == (warm.REAL, str(folder / "python"))
    assert warmed == new == {**new, "argv": [str(script), *arguments], "cwd": str(work), "name": "__main__",
                             "path0": str(script.parent), "variable": "shared", "stdin": "a line\n"}  # fmt: skip
    assert (warm_run.returncode, warm_run.stderr) == (new_run.returncode, new_run.stderr) == (3, "to stderr\n")


def test_modules_code_and_the_ends_of_a_program_are_an_interpreters(folder, tmp_path):
    env = environment(WARM_PROBE="shared")
    (tmp_path / "probe_module.py").write_text("import sys\nprint(__name__, sys.argv)\n")
    cases = {
        "module": (["-m", "probe_module", "a"], 0, "__main__ ['" + str(tmp_path / "probe_module.py") + "', 'a']"),
        "code": (["-c", "import sys; print(sys.argv)", "b"], 0, "['-c', 'b']"),
        "unbuffered": (["-u", "-c", "print(1)"], 0, "1"),
        "exception": (["-c", "raise ValueError('broken')"], 1, ""),
        "exit message": (["-c", "import sys; sys.exit('a message')"], 1, ""),
        "ctrl-c": (["-c", "raise KeyboardInterrupt"], -signal.SIGINT, ""),
        "killed": (["-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"], -signal.SIGTERM, ""),
        # SIGKILL's handler cannot be set: the client dies by it all the same (the OOM killer's, a hung rank's).
        "killed outright": (["-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], -signal.SIGKILL, ""),
    }
    for name, (args, status, output) in cases.items():
        for python in (warm.REAL, folder / "python"):
            done = run(python, *args, env=env, cwd=tmp_path)
            assert (done.returncode, done.stdout.strip()) == (status, output), (name, python, done.stderr)
        if name == "exception":
            assert done.stderr.splitlines()[-1] == "ValueError: broken"
        if name == "exit message":
            assert done.stderr == "a message\n"


def test_a_signal_to_it_reaches_the_program_and_killing_it_kills_the_program(folder, tmp_path):
    env = environment(WARM_PROBE="shared")
    pid_file = tmp_path / "pid"
    code = textwrap.dedent(f"""
        import os, signal, sys, time
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(600)
    """)
    for stop, status in ((signal.SIGTERM, 7), (signal.SIGKILL, -signal.SIGKILL)):
        pid_file.unlink(missing_ok=True)
        client = subprocess.Popen([folder / "python", "-c", code], env=env)
        program = int(wait_for(pid_file).read_text())
        assert program != client.pid  # a fork of the server: killing its client must reach it
        client.send_signal(stop)
        assert client.wait(HUNG_S) == status
        assert gone(program), f"the program outlived its client killed by {stop.name}"


def test_the_processes_a_program_starts_with_its_interpreter_are_warm_too(folder, tmp_path):
    env = environment(WARM_PROBE="shared")
    program = tmp_path / "starts.py"
    program.write_text(textwrap.dedent("""
        import json, multiprocessing, os, subprocess, sys

        def preloaded(_):
            return "torch" in sys.modules

        if __name__ == "__main__":
            seen = {}
            for method in ("spawn", "forkserver"):
                with multiprocessing.get_context(method).Pool(1) as pool:
                    seen[method] = pool.map(preloaded, [0])
            child = subprocess.run([sys.executable, "-c", "import sys; print('torch' in sys.modules)"],
                                   capture_output=True, text=True, check=True)
            seen["subprocess"] = child.stdout.strip()
            print(json.dumps(seen))
    """))
    ranks = tmp_path / "ranks.py"
    ranks.write_text(textwrap.dedent("""
        import sys
        preloaded = "torch" in sys.modules
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        total = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(total)
        # One write: torchrun's ranks are unbuffered (-u), and print's two writes interleave on the shared pipe.
        sys.stdout.write(f"rank {dist.get_rank()} preloaded {preloaded} sum {total.item()}\\n")
        dist.destroy_process_group()
    """))
    started = run(folder / "python", program, env=env)
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout) == {"spawn": [True], "forkserver": [True], "subprocess": "True"}
    launched = run(folder / "python", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", ranks,
                   env=env)  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    ranks_said = sorted(line for line in launched.stdout.splitlines() if line.startswith("rank "))
    assert ranks_said == [f"rank {r} preloaded True sum 3.0" for r in (0, 1)], launched.stdout


def test_sitecustomize_runs_in_each_programs_own_environment(folder, script, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITECUSTOMIZED'] = os.environ['PYTEST_WARM_RUN']\n")
    base = environment(WARM_PROBE="site", PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    seen = [probe(folder / "python", script, env={**base, "PYTEST_WARM_RUN": str(n)})[0] for n in range(3)]
    assert [(s["preloaded"], s["site"]) for s in seen] == [(True, "0"), (True, "1"), (True, "2")]


def test_where_import_torch_loads_a_device_plugin_every_program_runs_new(folder, script, stand_in_device):
    env = {**stand_in_device("npu", autoload=True), "WARM_PROBE": "autoloaded"}
    seen = [probe(folder / "python", script, env=env)[0] for _ in range(3)]
    assert [(s["preloaded"], s["executable"]) for s in seen] == [(False, warm.REAL)] * 3


def wait_for(path: Path) -> Path:
    deadline = time.monotonic() + HUNG_S
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return path


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (reaped by its parent, the server), within HUNG_S."""
    deadline = time.monotonic() + HUNG_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False

