"""The warm interpreter's `python`: `WRAPPER [-u] [-B] (SCRIPT | -m MODULE | -c CODE) [ARGS…]`.

It hands the program to the server for its environment (server.py), starting that server first if there is none,
and then stands for the program: its exit status is the program's, a signal it gets is passed on to the program,
and killing it kills the program. Anything else it is asked to run (other options, file descriptors passed on,
no server to be had) it runs as the real interpreter, which it then becomes.

Standard library only, and started with `-I -S`: it costs a few milliseconds, where the interpreter it stands in
for costs seconds of imports.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server.py")
# A server that has run nothing for this long exits: the programs of one environment mostly come together (a
# test's runs, a module's tests).
IDLE_S = 120
# Beside the socket's path, the server's word that this environment gets no server (server.py writes it).
COLD = ".cold"
# Variables that do not pick the server: those a server never reads, portlayer's and the stand-in plugins' (it
# imports neither), and those that differ from one run or process to the next and that nothing reads at import
# (inductor's is a pointer of the process that wrote it).
NOT_KEYED = ("PORTLAYER_", "FAKE_", "PYTEST_", "TORCHELASTIC_", "TORCH_ELASTIC_", "_TORCHINDUCTOR_PYOBJECT_")
NOT_KEYED_NAMES = {
    "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "PWD", "OLDPWD", "_",
}  # fmt: skip
PASSED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def parse(argv: list[str]) -> dict | None:
    """The request for `python ARGV`, or None where it is not one the server runs."""
    original = argv
    flags = {"-u": False, "-B": False}  # unbuffered streams; no bytecode written (multiprocessing passes it on)
    while argv and argv[0] in flags:
        flags[argv[0]], argv = True, argv[1:]
    if not argv:
        return None
    if argv[0] in ("-m", "-c"):
        if len(argv) < 2:
            return None
        mode, target, args = ("module" if argv[0] == "-m" else "code"), argv[1], argv[2:]
    elif argv[0].startswith("-"):
        return None
    else:
        mode, target, args = "script", os.path.abspath(argv[0]), argv[1:]
    return {"argv": original, "mode": mode, "target": target, "args": args, "unbuffered": flags["-u"],
            "no_bytecode": flags["-B"], "cwd": os.getcwd(), "env": dict(os.environ)}  # fmt: skip


def key(env: dict) -> str:
    kept = sorted(
        (name, value) for name, value in env.items() if name not in NOT_KEYED_NAMES and not name.startswith(NOT_KEYED)
    )
    return hashlib.sha256(json.dumps(kept).encode()).hexdigest()[:16]


def connect(folder: str, env: dict) -> socket.socket | None:
    """A connection to the server for `env`, started now if there is none; None where none can be had."""
    name = os.path.join(folder, key(env))
    if os.path.exists(name + ".sock" + COLD):
        return None
    connection = try_connect(name + ".sock")
    if connection is not None:
        return connection
    with open(name + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        connection = try_connect(name + ".sock")
        if connection is not None:
            return connection
        if os.path.exists(name + ".sock"):
            os.unlink(name + ".sock")  # a server that is gone
        with open(name + ".log", "ab") as log:
            server = subprocess.Popen(
                [sys.executable, SERVER, name + ".sock", os.path.join(folder, "python"), str(IDLE_S)],
                env=env, cwd=folder, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
        with open(name + ".pids", "a") as pids:
            pids.write(f"{server.pid}\n")
        while server.poll() is None:
            connection = try_connect(name + ".sock")
            if connection is not None:
                return connection
            time.sleep(0.05)
    return None


def try_connect(path: str) -> socket.socket | None:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        connection.close()
        return None
    return connection


def replies(connection: socket.socket):
    buffer = b""
    while True:
        while b"\n" not in buffer:
            try:
                chunk = connection.recv(4096)
            except InterruptedError:
                continue
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        yield json.loads(line)


def open_descriptors(connection: socket.socket) -> list[int]:
    """The descriptors this process has open, the connection's aside: the program gets them under the same
    numbers (multiprocessing's fork server and spawn name theirs on the command line)."""
    listed = [int(name) for name in os.listdir("/proc/self/fd")]
    return [fd for fd in listed if fd != connection.fileno() and is_open(fd)]


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def stand_for(connection: socket.socket, request: dict) -> int:
    """Hand the program over; return its wait status."""
    descriptors = open_descriptors(connection)
    request["descriptors"] = descriptors
    socket.send_fds(connection, [json.dumps(request).encode()], descriptors)
    answers = replies(connection)
    started = next(answers, None)
    if started is None:
        raise ConnectionError("the server ran nothing")
    pid = started["pid"]

    def pass_on(number, _frame):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)

    for number in PASSED_SIGNALS:
        signal.signal(number, pass_on)
    ended = next(answers, None)
    if ended is None:
        # The server was killed under the program, which went with it.
        return signal.SIGKILL
    return ended["status"]


def main() -> None:
    folder, argv = sys.argv[1], sys.argv[2:]
    request = parse(argv)
    connection = None if request is None else connect(folder, request["env"])
    if connection is None:
        os.execv(sys.executable, [sys.executable, *argv])
    try:
        status = stand_for(connection, request)
    except ConnectionError:
        # The program did not start (the server was stopping): the real interpreter runs it.
        os.execv(sys.executable, [sys.executable, *argv])
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number != signal.SIGKILL:  # whose handler cannot be set (OSError): it is always the default
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
