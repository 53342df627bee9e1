"""One storage baseline run: fio, point after point, with the collectors on dbsim's clock.

Order of work (nothing is written to the target before every check has passed):

1. fio is found (else exit 2 with how to install it), the points are planned, the envelope
   and the lab (``--lab``) are checked;
2. the target is claimed (:mod:`sim.baseline.safety`): a marked file tree, or a raw
   device named twice and found unmounted, unused and without a signature;
3. the bundle is created and the collectors (block devices under the target, NFS mounts,
   host CPU) start sampling every ``interval_s`` on the engine's clock (``perf_counter``
   from the start of the run), labelled with the phase: ``layout``, ``ramp`` (fio's
   ``ramp_time``, excluded from fio's own figures), ``measure``, ``idle`` between points;
4. each point is one fio process; its JSON and text reports are kept verbatim under
   ``fio/`` and parsed into ``baseline.json`` / ``baseline.csv`` together with the block
   devices' iostat figures over the same measured window;
5. fio's files are removed (unless ``keep_files``), the envelope comparison is added and
   ``summary.json`` and ``report.html`` are written — also when the run is interrupted or a
   point fails, with what was measured until then.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim import registry
from sim.baseline import fio, safety
from sim.baseline.matrix import PlannedPoint, plan
from sim.bundle.files import atomic_write, new_bundle_dir
from sim.bundle.writer import BundleWriter
from sim.core.metrics import Interval
from sim.core.sampler import CollectorSampler
from sim.errors import (
    CollectorError,
    ConfigError,
    OutputDirectoryError,
    SimError,
    TargetError,
)
from sim.protocols import Collector, Sample

log = logging.getLogger(__name__)

BASELINE_JSON = "baseline.json"
BASELINE_CSV = "baseline.csv"
COLLECTORS = ("block", "nfs", "host")
COLLECTOR_TIMEOUT_S = 2.0  # per call: a hung /proc read must not stall the 1 s sampling
CSV_COLUMNS = (
    "id", "access", "block_kib", "read_pct", "numjobs", "iodepth", "status",
    "read_iops", "write_iops", "iops", "read_mib_s", "write_mib_s", "mib_s",
    "read_p50_us", "read_p99_us", "read_p99_9_us", "write_p50_us", "write_p99_us",
    "write_p99_9_us", "t_measure_start", "t_end", "published_iops", "ratio",
)  # fmt: skip


@dataclass
class BaselineOptions:
    target: Path
    presets: list[str]
    raw_device: str | None = None
    only: list[str] = field(default_factory=list)
    numjobs: int | None = None
    iodepth: int | None = None
    runtime_s: float = 30.0
    ramp_s: float = 5.0
    size_bytes: int | None = None  # files: the working set; device: the span used
    envelope: str | None = None
    lab: bool = False
    keep_files: bool = False
    directory: Path = Path("runs")
    name: str | None = None
    interval_s: float = 1.0
    fio_binary: str | None = None
    direct: bool = True


DEFAULT_TREE_SIZE = 1 << 30  # 1 GiB working set: well past any controller's small caches


class _Paths:
    """What the collectors' ``auto`` functions need of a target: where its data lives."""

    kind = "baseline"

    def __init__(self, path: Path) -> None:
        self.path = path

    def storage_paths(self) -> list[Path]:
        return [self.path]


