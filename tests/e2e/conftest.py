"""End-to-end fixtures: run the ``dbsim`` CLI as a child process, the way a user does.

Every invocation is ``python -m sim.cli ...`` with

* the working directory set to a fresh temporary directory (``runs/`` and relative paths land
  there, never in the repository),
* the environment inherited minus every ``DBSIM_*`` variable (a developer's overrides must not
  leak into the tests), with ``TMPDIR`` pointing into the test's own directory so the default
  scenario's temporary SQLite database is created (and must be removed) there,
* stdin connected to ``/dev/null`` and a timeout,
* the process forked from a pre-imported interpreter rather than exec'd (the same process
  afterwards, without the start-up's CPU: tests/support/forked_dbsim.py), unless the test asks
  for the exec (``Dbsim(..., fork=False)``) or its environment changes the interpreter's start.

Besides the fixtures, this module holds small helpers the e2e modules import
(``from tests.e2e.conftest import ...``): finding the single bundle of a run, reading its CSVs,
polling ``summary.json`` for the engine's state.

``dbsim_in_process`` runs the same command through ``sim.cli.entry.main(argv)`` inside the test
process, with the child's working directory, environment and TMPDIR: for the matrices of
refusals whose subject is what the command decides (exit code, error lines, files left), not
the process boundary; each such matrix keeps at least one case on the real binary
(``python -m sim.cli``), which proves that the process reports what ``main`` returns.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.forked_dbsim import ForkedPopen, can_fork

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
DEFAULT_TIMEOUT_S = 120.0
POLL_S = 0.01


@dataclass(frozen=True)
class CliResult:
    """What a finished ``dbsim`` process left behind (CompletedProcess-like)."""

    args: list[str]
    rc: int
    stdout: str
    stderr: str

    @property
    def returncode(self) -> int:
        return self.rc

    @property
    def stderr_lines(self) -> list[str]:
        return self.stderr.splitlines()

    def describe(self) -> str:
        """For assertion messages: the command, its exit code and its output."""
        return (
            f"$ {' '.join(self.args)}\nexit {self.rc}\n"
            f"--- stdout\n{self.stdout[-4000:]}\n--- stderr\n{self.stderr[-4000:]}"
        )


class Dbsim:
    """Runs ``python -m sim.cli`` in ``cwd`` with a clean-ish environment.

    The process is forked from this worker's pre-imported zygote (tests/support/forked_dbsim.py:
    the same process, pid, streams, signals and exit, without the ~0.4 CPU-s of interpreter
    start-up and imports) unless ``fork=False`` or the environment changes what an interpreter
    does at start; ``command()`` is still the exec'd command line, for a test that runs it
    itself (a pty, a shell)."""

    def __init__(self, cwd: Path, env: dict[str, str], *, fork: bool = True) -> None:
        self.cwd = cwd
        self.env = env
        self.fork = fork
        self._started: list[subprocess.Popen[str]] = []

    def command(self, *args: str | os.PathLike[str]) -> list[str]:
        return [sys.executable, "-m", "sim.cli", *(os.fspath(a) for a in args)]

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = dict(self.env)
        if extra:
            env.update(extra)
        return env

    def _popen(self, cmd: list[str], extra: Mapping[str, str] | None) -> subprocess.Popen[str]:
        env = self._env(extra)
        popen = ForkedPopen if self.fork and can_fork(env) else subprocess.Popen
        return popen(
            cmd,
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def __call__(
        self,
        *args: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> CliResult:
        """Run to completion; a run that outlives ``timeout`` is killed and fails the test."""
        cmd = self.command(*args)
        proc = self._popen(cmd, env)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(
                f"dbsim did not finish within {timeout} s: {' '.join(cmd)}\n"
                f"--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
            )
        return CliResult(cmd, proc.returncode, out, err)

    def start(
        self, *args: str | os.PathLike[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """Start without waiting (for signal tests). The fixture kills it at teardown if it is
        still running."""
        proc = self._popen(self.command(*args), env)
        self._started.append(proc)
        return proc

    def finish(self, proc: subprocess.Popen[str], timeout: float) -> CliResult:
        """Wait for a started process; one that outlives ``timeout`` is killed and fails."""
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(
                f"dbsim did not exit within {timeout} s: {' '.join(map(str, proc.args))}\n"
                f"--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
            )
        return CliResult([str(a) for a in proc.args], proc.returncode, out, err)

    def cleanup(self) -> None:
        for proc in self._started:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(Exception):
                proc.communicate(timeout=10)


class InProcessDbsim(Dbsim):
    """``Dbsim``'s ``__call__`` through ``sim.cli.entry.main`` in this process (about 1 s less
    per command than a child): the working directory, the environment (exactly the child's)
    and TMPDIR are swapped in for the call, stdout and stderr captured, and the signal
    handlers, environment, directory and ``tempfile``'s cached TMPDIR put back afterwards.
    ``start`` (signals, a running process) is not offered: use ``Dbsim``.

    ``child_logging=True`` also gives the command the root logger a new process has: no
    handler, so the CLI's ``logging.basicConfig`` installs its own on the captured stderr and
    a warning logged by the command lands in ``stderr`` as the child's does (otherwise pytest's
    handlers on the root logger take it and ``basicConfig`` does nothing)."""

    def __init__(self, cwd: Path, env: dict[str, str], *, child_logging: bool = False) -> None:
        super().__init__(cwd, env)
        self.child_logging = child_logging

    def __call__(
        self,
        *args: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> CliResult:
        from sim.cli.entry import main

        argv = [os.fspath(a) for a in args]
        out, err = io.StringIO(), io.StringIO()
        child = _as_the_child(self.cwd, self._env(env), self.child_logging)
        with child, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
        return CliResult(["dbsim (in process)", *argv], rc, out.getvalue(), err.getvalue())

    def start(
        self, *args: str | os.PathLike[str], env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[str]:
        raise TypeError("a started process needs the real binary: use the dbsim fixture")


@contextlib.contextmanager
def _as_the_child(cwd: Path, env: dict[str, str], child_logging: bool = False) -> Iterator[None]:
    from sim import secrets

    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    if child_logging:
        root.handlers.clear()
    saved_env, saved_cwd, saved_tempdir = dict(os.environ), os.getcwd(), tempfile.tempdir
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    # The secrets this process resolved are masked in every message: a new process starts
    # with none. (Seen: an earlier test's password "refused" masked the driver's "Connection
    # refused" in a later in-process command on the same worker.)
    saved_secrets = set(secrets._RESOLVED)
    secrets._RESOLVED.clear()
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # read TMPDIR again, as a new process would
    os.chdir(cwd)
    try:
        yield
    finally:
        secrets._RESOLVED.clear()
        secrets._RESOLVED.update(saved_secrets)
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tempdir
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        if child_logging:
            root.handlers[:] = saved_handlers
            root.setLevel(saved_level)


def clean_environment(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DBSIM_")}
    env["TMPDIR"] = str(tmp)
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    return env


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    """The child's working directory."""
    path = tmp_path / "cwd"
    path.mkdir()
    return path


