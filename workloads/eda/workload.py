"""EDA-like workload (SPEC SFS 2014 SP2 EDA / SPECstorage 2020 EDA_BLENDED) on a file tree.

Sessions are the reference's processes: session ``i`` is process ``i`` of :func:`plan` (job
set by job set, front-end first), works on its own tree and asks for its process's rate
(:meth:`EdaWorkload.session_weights`), so an open-loop ``rate_ops_s`` of ``job_sets × 450``
gives every process its requested rate. :meth:`EdaWorkload.score` applies the reference's
validity rule per load point and reports the highest valid one (see docs/workloads/eda.md).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from sim.errors import ConfigError, MissingDataError, SimError, WorkloadError
from sim.protocols import Connection, ProgressCallback, Target, Workload
from sim.sql import Statement
from storage.targets.filetree import FileSession, FileTreeTarget, TreeGuard
from workloads.eda import tree as layout
from workloads.eda.operations import EdaSession, count_dealt, deck_base, new_session
from workloads.eda.parameters import EdaParameters

WORKLOAD_NAME = "eda"
PROCESS_MIN_FRACTION = 0.75  # every process reaches 75 % of its requested rate …
OVERALL_MIN_FRACTION = 0.95  # … and the load point 95 % of its total


class EdaWorkload(Workload):
    """EDA front-end / back-end / blended processes over per-process file trees."""

    name: ClassVar[str] = WORKLOAD_NAME
    parameters_model: ClassVar[type[BaseModel]] = EdaParameters
    needs: ClassVar[str] = "filetree"

    def __init__(self, parameters: BaseModel, target: Target) -> None:
        super().__init__(parameters, target)
        assert isinstance(parameters, EdaParameters)
        self.p: EdaParameters = parameters
        if not isinstance(target, FileTreeTarget):
            raise WorkloadError(f"eda runs on a filetree target, not {target.kind}")
        self.tree_target: FileTreeTarget = target
        self.trees = layout.plan(self.p)
        self.sessions: dict[int, EdaSession] = {}
        self._session_seeds: dict[int, int] = {}
        #: Per tree, what its session may touch (filled by verify / check_loaded).
        self._guards: dict[str, TreeGuard] = {}

    # ------------------------------------------------------------------ mix and rates

    def operations(self) -> Mapping[str, float]:
        """Percent of all operations when every process runs at its requested rate."""
        total = layout.job_set_rate_ops_s(self.p)
        mix: dict[str, float] = {}
        for component in self.p.components():
            c = self.p.of(component)
            share = c.process_rate_ops_s * c.processes_per_job_set / total
            deck = sum(c.mix.values())
            for name, weight in c.mix.items():
                mix[name] = mix.get(name, 0.0) + round(100 * share * weight / deck, 6)
        return mix

    def default_sessions(self) -> int:
        return len(self.trees)

    def data_bytes(self) -> int:
        return sum(t.data_bytes for t in self.trees)

    def scale_for_bytes(self, data_bytes: int) -> str | None:
        # Every job set builds the same trees, so the data grows with job_sets alone.
        per_job_set = self.data_bytes() // max(self.p.job_sets, 1)
        if per_job_set <= 0:
            return None
        return f"job_sets: {-(-data_bytes // per_job_set)}"

    def read_operations(self) -> frozenset[str]:
        return frozenset({"read_file", "random_read", "seq_read"})

    def cache_recipe(self) -> str:
        return (
            "workload.parameters.direct_io: true (O_DIRECT: every read reaches the storage), "
            "or dbsim run in a memory cgroup of its own memory + {cap_mb}M (the page cache of "
            "the trees is charged to dbsim's group)"
        )

    def reads_direct(self) -> bool:
        return self.p.direct_io

    def session_weights(self, sessions: int) -> list[float]:
        if sessions > len(self.trees):
            raise ConfigError(
                f"load.sessions: {sessions} sessions, but {self.p.job_sets} job set(s) have "
                f"{len(self.trees)} EDA processes (raise workload.parameters.job_sets)"
            )
        return [tree.rate_ops_s for tree in self.trees[:sessions]]

    def expected_mix(self, op_ranges: list[tuple[int, int]]) -> dict[str, int] | None:
        """Exact counts from each session's decks (None before the sessions existed)."""
        totals: dict[str, int] = {}
        for index, (first, end) in enumerate(op_ranges):
            if end <= first:
                continue
            if index not in self._session_seeds:
                return None
            component = self.trees[index].component
            base = deck_base(self.p, component, self._session_seeds[index])
            counts = count_dealt(self.p.of(component).mix, base, first, end)
            for name, n in counts.items():
                totals[name] = totals.get(name, 0) + n
        return totals

    # ------------------------------------------------------------------ load, verify, drop

    @property
    def root(self) -> Path:
        return self.tree_target.root

    def _max_empty_bytes(self) -> int:
        return self.p.frontend.file_size_bytes

    async def _each(self, items: Sequence[Any], work: Callable[[Any], Awaitable[Any]]) -> list[Any]:
        """``work`` over ``items`` with at most ``load_parallelism`` in flight; the first
        failure stops new work and is raised once the running ones have finished."""
        results: list[Any] = [None] * len(items)
        queue: Iterator[int] = iter(range(len(items)))
        failures: list[BaseException] = []

        async def worker() -> None:
            for i in queue:
                if failures:
                    return
                try:
                    results[i] = await work(items[i])
                except Exception as exc:
                    failures.append(exc)
                    return

        await asyncio.gather(*(worker() for _ in range(min(self.p.load_parallelism, len(items)))))
        if failures:
            raise failures[0]
        return results

    async def load(self, progress: ProgressCallback) -> dict[str, Any]:
        """Build the trees that are missing, stale or half-built; reuse the others."""
        root, run = self.root, self.tree_target.run
        # Ownership first: nothing is written before this has passed.
        marker = await run("check", root, layout.claim, root, self.trees)
        recorded: dict[str, Any] = marker["trees"]
        max_empty = self._max_empty_bytes()

        async def reusable(tree: layout.ProcessTree) -> bool:
            entry = recorded.get(tree.name)
            if not isinstance(entry, dict) or entry.get("state") != layout.STATE_LOADED:
                return False
            if entry.get("fingerprint") != tree.fingerprint(self.p.seed):
                return False
            check = await run(
                "stat", root / tree.name, layout.check_tree, root, tree, max_empty, marker
            )
            return not check.problems

        reuse = await self._each(self.trees, reusable)
        build = [t for t, ok in zip(self.trees, reuse, strict=True) if not ok]
        if build:
            await self._build(marker, build, progress)
        return {
            "root": str(root),
            "job_sets": self.p.job_sets,
            "trees": len(self.trees),
            "built": [t.name for t in build],
            "files": sum(t.file_count for t in self.trees),
            "data_bytes": sum(t.data_bytes for t in self.trees),
        }

    async def _build(
        self, marker: dict[str, Any], build: list[layout.ProcessTree], progress: ProgressCallback
    ) -> None:
        root, run = self.root, self.tree_target.run
        if not root.exists():
            await run("mkdir", root, root.mkdir)
        if marker.get("root") is None:
            marker["root"] = await run("stat", root, layout.root_identity, root)
        for tree in build:
            marker["trees"][tree.name] = {
                "fingerprint": tree.fingerprint(self.p.seed),
                "state": layout.STATE_LOADING,
            }
        # Recorded as loading before a byte of them is written: a failed build is ours to
        # rebuild next time, never a stranger's directory.
        await run("write", root / layout.MARKER, layout.write_marker, root, marker)
        inodes = await self._each(
            build, lambda t: run("mkdir", root / t.name, layout.prepare_tree, root, t, marker)
        )
        for tree, ino in zip(build, inodes, strict=True):
            marker["trees"][tree.name]["dir"] = ino
        await run("write", root / layout.MARKER, layout.write_marker, root, marker)
        checks = await self._each(
            build,
            lambda t: run("stat", root / t.name, layout.check_tree, root, t, 0, marker),
        )
        jobs = [
            (t, i, rel, check.files[str(root / t.name / rel)])
            for t, check in zip(build, checks, strict=True)
            for i, rel in enumerate(t.data_files())
        ]
        what = f"build {root}"
        done = 0
        progress(what, 0, len(jobs))

        async def write(job: tuple[layout.ProcessTree, int, str, int]) -> None:
            nonlocal done
            tree, index, rel, ino = job
            size = tree.file_size_bytes
            pattern = layout.content(self.p.seed, tree, index, size)
            path = root / tree.name / rel
            await run(
                "write",
                path,
                layout.write_data_file,
                root,
                f"{tree.name}/{rel}",
                ino,
                size,
                pattern,
            )
            done += 1
            progress(what, done, len(jobs))

        await self._each(jobs, write)
        for tree in build:
            marker["trees"][tree.name]["state"] = layout.STATE_LOADED
        await run("write", root / layout.MARKER, layout.write_marker, root, marker)

    async def verify(self) -> dict[str, Any]:
        """Every planned tree recorded as loaded, every file dbsim's (its inode, one link, no
        link on the way) and at its size."""
        return await self._inspect(WorkloadError, "load the trees first", "")

    async def check_loaded(self) -> dict[str, Any]:
        """``run --skip-load``: the trees exist, carry dbsim's marker and records, and every
        file is the one dbsim made — one ``fstatat`` per file, no data read. Missing or not
        loaded: a ConfigError (exit 2) naming it and the command that builds it; a stranger's
        object: an OwnershipError (exit 2)."""
        return await self._inspect(
            MissingDataError,
            "build them with `dbsim load <scenario>`, or run without --skip-load",
            "--skip-load: ",
        )

    async def _inspect(self, error: type[SimError], remedy: str, lead: str) -> dict[str, Any]:
        """verify and check_loaded: the marker, then every tree's identity and files; missing
        or unloaded data raises ``error`` (``lead`` + what + ``remedy``)."""
        root, run = self.root, self.tree_target.run
        if not root.is_dir():
            raise error(f"{lead}{root}: no EDA trees there ({remedy})")
        marker = await run("read", root / layout.MARKER, layout.read_marker, root)
        if marker is None:
            raise error(
                f"{lead}{root} has no {layout.MARKER} marker: dbsim built no trees there ({remedy})"
            )
        not_loaded = []
        for t in self.trees:
            entry = marker["trees"].get(t.name, {})
            if entry.get("state") != layout.STATE_LOADED:
                not_loaded.append(t.name)
            elif entry.get("fingerprint") != t.fingerprint(self.p.seed):
                not_loaded.append(f"{t.name} (loaded with other parameters)")
        if not_loaded:
            more = f" (and {len(not_loaded) - 5} more)" if len(not_loaded) > 5 else ""
            names = ", ".join(not_loaded[:5])
            raise error(f"{lead}{root}: tree(s) not loaded: {names}{more} ({remedy})")
        max_empty = self._max_empty_bytes()
        checks: list[layout.TreeCheck] = await self._each(
            self.trees,
            lambda t: run("stat", root / t.name, layout.check_tree, root, t, max_empty, marker),
        )
        flat = [line for check in checks for line in check.problems]
        if flat:
            more = f" (and {len(flat) - 3} more)" if len(flat) > 3 else ""
            raise error(f"{lead}{len(flat)} file(s) wrong: {'; '.join(flat[:3])}{more} ({remedy})")
        self._guards = {
            tree.name: TreeGuard(str(root), check.root_ino, check.dirs, check.files)
            for tree, check in zip(self.trees, checks, strict=True)
        }
        extra = await self._each(
            self.trees, lambda t: run("scan", root / t.name, layout.leftovers, root, t)
        )
        return {
            "root": str(root),
            "trees": len(self.trees),
            "files": sum(t.file_count for t in self.trees),
            "data_bytes": sum(t.data_bytes for t in self.trees),
            "leftovers": sum(extra),
        }

    async def drop(self) -> list[str]:
        """Remove the trees the root's marker records (nothing at all without a marker)."""
        removed: list[str] = await self.tree_target.run(
            "remove", self.root, layout.drop_all, self.root
        )
        return removed

    def statement_inventory(self) -> list[Statement]:
        return []  # not a SQL workload

    # ------------------------------------------------------------------ sessions

    def new_session(self, index: int, connection: Connection, seed: int) -> EdaSession:
        if not isinstance(connection, FileSession):
            raise WorkloadError(f"eda got a {type(connection).__name__}, not a file session")
        if index >= len(self.trees):
            raise ConfigError(
                f"load.sessions: session {index + 1} has no EDA process "
                f"({len(self.trees)} in {self.p.job_sets} job set(s))"
            )
        tree = self.trees[index]
        paths = layout.tree_of(self.root, tree)
        connection.guard(self._guards.get(tree.name))
        session = new_session(self.p, tree, paths, connection, seed)
        self.sessions[index] = session
        self._session_seeds[index] = seed
        return session

    # ------------------------------------------------------------------ scoring

    def score(
        self, result: Any, step_ops: Mapping[Any, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The reference's scoring of a finished run (``result``: the engine's RunResult).

        ``step_ops`` maps each measured stage's ``step`` (None for an unstepped run) to its
        operations' OpStats (count and mean latency); without it the load points carry rates
        and validity only.
        """
        points = []
        for entry in result.stage_log:
            if entry.get("phase") != "measure" or "session_ops" not in entry:
                continue
            sessions = int(entry["sessions"])
            rate = entry.get("rate_ops_s")
            requested = None
            if rate is not None:
                weights = self.session_weights(sessions)
                requested = [rate * w / sum(weights) for w in weights]
            ops = (step_ops or {}).get(entry.get("step"), {})
            points.append(
                LoadPoint(
                    step=entry.get("step"),
                    duration_s=float(entry.get("duration_s") or 0.0),
                    session_ops=list(entry["session_ops"]),
                    requested_ops_s=requested,
                    op_counts={n: int(s.count) for n, s in ops.items()},
                    op_mean_us={n: s.mean_us() for n, s in ops.items()},
                    bytes_per_op=self.mean_bytes_per_op(),
                )
            )
        return score_load_points(points, layout.processes_per_job_set(self.p))

    def mean_bytes_per_op(self) -> dict[str, float]:
        """Bytes one operation moved on average, over every session's lifetime."""
        moved: dict[str, int] = {}
        for session in self.sessions.values():
            for name, n in session.bytes_by_op.items():
                moved[name] = moved.get(name, 0) + n
        dealt: dict[str, int] = {}
        for session in self.sessions.values():
            for name, n in session.dealt.items():
                dealt[name] = dealt.get(name, 0) + n
        return {name: moved[name] / max(dealt.get(name, 0), 1) for name in moved}


# --------------------------------------------------------------------------- scoring rules


@dataclass(frozen=True)
class LoadPoint:
    """One measured stage: what each session issued, what was asked, what the ops cost."""

    step: int | None
    duration_s: float
    session_ops: list[int]
    #: Per session, the requested ops/s (None: closed loop, nothing was requested).
    requested_ops_s: list[float] | None
    op_counts: dict[str, int]
    op_mean_us: dict[str, float]
    bytes_per_op: dict[str, float]


def judge(requested: Sequence[float], achieved: Sequence[float]) -> dict[str, Any]:
    """The validity rule: every process at >= 75 % of its requested rate and the total at
    >= 95 % of the requested total."""
    fractions = [a / r for r, a in zip(requested, achieved, strict=True) if r > 0]
    overall = sum(achieved) / sum(requested) if sum(requested) > 0 else 0.0
    worst = min(fractions, default=0.0)
    # A hair of slack for float arithmetic: exactly 75 % (or 95 %) passes.
    valid = worst >= PROCESS_MIN_FRACTION - 1e-9 and overall >= OVERALL_MIN_FRACTION - 1e-9
    return {
        "valid": valid,
        "overall_fraction": round(overall, 4),
        "worst_process_fraction": round(worst, 4),
        "processes_below_75pct": sum(1 for f in fractions if f < PROCESS_MIN_FRACTION - 1e-9),
    }


def overall_response_time(curve: Sequence[tuple[float, float]]) -> float | None:
    """Area under the response-time-versus-throughput curve divided by the peak throughput.

    ``curve``: (ops/s, mean latency) per load point. The curve is piecewise linear through the
    points in throughput order and held flat at the first point's latency down to zero ops/s,
    so a single load point's overall response time is its own latency.
    """
    points = sorted(curve)
    if not points or points[-1][0] <= 0:
        return None
    area = points[0][0] * points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        area += (x1 - x0) * (y0 + y1) / 2
    return area / points[-1][0]


def score_load_points(points: Sequence[LoadPoint], per_job_set: int) -> dict[str, Any]:
    """Per load point: requested and achieved ops/s (per process and overall), validity,
    MB/s, mean latency per op; then the highest valid point and the overall response time."""
    rows: list[dict[str, Any]] = []
    for point in points:
        seconds = max(point.duration_s, 1e-9)
        achieved = [n / seconds for n in point.session_ops]
        completed = sum(point.op_counts.values())
        moved = sum(n * point.bytes_per_op.get(op, 0.0) for op, n in point.op_counts.items())
        latency = (
            sum(n * point.op_mean_us.get(op, 0.0) for op, n in point.op_counts.items()) / completed
            if completed
            else None
        )
        row: dict[str, Any] = {
            "step": point.step,
            "sessions": len(point.session_ops),
            "job_sets": round(len(point.session_ops) / per_job_set, 3),
            "duration_s": round(point.duration_s, 3),
            "requested_ops_s": None,
            "achieved_ops_s": round(sum(achieved), 2),
            "achieved_process_ops_s": [round(a, 2) for a in achieved],
            "mb_s": round(moved / seconds / 1e6, 3),
            "mib_s": round(moved / seconds / 2**20, 3),
            "mean_latency_ms": None if latency is None else round(latency / 1000, 4),
            "op_mean_latency_ms": {k: round(v / 1000, 4) for k, v in point.op_mean_us.items()},
            "valid": None,
        }
        if point.requested_ops_s is not None:
            row["requested_ops_s"] = round(sum(point.requested_ops_s), 2)
            row["requested_process_ops_s"] = [round(r, 2) for r in point.requested_ops_s]
            row.update(judge(point.requested_ops_s, achieved))
        rows.append(row)
    valid = [r for r in rows if r["valid"]]
    best = max(valid, key=lambda r: (r["requested_ops_s"], r["achieved_ops_s"]), default=None)
    curve = [(r["achieved_ops_s"], r["mean_latency_ms"]) for r in valid if r["mean_latency_ms"]]
    ort = overall_response_time(curve)
    return {
        "rule": "valid when every process >= 75 % and the load point >= 95 % of the requested rate",
        "load_points": rows,
        "highest_valid": None
        if best is None
        else {
            k: best[k] for k in ("step", "job_sets", "achieved_ops_s", "mb_s", "mean_latency_ms")
        },
        "overall_response_time_ms": None if ort is None else round(ort, 4),
    }