class BaselineRun:
    """The state of one run; :meth:`run` does the work and always leaves a whole bundle."""

    def __init__(
        self,
        opts: BaselineOptions,
        on_line: Callable[[str], None] = lambda s: None,
        lab: Any = None,  # a storage.lab.Lab (tests bring their own); default: the user's
    ) -> None:
        self.opts = opts
        self.say = on_line
        self.binary = fio.find_fio(opts.fio_binary)
        self.version = fio.fio_version(self.binary)
        if opts.runtime_s <= 0 or opts.ramp_s < 0 or opts.interval_s <= 0:
            raise ConfigError("baseline: --runtime and --interval must be > 0, --ramp ≥ 0")
        self.points = plan(opts.presets, opts.only, opts.numjobs, opts.iodepth)
        self.envelope = None
        if opts.envelope:
            from storage.envelopes import get_envelope

            try:
                self.envelope = get_envelope(opts.envelope)
            except ConfigError as exc:  # name the option: the message alone says "envelope"
                raise ConfigError(f"baseline --envelope: {exc}") from None
        self.wrap: Callable[[list[str]], list[str]] = list
        if opts.lab:
            from storage.lab import Lab, require_root

            require_root()
            lab = lab or Lab()
            if not lab.status().get("up"):
                raise ConfigError("baseline --lab: the lab is not up; start it with `dbsim lab up`")
            self.wrap = lab.command
        self.results: list[dict[str, Any]] = []
        self.phase = "setup"
        self.point_id = ""
        self.samples: list[tuple[float, float, list[Sample]]] = []
        self.t0 = time.perf_counter()

    def clock(self) -> float:
        return time.perf_counter() - self.t0

    # ------------------------------------------------------------------ target

    def claim_target(self) -> fio.FioTarget:
        target = Path(self.opts.target)
        is_device = target.exists() and stat.S_ISBLK(target.stat().st_mode)
        if is_device:
            facts = safety.check_raw_device(target, self.opts.raw_device)
            span = min(self.opts.size_bytes or facts["size_bytes"], facts["size_bytes"])
            return fio.FioTarget("device", target, span)
        if self.opts.raw_device is not None:
            raise ConfigError(
                f"--raw-device {self.opts.raw_device}: the target {target} is not a block device"
            )
        work = safety.claim_tree(target)
        jobs = max(p.numjobs for p in self.points)
        per_job = (self.opts.size_bytes or DEFAULT_TREE_SIZE) // jobs
        return fio.FioTarget("files", work, max(fio.MIB, per_job - per_job % fio.MIB))

    # ------------------------------------------------------------------ collectors

    def _collectors(self, target: fio.FioTarget, bundle: BundleWriter) -> list[Collector]:
        where = _Paths(target.path)
        options: dict[str, Any] = {}
        if target.kind == "device":
            # A device node resolves to devtmpfs, not to itself: name the device to watch.
            options["block"] = {"devices": [Path(os.path.realpath(target.path)).name]}
        found: list[Collector] = []
        known = registry.collectors()
        for name in COLLECTORS:
            try:
                found.extend(known[name].auto(where, dict(options)))  # type: ignore[arg-type]
            except (CollectorError, OSError) as exc:
                bundle.add_message(f"collector {name}: {exc}")
        return found

    async def _sampler(self, collectors: list[Collector], bundle: BundleWriter) -> None:
        """Sample every ``interval_s`` on dbsim's clock, each interval tagged with the phase
        fio is in, until cancelled."""
        sampler = CollectorSampler(collectors, COLLECTOR_TIMEOUT_S, bundle.on_collector_error)
        await sampler.start(self.clock())
        index, t_start = 0, self.clock()
        try:
            while True:
                await asyncio.sleep(max(0.0, t_start + self.opts.interval_s - self.clock()))
                t_end = self.clock()
                samples = await sampler.sample(t_end)
                phase = self.phase if self.phase in ("measure", "ramp", "layout") else "idle"
                interval = Interval(index, t_start, t_end, phase, None, {})
                bundle.on_interval(interval, samples)
                self.samples.append((t_start, t_end, samples))
                index, t_start = index + 1, t_end
        finally:
            await sampler.stop()

    def device_means(self, t_from: float, t_to: float) -> dict[str, dict[str, float]]:
        """Block-device figures averaged (time-weighted) over the intervals inside a window;
        for a window too short to hold a whole interval, over the intervals overlapping it,
        each weighted by its overlap."""
        sums: dict[str, dict[str, float]] = {}
        seconds: dict[str, float] = {}
        chosen = [
            (t_end - t_start, samples)
            for t_start, t_end, samples in self.samples
            if t_start >= t_from - 0.05 and t_end <= t_to + 0.05
        ]
        if not chosen:
            # The sampling interval (1 s) is not aligned with fio's window: a point measured
            # for about one or two intervals had none wholly inside, and its device figures
            # came out empty ({}) — most points of a --runtime 1 run did. An interval partly
            # outside (ramp, idle) dilutes the mean a little; a long window never needs this.
            chosen = [
                (min(t_end, t_to) - max(t_start, t_from), samples)
                for t_start, t_end, samples in self.samples
                if min(t_end, t_to) > max(t_start, t_from)
            ]
        for weight, samples in chosen:
            for sample in samples:
                if sample.source != "block" or sample.gap:  # a gap has no figures to weigh
                    continue
                acc = sums.setdefault(sample.entity, {})
                for key, value in sample.values.items():
                    acc[key] = acc.get(key, 0.0) + value * weight
                seconds[sample.entity] = seconds.get(sample.entity, 0.0) + weight
        return {
            dev: {k: round(v / seconds[dev], 3) for k, v in acc.items()}
            for dev, acc in sums.items()
            if seconds[dev] > 0
        }

    # ------------------------------------------------------------------ points

    async def _layout(
        self, target: fio.FioTarget, bundle: BundleWriter, stop: asyncio.Event
    ) -> None:
        self.phase = "layout"
        jobs = max(p.numjobs for p in self.points)
        self.say(f"laying out {jobs} file(s) of {target.size_bytes >> 20} MiB in {target.path}")
        job_path = bundle.path / "fio" / "layout.fio"
        atomic_write(job_path, fio.layout_job(target, jobs))
        out = bundle.path / "fio" / "layout.json"
        run = await fio.run_fio(
            [self.binary, "--output-format=json", f"--output={out}", str(job_path)], stop
        )
        if run.returncode != 0 and not run.interrupted:
            raise TargetError(fio.failure_line(run, f"the layout of {target.path}"))

    async def _point(
        self,
        planned: PlannedPoint,
        target: fio.FioTarget,
        bundle: BundleWriter,
        stop: asyncio.Event,
    ) -> dict[str, Any]:
        point = planned.point
        opts = self.opts
        job_path = bundle.path / "fio" / f"{point.id}.fio"
        atomic_write(
            job_path, fio.job_file(planned, target, opts.runtime_s, opts.ramp_s, opts.direct)
        )
        out = bundle.path / "fio" / f"{point.id}.out"
        self.point_id, self.phase = point.id, "ramp"
        t_start = self.clock()
        ramp_over = asyncio.get_running_loop().call_later(opts.ramp_s, self._measuring, point.id)
        argv = [self.binary, "--output-format=json,normal", f"--output={out}", "--eta=never"]
        argv.append(str(job_path))
        try:
            run = await fio.run_fio(argv, stop, self.wrap)
        finally:
            ramp_over.cancel()
            self.phase = "idle"
        t_end = self.clock()
        result: dict[str, Any] = {
            **planned.to_dict(),
            "t_start": round(t_start, 3),
            "t_end": round(t_end, 3),
        }
        text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        try:
            document, json_text, report_text = fio.split_output(text)
        except TargetError:
            if run.interrupted:
                return {**result, "status": "interrupted"}
            raise TargetError(fio.failure_line(run, point.id)) from None
        atomic_write(out.with_suffix(".json"), json_text)
        atomic_write(out.with_suffix(".txt"), report_text)
        out.unlink()
        parsed = fio.parse_report(document, report_text)
        if run.returncode != 0 and not run.interrupted:
            raise TargetError(fio.failure_line(run, point.id, parsed["error"]))
        measure_from = t_end - opts.runtime_s if not run.interrupted else t_start + opts.ramp_s
        result.update(parsed)
        result["status"] = "interrupted" if run.interrupted else "completed"
        result["t_measure_start"] = round(measure_from, 3)
        await self._sampled_until(t_end, stop)
        result["device"] = self.device_means(measure_from, t_end)
        return result

    async def _sampled_until(self, t_end: float, stop: asyncio.Event) -> None:
        """Wait (at most one interval) until the sampler has recorded the interval in flight
        when fio ended: it holds the window's last part, and a short point's window (about one
        interval) could otherwise overlap no recorded interval and get no device figures."""
        deadline = self.clock() + self.opts.interval_s + 1.0
        while not stop.is_set() and self.clock() < deadline:
            if self.samples and self.samples[-1][1] >= t_end:
                break
            await asyncio.sleep(0.02)

    def _measuring(self, point_id: str) -> None:
        if self.point_id == point_id and self.phase == "ramp":
            self.phase = "measure"

    # ------------------------------------------------------------------ the run

    def scenario(self) -> dict[str, Any]:
        o = self.opts
        return {
            "name": o.name or "baseline",
            "workload": {
                "name": "baseline",
                "parameters": {
                    "presets": o.presets, "only": o.only, "numjobs": o.numjobs,
                    "iodepth": o.iodepth, "runtime_s": o.runtime_s, "ramp_s": o.ramp_s,
                    "size_bytes": o.size_bytes, "direct": o.direct, "envelope": o.envelope,
                },
            },
            "target": {"kind": "raw-device" if o.raw_device else "filetree", "path": str(o.target)},
            "lab": o.lab,
            "fio": {"binary": self.binary, "version": self.version},
        }  # fmt: skip

    async def run(self, stop: asyncio.Event) -> tuple[dict[str, Any], Path]:
        target = self.claim_target()
        try:
            path = new_bundle_dir(self.opts.directory, self.opts.name or "baseline")
            bundle = BundleWriter(path, self.scenario(), flush_interval_s=2.0)
            (path / "fio").mkdir(exist_ok=True)
        except BaseException as exc:
            # No bundle, no run: give the tree back as it was (the marker claim_tree wrote,
            # and the root if dbsim created it), so a bad --output leaves nothing behind.
            if target.kind == "files":
                safety.release_tree(Path(self.opts.target))
            if isinstance(exc, OutputDirectoryError):  # named as this command's option
                raise OutputDirectoryError(
                    str(exc).replace("output.directory:", "baseline --output:", 1)
                ) from None
            raise
        bundle.running_extra = {"baseline": {"points_planned": [p.point.id for p in self.points]}}
        sampler = asyncio.ensure_future(self._sampler(self._collectors(target, bundle), bundle))
        status, error = "completed", None
        try:
            bundle.on_state("measure")
            if target.kind == "files":
                await self._layout(target, bundle, stop)
            for n, planned in enumerate(self.points, 1):
                if stop.is_set():
                    break
                self.say(f"[{n}/{len(self.points)}] {planned.point.id}: {planned.point.rw} "
                         f"bs={planned.point.block_kib}k numjobs={planned.numjobs} iodepth={planned.iodepth}")  # fmt: skip
                try:
                    result = await self._point(planned, target, bundle, stop)
                except (SimError, OSError) as exc:
                    # The failed point is listed too (its fio reports are in fio/), so the
                    # bundle says which point failed and why, not only which ones succeeded.
                    why = str(exc) if isinstance(exc, SimError) else exc.strerror
                    self.results.append({**planned.to_dict(), "status": "failed", "error": why})
                    raise
                self.results.append(result)
                bundle.running_extra["baseline"]["points"] = self.results
                if result["status"] == "completed":
                    self.say(f"    {line(result)}")
            if stop.is_set():
                status = "interrupted"
        except SimError as exc:
            status, error = "failed", str(exc)
        except OSError as exc:
            status, error = "failed", f"{exc.filename or 'fio'}: {exc.strerror}"
        finally:
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
            if target.kind == "files" and not self.opts.keep_files:
                try:
                    safety.release_tree(Path(self.opts.target))
                except (OSError, SimError) as exc:
                    bundle.add_message(f"fio's files could not be removed: {exc}")
            summary = self.finish(bundle, status, error)
        return summary, path

    def finish(self, bundle: BundleWriter, status: str, error: str | None) -> dict[str, Any]:
        baseline: dict[str, Any] = {
            "fio": {"binary": self.binary, "version": self.version},
            "target": str(self.opts.target),
            "runtime_s": self.opts.runtime_s,
            "ramp_s": self.opts.ramp_s,
            "points": self.results,
        }
        if self.envelope is not None:
            from sim.baseline.envelope import compare

            done = [r for r in self.results if r.get("status") == "completed"]
            baseline["comparison"] = compare(self.envelope, done)
        atomic_write(bundle.path / BASELINE_JSON, json.dumps(baseline, indent=2) + "\n")
        write_csv(bundle.path / BASELINE_CSV, baseline)
        bundle.running_extra = {}
        bundle.state = "finished"
        extra: dict[str, Any] = {"baseline": baseline}
        if error:
            extra["error"] = error
        summary = bundle.write_summary(status=status, extra=extra)
        bundle.close()
        try:
            from sim.baseline.page import write_baseline_report

            write_baseline_report(bundle.path)
        except Exception as exc:  # the figures are in the bundle; a drawing bug must not hide them
            log.warning("baseline report failed", exc_info=True)
            summary.setdefault("messages", []).append(f"report.html could not be written: {exc}")
        return summary