@pytest.fixture
def child_tmp(tmp_path: Path) -> Path:
    """The child's TMPDIR: whatever dbsim creates there must be gone when it exits."""
    path = tmp_path / "tmp"
    path.mkdir()
    return path


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    """An absolute ``-o`` directory, not yet created (dbsim creates it)."""
    return tmp_path / "out"


@pytest.fixture
def dbsim(work_dir: Path, child_tmp: Path) -> Iterator[Dbsim]:
    runner = Dbsim(work_dir, clean_environment(child_tmp))
    try:
        yield runner
    finally:
        runner.cleanup()


@pytest.fixture
def dbsim_in_process(work_dir: Path, child_tmp: Path) -> InProcessDbsim:
    """Like ``dbsim`` (the same directories), but the command runs in this process."""
    return InProcessDbsim(work_dir, clean_environment(child_tmp))


# --------------------------------------------------------------------------- bundle helpers


def bundle_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []


def single_bundle(out: Path) -> Path:
    """The one run directory under ``out`` (fails the test otherwise)."""
    dirs = bundle_dirs(out)
    assert len(dirs) == 1, f"expected exactly one bundle in {out}, found {[d.name for d in dirs]}"
    return dirs[0]


def read_summary(bundle: Path) -> dict[str, Any]:
    data = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows. Fails the test if any line's column count differs from the header's
    or the file does not end with a newline (a torn last line)."""
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), f"{path.name}: last line is incomplete: {text[-200:]!r}"
    lines = list(csv.reader(text.splitlines()))
    assert lines, f"{path.name}: empty (no header)"
    header = lines[0]
    for number, line in enumerate(lines[1:], start=2):
        assert len(line) == len(header), (
            f"{path.name}:{number}: {len(line)} columns, header has {len(header)}: {line}"
        )
    return header, [dict(zip(header, line, strict=True)) for line in lines[1:]]


def current_state(out: Path) -> str | None:
    """The engine state in the (single) bundle's summary.json, or None while there is none.
    The file is replaced atomically, so a read never sees half of it."""
    for summary in out.glob("*/summary.json"):
        try:
            return str(json.loads(summary.read_text(encoding="utf-8")).get("state"))
        except (OSError, ValueError):
            return None
    return None


def wait_for_state(
    proc: subprocess.Popen[str], out: Path, states: set[str], timeout: float = 30.0
) -> str:
    """Poll summary.json until its state is one of ``states``; fails if the process exits or
    the deadline passes first."""
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"dbsim exited ({proc.returncode}) before reaching {states}; saw {seen}")
        state = current_state(out)
        if state is not None and (not seen or seen[-1] != state):
            seen.append(state)
        if state in states:
            return state
        time.sleep(POLL_S)
    pytest.fail(f"dbsim did not reach {states} within {timeout} s; saw {seen}")


def diskstats_devices() -> set[str]:
    """Device names listed in /proc/diskstats (empty where there is none)."""
    try:
        text = Path("/proc/diskstats").read_text(encoding="ascii")
    except OSError:
        return set()
    return {fields[2] for fields in (line.split() for line in text.splitlines()) if len(fields) > 3}


SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
