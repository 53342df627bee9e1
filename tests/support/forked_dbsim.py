"""``dbsim`` commands started as forks of a pre-imported interpreter (issue #25: the suite's
parallel phase is bound by its two CPUs, and a ``python -m sim.cli`` start is ~0.4 CPU-s of
interpreter start-up and imports before the command does anything; the tests start a few
hundred).

Each pytest worker starts one *zygote* the first time it needs one: ``python -m
tests.support.forked_dbsim SOCKET``, a fresh interpreter that imports ``sim.cli`` with every
command module and the heavy libraries they use, and then only forks. A command is sent to it
over a Unix socket (argv, working directory, environment, and the three standard streams as
file descriptors); the zygote forks, and the child becomes ``dbsim``: the streams, directory
and environment swapped in, the signal handlers and mask of a new interpreter, ``sys.argv`` as
``python -m sim.cli`` sets it, then ``sim.cli.entry.main`` and an exit as the interpreter's
(non-daemon threads joined, ``atexit`` handlers run, streams flushed). The child is a real
process with its own pid: signals go to it directly, and its exit status comes back over the
socket, so :class:`ForkedPopen` is a ``subprocess.Popen`` in every way the tests use.

Why a zygote and not a fork of the worker itself: the worker has run other tests (threads,
caches, open connections, pytest's capture and warning filters); the zygote has only imported
modules, which a new ``dbsim`` process does as its first step anyway. What differs from an
exec'd start is what happens before ``main``: the interpreter's start-up and the imports. So a
command whose environment changes what the interpreter does at start (``PYTHON*`` variables,
the locale) is exec'd (:func:`can_fork`), as are the tests of start-up itself
(tests/e2e/test_run_imports.py, tests/unit/test_start_imports.py start their own).

The zygote never imports Locust (whose import patches the standard library with gevent's):
a forked ``dbsim run`` must not run patched where a new one would not; the zygote checks it.

CPU accounting: a forked command is the zygote's child, not the worker's, so the worker's
``RUSAGE_CHILDREN`` does not count it; :func:`children_cpu_s` asks the zygote for its own, and
tests/support/cpu_profile.py adds it. The zygote's imports (~1.5 CPU-s, once per worker) are
counted nowhere until it exits.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import importlib.util
import io
import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Set to 1 to exec every command (a start-up as the user's, at the old cost).
EXEC_ENV = "DBSIM_TEST_EXEC_CLI"
#: What ``sys.argv[0]`` is in ``python -m sim.cli``.
MAIN_PATH = str(Path(__file__).resolve().parents[2] / "sim" / "cli" / "__main__.py")
#: Modules the zygote imports besides every command module: the libraries the commands import
#: lazily (their first use in a command is otherwise paid by every start).
PRELOAD = (
    "sqlalchemy",
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.dialects.sqlite.aiosqlite",
    "numpy",
    "sim.run.runner",
    "sim.report",
    "sim.analysis",
)
_STATUS = struct.Struct("=i")  # a command's wait status, as waitpid gives it
#: What a new interpreter reads at start from its environment, as this worker had it when it
#: imported this module; the zygote starts with it, and a command whose environment differs
#: there is exec'd.
_STARTS_WITH = ("PYTHON", "LC_", "LANG")
_START_ENV = {k: v for k, v in os.environ.items() if k.startswith(_STARTS_WITH)}


def can_fork(env: Mapping[str, str] | None) -> bool:
    """Whether a command with this environment can be forked: not when asked to exec, and
    not when the environment sets what a new interpreter reads at start (which the zygote,
    started with the worker's environment, has already read)."""
    if os.environ.get(EXEC_ENV) == "1" or (env is not None and env.get(EXEC_ENV) == "1"):
        return False
    env = os.environ if env is None else env
    starts = {key for key in env if key.startswith(_STARTS_WITH)} | set(_START_ENV)
    return all(env.get(key) == _START_ENV.get(key) for key in starts)


# --------------------------------------------------------------------------- the worker's side


class _Zygote:
    """This worker's zygote process and its socket, started on first use."""

    def __init__(self) -> None:
        # An abstract socket (Linux): no file to leave behind in anyone's temporary directory.
        name = f"dbsim-zygote-{os.getpid()}-{os.urandom(6).hex()}"
        self.path = f"\0{name}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(_STARTS_WITH)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.forked_dbsim", name],
            stdin=subprocess.PIPE,  # the zygote exits when this worker does (end of file)
            stdout=subprocess.PIPE,
            cwd=str(Path(__file__).resolve().parents[2]),
            env={**env, **_START_ENV},
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if ready.strip() != b"ready":
            raise RuntimeError(f"the dbsim zygote did not start: {ready!r}")
        atexit.register(self.close)

    def close(self) -> None:
        """End the zygote (end of file on its stdin) and wait for it: at the worker's exit,
        not left to the interpreter's teardown, which reported it still running."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.stdout.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def alive(self) -> bool:
        return self.proc.poll() is None


_ZYGOTE: _Zygote | None = None
_LOCK = threading.Lock()


def _zygote() -> _Zygote:
    global _ZYGOTE
    with _LOCK:
        if _ZYGOTE is None or not _ZYGOTE.alive():
            _ZYGOTE = _Zygote()
        return _ZYGOTE


def children_cpu_s() -> float:
    """CPU-seconds of every command this worker's zygote forked that has exited (the tests'
    and the docs' shim's), from the zygote's own ``RUSAGE_CHILDREN``; 0 before it started."""
    if _ZYGOTE is None or not _ZYGOTE.alive():
        return 0.0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(_ZYGOTE.path)
        payload = json.dumps({"query": "children_cpu_s"}).encode()
        conn.sendall(struct.pack("=I", len(payload)) + payload)
        (seconds,) = struct.unpack("=d", _read_exactly(conn, 8))
    return float(seconds)


