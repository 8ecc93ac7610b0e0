"""The warm interpreter's server: `python server.py SOCKET WRAPPER IDLE_S`, started by the client (client.py)
with the environment it serves.

It imports what a training program imports first (torch, its compiler front-end, its distributed packages and,
where no device plugin could be loaded by it, transformers), then forks one child per request. The child becomes
the program: its own session, the client's stdin/stdout/stderr, the client's working directory, environment and
arguments, `sys.executable` the wrapper (so that the processes it starts with it, torchrun's ranks, are warm
too); it exits as an interpreter exits (non-daemon threads joined, atexit run) with the status the program gave.

A fork keeps what was imported and nothing that was initialised, as long as nothing was: the server imports
what `portlayer.train.launch` preloads for the trainer's ranks, on the same rule, and runs no torch operation.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib
import io
import json
import os
import runpy
import select
import signal
import socket
import sys
import threading
import time
import traceback

from client import COLD  # this folder's client.py, first on the server's path


def preload() -> bool:
    """Import what the ranks of `portlayer parity run` are forked with (`portlayer.train.launch.preload`), and
    torchrun. False where importing torch loaded a device plugin (torch's autoload): what a plugin reads at import,
    a fork would share."""
    import torch  # noqa: F401  (the autoload happens here, if anywhere)

    modules = launch_preload()
    if modules is None:
        return False
    for module in (*modules, "torch.distributed.run"):
        importlib.import_module(module)
    return True


def launch_preload() -> list[str] | None:
    """`portlayer.train.launch.preload()`, asked in a fork: the server imports none of the modules it needs
    (portlayer, the plugins its backend records name), which a program's `import portlayer` then imports as a new
    interpreter does."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            from portlayer.train import launch

            os.write(write, json.dumps(launch.preload()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    return json.loads(text) if text else None


def serve(path: str, wrapper: str, idle_s: float) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound under a name of its own and then renamed: a client that finds the socket finds the server ready.
    bound = f"{path}.{os.getpid()}"
    listener.bind(bound)
    inode = os.stat(bound).st_ino
    listener.listen(64)
    os.rename(bound, path)
    children: dict[int, socket.socket | None] = {}  # pid → the connection of the client it runs for
    last_busy = time.monotonic()
    while children or time.monotonic() - last_busy < idle_s:
        watched = [connection for connection in children.values() if connection is not None]
        ready, _, _ = select.select([listener, *watched], [], [], 0.1)
        if listener in ready:
            connection, _ = listener.accept()
            pid = start(connection, listener, children, wrapper)
            if pid is not None:
                children[pid] = connection
        for pid, connection in list(children.items()):
            if connection in ready and gone(connection):
                # The client is gone (killed): its program goes with it, as a process group killed would.
                connection.close()
                children[pid] = None
                kill_group(pid)
        if reap(children):
            last_busy = time.monotonic()
    # Gone before it stops listening, and only if it is still this server's: a client that finds no server
    # starts the next one, whose socket this one must not remove.
    with contextlib.suppress(FileNotFoundError):
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    listener.close()


def gone(connection: socket.socket) -> bool:
    """Whether the client at the other end has closed its connection (it sends nothing after its request)."""
    try:
        return not connection.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


def start(connection: socket.socket, listener: socket.socket, children: dict, wrapper: str) -> int | None:
    try:
        message, fds, _, _ = socket.recv_fds(connection, 1 << 20, MAX_DESCRIPTORS)
        request = json.loads(message)
    except (OSError, ValueError):
        connection.close()
        return None
    pid = os.fork()
    if pid == 0:
        listener.close()
        for other in children.values():
            if other is not None:
                other.close()
        connection.close()
        become(request, fds, wrapper)  # never returns
    for fd in fds:
        os.close(fd)
    connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    return pid


def reap(children: dict[int, socket.socket]) -> list[int]:
    reaped = []
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid not in children:
            continue
        connection = children.pop(pid)
        if connection is not None:
            with contextlib.suppress(OSError):  # the client is gone
                connection.sendall(json.dumps({"status": status}).encode() + b"\n")
            connection.close()
        reaped.append(pid)
    return reaped


# The most the kernel passes in one message (SCM_MAX_FD).
MAX_DESCRIPTORS = 253


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def become(request: dict, fds: list[int], wrapper: str) -> None:
    """In the forked child: run the program as `python [-u] SCRIPT | -m MODULE | -c CODE ARGS…` would."""
    os.setsid()
    for number in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    take_descriptors(request["descriptors"], fds)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    unbuffered = request["unbuffered"] or bool(os.environ.get("PYTHONUNBUFFERED"))
    standard_streams(unbuffered)
    sys.dont_write_bytecode = request["no_bytecode"] or bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    sys.executable = wrapper
    sys.orig_argv = [wrapper, *request["argv"]]
    if "multiprocessing.spawn" in sys.modules:
        # A new interpreter's multiprocessing starts its fork server and spawned children with itself.
        sys.modules["multiprocessing.spawn"].set_executable(wrapper)
    reseed()
    if "sitecustomize" in sys.modules:
        # A new interpreter runs it at its start, in its own environment (a test's hooks read it).
        importlib.reload(sys.modules["sitecustomize"])
    status = 0
    try:
        run(request["mode"], request["target"], request["args"])
    except SystemExit as exit_:
        status = exit_status(exit_.code)
    except KeyboardInterrupt:
        status = -signal.SIGINT
        traceback.print_exc()
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    finish(status)


def take_descriptors(numbers: list[int], fds: list[int]) -> None:
    """The client's descriptors under the client's numbers: moved above them all first, so that putting one in
    place never closes another still to be placed."""
    floor = max([*numbers, *fds]) + 1
    moved = []
    for fd in fds:
        moved.append(fcntl.fcntl(fd, fcntl.F_DUPFD, floor))
        os.close(fd)
    for number, fd in zip(numbers, moved):
        os.dup2(fd, number)
        os.close(fd)


def run(mode: str, target: str, args: list[str]) -> None:
    if mode == "script":
        sys.argv = [target, *args]
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        runpy.run_path(target, run_name="__main__")
    elif mode == "module":
        sys.argv = [target, *args]
        sys.path[0] = os.getcwd()
        # Run as __main__, the module is imported anew, as in a new interpreter (torchrun's is preloaded).
        sys.modules.pop(target, None)
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.argv = ["-c", *args]
        sys.path[0] = ""
        main = type(sys)("__main__")
        sys.modules["__main__"] = main
        exec(compile(target, "<string>", "exec"), main.__dict__)


def exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def standard_streams(unbuffered: bool) -> None:
    encoding = sys.stdout.encoding
    # The program's streams: open until it exits.
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(open(0, "rb", closefd=False), encoding=encoding)  # noqa: SIM115
    for fd, name, errors in ((1, "stdout", "strict"), (2, "stderr", "backslashreplace")):
        binary = open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False)  # noqa: SIM115
        stream = io.TextIOWrapper(
            binary, encoding=encoding, errors=errors, write_through=unbuffered,
            line_buffering=name == "stderr" or os.isatty(fd),
        )  # fmt: skip
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def reseed() -> None:
    """A new interpreter seeds numpy's global generator from the OS; a fork would share the server's."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def finish(status: int) -> None:
    """Exit as an interpreter does: join non-daemon threads, run atexit, flush; a KeyboardInterrupt ends the
    process by SIGINT."""
    with contextlib.suppress(BaseException):
        threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)


def main() -> None:
    path, wrapper, idle_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    if preload():
        serve(path, wrapper, idle_s)
    else:
        # Its clients run the real interpreter from now on.
        open(path + COLD, "w").close()


if __name__ == "__main__":
    main()
