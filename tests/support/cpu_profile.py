"""Where the parallel phase's CPU goes (issue #25): per test, the CPU-seconds of the pytest
worker itself and of the child processes it reaped while the test ran (its setup, call and
teardown, so a module-scoped fixture's run counts in the test that started or ended it).

Opt-in: ``DBSIM_TEST_CPU_DIR=<dir>`` (tests/conftest.py registers this plugin only then), so it
costs nothing in CI. Each worker appends tab-separated lines to ``<dir>/<worker>.tsv``:
nodeid, wall s, own user+system s, children user+system s; at the end a line for the
worker's own CPU outside its tests (start-up and collection). Children are counted when they are
reaped: a process started by a module fixture and waited for at its teardown lands in the
module's last test, which is why the figures are meant to be summed per module
(``python -m tests.support.cpu_profile <dir>``). Servers that are not our children (the
machine's PostgreSQL and MariaDB) are not in it; ``--servers`` reads their CPU from /proc.

A wall time in a CPU-bound phase is inflated by every neighbour; CPU-seconds are not (much):
compare these, not durations.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path

import pytest

ENV = "DBSIM_TEST_CPU_DIR"


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    """The reaped children's CPU, and the ``dbsim`` commands forked for this worker by its
    zygote (tests/support/forked_dbsim.py: the zygote's children, not the worker's)."""
    from tests.support.forked_dbsim import children_cpu_s

    return _cpu(resource.RUSAGE_CHILDREN) + children_cpu_s()


class CpuProfile:
    """The plugin: one line per test, per worker file, and one for the worker's CPU outside
    its tests (start-up and collection: every worker collects the whole suite)."""

    OUTSIDE = "(worker outside tests: start-up, collection)"

    def __init__(self, directory: Path, worker: str) -> None:
        self._path = directory / f"{worker}.tsv"
        self._lines: list[str] = []
        self._in_tests = 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        wall, own = time.monotonic(), _cpu(resource.RUSAGE_SELF)
        children = _children_cpu()
        yield
        own = _cpu(resource.RUSAGE_SELF) - own
        self._in_tests += own
        self._write(item.nodeid, time.monotonic() - wall, own, _children_cpu() - children)

    def pytest_sessionfinish(self) -> None:
        if self._path.exists():  # a worker that ran tests (not xdist's controller)
            self._write(self.OUTSIDE, 0.0, _cpu(resource.RUSAGE_SELF) - self._in_tests, 0.0)

    def _write(self, nodeid: str, wall: float, own: float, children: float) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._path.open("a", encoding="utf-8") as out:
            out.write(f"{nodeid}\t{wall:.3f}\t{own:.3f}\t{children:.3f}\n")


def register(config: pytest.Config) -> None:
    """Register the plugin when ``DBSIM_TEST_CPU_DIR`` names a directory."""
    if directory := os.environ.get(ENV):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        config.pluginmanager.register(CpuProfile(Path(directory), worker), "dbsim-cpu-profile")


def unit_of(nodeid: str) -> str:
    """A module (a docs page for the docs blocks), as the parallel phase schedules them."""
    from tests.support.xdist_scopes import DOCS_MODULE, scope_of

    scope = scope_of(nodeid)
    return scope if scope.startswith(f"{DOCS_MODULE}::") else scope.split("::")[0]


def summary(directory: Path, top: int = 40) -> str:
    """The ``top`` units by CPU-seconds (own + children), with wall time and test count."""
    cpu: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for path in sorted(directory.glob("*.tsv")):
        for line in path.read_text(encoding="utf-8").splitlines():
            nodeid, wall, own, children = line.split("\t")
            row = cpu[unit_of(nodeid)]
            row[0] += float(own) + float(children)
            row[1] += float(own)
            row[2] += float(wall)
            row[3] += 1
    total = sum(row[0] for row in cpu.values())
    lines = [
        f"total {total:.1f} CPU-s over {sum(r[3] for r in cpu.values()):.0f} tests, {len(cpu)} units"
    ]
    lines.append(f"{'cpu_s':>8} {'own_s':>8} {'wall_s':>8} {'tests':>5}  unit")
    for unit, (both, own, wall, count) in sorted(cpu.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{both:8.1f} {own:8.1f} {wall:8.1f} {count:5.0f}  {unit}")
    return "\n".join(lines)


def _ticks(pid: str) -> float:
    # /proc/<pid>/stat fields 14-17: utime, stime, cutime, cstime (reaped children: the
    # postmaster's exited backends), after the command name in parentheses
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def server_cpu() -> float:
    """CPU-seconds so far of every PostgreSQL and MariaDB server process (the postmasters
    count their exited backends; a cluster started and stopped by a test is not in it)."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() in {"postgres", "mariadbd", "mysqld"}:
                total += _ticks(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


if __name__ == "__main__":
    if sys.argv[1:2] == ["--servers"]:
        print(f"{server_cpu():.2f}")
    else:
        print(summary(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40))