class ForkedPopen(subprocess.Popen):
    """``subprocess.Popen(args)`` for ``args = [python, -m, sim.cli, *argv]``, the process
    forked from the zygote instead of exec'd. Only the arguments the tests use are supported:
    ``cwd``, ``env``, ``stdin``, ``stdout``, ``stderr``, ``text``."""

    def __init__(self, args: list[str], **kwargs: Any) -> None:
        self._conn: socket.socket | None = None
        self._argv = list(args[3:])
        super().__init__(args, **kwargs)

    def _execute_child(
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: Any,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: Any,
        shell: Any,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        *rest: Any,
    ) -> None:
        zygote = _zygote()
        request = {
            "argv": self._argv,
            "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "env": dict(env) if env is not None else dict(os.environ),
        }
        # A stream not redirected is inherited, as by a child: the worker's own 0, 1 or 2.
        sent = [fd if fd != -1 else own for own, fd in enumerate((p2cread, c2pwrite, errwrite))]
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(zygote.path)
            payload = json.dumps(request).encode()
            conn.sendmsg(
                [struct.pack("=I", len(payload)), payload],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", sent))],
            )
            (pid,) = struct.unpack("=i", _read_exactly(conn, 4))
        except OSError:
            conn.close()
            raise
        self._conn = conn
        self.pid = pid
        self._child_created = True
        self._close_pipe_fds(  # type: ignore[attr-defined]
            p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite
        )

    def _status(self, block: bool) -> int | None:
        conn = self._conn
        if conn is None:
            return None
        conn.setblocking(block)
        try:
            data = _read_exactly(conn, _STATUS.size)
        except BlockingIOError:
            return None
        finally:
            if self._conn is not None:
                conn.setblocking(True)
        status = _STATUS.unpack(data)[0]
        conn.close()
        self._conn = None
        return status

    def _internal_poll(self, _deadstate: Any = None, *args: Any, **kwargs: Any) -> int | None:
        if self.returncode is None and (status := self._status(block=False)) is not None:
            self._handle_exitstatus(status)  # type: ignore[attr-defined]
        return self.returncode

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        status = self._status(block=not wait_flags & os.WNOHANG)
        return (self.pid, status) if status is not None else (0, 0)