def line(result: dict[str, Any]) -> str:
    """One point's figures, as the console prints them after the point."""
    read, write = result["read"], result["write"]
    parts = [f"{result['iops']:,.0f} IOPS", f"{result['mib_s']:,.1f} MiB/s"]
    if read["ios"]:
        parts.append(f"read p99 {read['p99_us'] / 1000:.2f} ms")
    if write["ios"]:
        parts.append(f"write p99 {write['p99_us'] / 1000:.2f} ms")
    printed = "; ".join(f"{d}: {t}" for d, t in result.get("printed", {}).items())
    return ", ".join(parts) + (f"   (fio printed {printed})" if printed else "")


def write_csv(path: Path, baseline: dict[str, Any]) -> None:
    ratios = {row["id"]: row for row in (baseline.get("comparison") or {}).get("rows", [])}
    lines = [",".join(CSV_COLUMNS)]
    for r in baseline["points"]:
        read, write = r.get("read") or {}, r.get("write") or {}
        compared = ratios.get(r["id"]) or {}
        values = {
            **{k: r.get(k) for k in ("id", "access", "block_kib", "read_pct", "numjobs", "iodepth",
                                     "status", "iops", "mib_s", "t_measure_start", "t_end")},
            "read_iops": read.get("iops"), "write_iops": write.get("iops"),
            "read_mib_s": read.get("mib_s"), "write_mib_s": write.get("mib_s"),
            "read_p50_us": read.get("p50_us"), "read_p99_us": read.get("p99_us"),
            "read_p99_9_us": read.get("p99_9_us"), "write_p50_us": write.get("p50_us"),
            "write_p99_us": write.get("p99_us"), "write_p99_9_us": write.get("p99_9_us"),
            "published_iops": (compared.get("published") or {}).get("iops"),
            "ratio": compared.get("ratio"),
        }  # fmt: skip
        lines.append(",".join("" if values[c] is None else str(values[c]) for c in CSV_COLUMNS))
    atomic_write(path, "\n".join(lines) + "\n")