def popen(args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen`` for ``[python, -m, sim.cli, ...]``, forked where it can be."""
    forkable = list(args[:3]) == [sys.executable, "-m", "sim.cli"] and can_fork(kwargs.get("env"))
    return (ForkedPopen if forkable else subprocess.Popen)(args, **kwargs)


def run(
    args: list[str],
    *,
    timeout: float | None = None,
    capture_output: bool = False,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` for ``[python, -m, sim.cli, ...]``, forked where it can be."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with popen(args, **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            exc.stdout, exc.stderr = proc.communicate()
            raise
    done = subprocess.CompletedProcess(args, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


#: A ``dbsim`` on PATH for shell scripts (the docs' blocks): a small client that has this
#: worker's zygote fork the command with the script's own standard streams, directory and
#: environment, forwards the signals a shell or ``timeout`` sends, and exits as the command did
#: (its code, or the same signal). ``python3 -I -S`` starts in ~0.05 CPU-s. Where the zygote
#: cannot serve the command (the environment changes the interpreter's start, or the zygote is
#: gone), it execs the real ``dbsim``.
_SHIM = """#!/usr/bin/python3 -IS
import array, json, os, signal, socket, struct, sys
SOCKET, REAL, START = {socket!r}, {real!r}, {start!r}
env, argv = dict(os.environ), sys.argv[1:]
keys = {{k for k in set(env) | set(START) if k.startswith(("PYTHON", "LC_", "LANG"))}}
if env.get({exec_env!r}) == "1" or any(env.get(k) != START.get(k) for k in keys):
    os.execv(REAL, [REAL, *argv])
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    conn.connect(SOCKET)
    payload = json.dumps({{"argv": argv, "cwd": os.getcwd(), "env": env}}).encode()
    fds = array.array("i", [0, 1, 2])
    conn.sendmsg([struct.pack("=I", len(payload)), payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
except OSError:
    os.execv(REAL, [REAL, *argv])
def take(size):
    data = b""
    while len(data) < size:
        part = conn.recv(size - len(data))
        if not part:
            sys.exit("dbsim (forked): the zygote closed the connection")
        data += part
    return data
(pid,) = struct.unpack("=i", take(4))
for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(signum, lambda signum, frame: os.kill(pid, signum))
status = struct.unpack("=i", take({size}))[0]
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def write_shim(path: Path, real: Path) -> None:
    """Write the forking ``dbsim`` client at ``path`` (executable); ``real`` is the installed
    ``dbsim`` it execs where the zygote cannot serve a command."""
    zygote = _zygote()
    text = _SHIM.format(
        socket=zygote.path, real=str(real), start=_START_ENV, exec_env=EXEC_ENV, size=_STATUS.size
    )
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = conn.recv(size - len(data))
        if not part:
            raise ConnectionError("the dbsim zygote closed the connection")
        data += part
        conn.setblocking(True)  # a partial message: the rest follows at once
    return data


# --------------------------------------------------------------------------- the zygote's side


def _preload() -> None:
    from sim.cli.entry import register_commands

    register_commands(None)
    for name in PRELOAD:
        __import__(name)
    # The registry's plugins too (every target, workload and collector module, ~80 modules,
    # 0.15-0.18 CPU-s): a command that resolves a scenario imports them all on first use, and
    # a forked command otherwise paid that again each time.
    from sim import registry

    for workload in registry.workloads().values():
        workload.workload_class  # noqa: B018  (imports the class's module)
    if "gevent" in sys.modules:
        raise RuntimeError("the zygote imported gevent: a forked dbsim would run patched")


def serve(name: str) -> None:
    """Fork a ``dbsim`` for each request on the abstract socket ``name`` until the worker
    closes our stdin."""
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"\0{name}")
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    waiting: dict[int, socket.socket] = {}
    select = selectors.DefaultSelector()
    select.register(listener, selectors.EVENT_READ, "request")
    select.register(wake_r, selectors.EVENT_READ, "child")
    select.register(sys.stdin.fileno(), selectors.EVENT_READ, "worker")
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in select.select():
            if key.data == "worker" and not os.read(sys.stdin.fileno(), 4096):
                return
            if key.data == "child":
                os.read(wake_r, 4096)
                _reap(waiting)
            if key.data == "request":
                conn, _ = listener.accept()
                if pid := _serve_one(conn, waiting):
                    waiting[pid] = conn
        _reap(waiting)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):  # the worker gave up on it (a killed test)
                conn.sendall(_STATUS.pack(status))
            conn.close()


def _serve_one(conn: socket.socket, waiting: dict[int, socket.socket]) -> int:
    """Answer one request: fork a command (its pid, the connection kept for its exit status),
    or say how much CPU the exited commands used (0: nothing to wait for)."""
    header, fds, _, _ = conn.recvmsg(4, socket.CMSG_SPACE(3 * array.array("i").itemsize))
    received = array.array("i")
    for level, kind, data in fds:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            received.frombytes(data[: len(data) - len(data) % received.itemsize])
    (size,) = struct.unpack("=I", header)
    request = json.loads(_read_exactly(conn, size))
    if request.get("query") == "children_cpu_s":
        _reap(waiting)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        conn.sendall(struct.pack("=d", usage.ru_utime + usage.ru_stime))
        conn.close()
        return 0
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            code = _become_dbsim(request, list(received))
        finally:
            os._exit(code)
    for fd in received:
        os.close(fd)
    conn.sendall(struct.pack("=i", pid))
    return pid


def _become_dbsim(request: dict[str, Any], fds: list[int]) -> int:
    """In the forked child: the state of a new ``python -m sim.cli`` process, then the command."""
    signal.set_wakeup_fd(-1)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)  # the zygote's socket and pipes, the received descriptors
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote's reaping handler
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), line_buffering=os.isatty(1)
    )
    sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        line_buffering=True,
        errors="backslashreplace",
    )
    sys.argv = [MAIN_PATH, *request["argv"]]
    # __main__ as ``python -m sim.cli`` has it (Click names the program from it: "python -m
    # sim.cli run --help" in a usage error), not the zygote's module.
    main_module = types.ModuleType("__main__")
    main_module.__file__, main_module.__package__ = MAIN_PATH, "sim.cli"
    main_module.__spec__ = importlib.util.find_spec("sim.cli.__main__")
    sys.modules["__main__"] = main_module
    from sim.cli.entry import main

    code = 1
    interrupted = False
    try:
        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:
        import traceback

        traceback.print_exc()
    return _exit_as_the_interpreter(code, interrupted)


def _exit_as_the_interpreter(code: int, interrupted: bool) -> int:
    threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = 120  # as the interpreter, when flushing stdout fails at exit
    if interrupted:  # an uncaught KeyboardInterrupt: the interpreter dies by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


if __name__ == "__main__":
    serve(sys.argv[1])
