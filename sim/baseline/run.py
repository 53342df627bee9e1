"""One storage baseline run: fio, point after point, with the collectors on dbsim's clock.

Order of work (nothing is written to the target before every check has passed):

1. fio is found (else exit 2 with how to install it), the points are planned, the envelope
   and the lab (``--lab``) are checked;
2. the target is claimed (:mod:`sim.baseline.safety`): a marked file tree, or a raw
   device named twice and found unmounted, unused and without a signature; each point's
   working set is scaled to this host and the target's room, and an NFS target's mount
   options are read beside the seed's (:mod:`sim.baseline.planning`);
3. the bundle is created and the collectors (block devices under the target, NFS mounts,
   host CPU) start sampling every ``interval_s`` on the engine's clock (``perf_counter``
   from the start of the run), labelled with the phase: ``layout``, ``ramp`` (fio's
   ``ramp_time``, excluded from fio's own figures), ``measure``, ``idle`` between points;
4. each point is one fio process — or several: an iodepth search, an iorate curve
   (:mod:`sim.baseline.stepped`); its JSON and text reports are kept verbatim under
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
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim import registry
from sim.baseline import annotate, fio, planning, safety, stepped
from sim.baseline.matrix import PlannedPoint
from sim.baseline.options import BaselineOptions, checked
from sim.baseline.results import line, write_csv
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

__all__ = ["BASELINE_CSV", "BASELINE_JSON", "BaselineOptions", "BaselineRun"]

log = logging.getLogger(__name__)

BASELINE_JSON = "baseline.json"
BASELINE_CSV = "baseline.csv"
COLLECTORS = ("block", "nfs", "host")
COLLECTOR_TIMEOUT_S = 2.0  # per call: a hung /proc read must not stall the 1 s sampling


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
        self.points, self.envelope = checked(opts)
        self.mount: dict[str, Any] | None = None
        self.files = 1
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
        """Claim the target (:mod:`sim.baseline.safety`), then size every point for it and
        read its mount options; the points take their working sets here."""
        target = Path(self.opts.target)
        device_bytes = None
        if planning.is_device(target):
            device_bytes = safety.check_raw_device(target, self.opts.raw_device)["size_bytes"]
        elif self.opts.raw_device is not None:
            raise ConfigError(
                f"--raw-device {self.opts.raw_device}: the target {target} is not a block device"
            )
        else:
            safety.claim_tree(target)
        host = planning.host_facts(target, device_bytes)
        prepared = planning.size_points(
            self.points, host, self.opts.size_bytes, target, device_bytes is not None
        )
        self.points = prepared.points
        self.files = prepared.files
        self.mount = planning.mount_report(self.points, target, device_bytes is not None)
        return prepared.target

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
                sampler.read_at(t_end)  # local files read at the interval's end (Collector.read_at)
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
        device_source = registry.collector_with_role(registry.ROLE_DEVICE)
        for weight, samples in chosen:
            for sample in samples:
                if sample.source != device_source or sample.gap:  # a gap has no figures to weigh
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
        jobs = self.files
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
        """One point: a single fio run, or the runs of its iodepth search, then its iorate
        curve (:mod:`sim.baseline.stepped`)."""

        async def once(
            p: PlannedPoint, stem: str, rate: int | None, pct: int | None
        ) -> dict[str, Any]:
            return await self._fio(p, stem, (rate, pct), target, bundle, stop)

        def adopt(stem: str) -> None:
            for suffix in (".fio", ".json", ".txt"):
                found = bundle.path / "fio" / f"{stem}{suffix}"
                if found.exists():
                    shutil.copyfile(found, bundle.path / "fio" / f"{planned.point.id}{suffix}")

        if planned.search:
            result = await stepped.searched(planned, once, adopt, self.say)
        else:
            result = await once(planned, planned.point.id, None, None)
        if planned.curve and result.get("status") == "completed" and not stop.is_set():
            result = await stepped.curved(planned, result, once, self.say)
        return result

    async def _fio(
        self,
        planned: PlannedPoint,
        stem: str,
        step: tuple[int | None, int | None],
        target: fio.FioTarget,
        bundle: BundleWriter,
        stop: asyncio.Event,
    ) -> dict[str, Any]:
        """One fio process: its job file and reports under ``fio/<stem>.*``, its figures
        parsed, the devices' figures over its measured window. ``step``: an iorate curve
        step's rate_iops per job and percent, (None, None) otherwise."""
        opts, (rate, pct) = self.opts, step
        job_path = bundle.path / "fio" / f"{stem}.fio"
        notes = annotate.comments(planned, rate=rate, pct=pct, lab=opts.lab)
        text = fio.job_file(
            planned,
            target,
            opts.runtime_s,
            opts.ramp_s,
            opts.direct,
            rate_iops=rate,
            comments=notes,
        )
        atomic_write(job_path, text)
        out = bundle.path / "fio" / f"{stem}.out"
        self.point_id, self.phase = stem, "ramp"
        t_start = self.clock()
        ramp_over = asyncio.get_running_loop().call_later(opts.ramp_s, self._measuring, stem)
        argv = [self.binary, "--output-format=json,normal", f"--output={out}", "--eta=never"]
        argv.append(str(job_path))
        try:
            run = await fio.run_fio(argv, stop, self.wrap)
        finally:
            ramp_over.cancel()
            self.phase = "idle"
        window = (t_start, self.clock())
        return await self._reported(planned, stem, out, run, window, stop)

    async def _reported(
        self,
        planned: PlannedPoint,
        stem: str,
        out: Path,
        run: fio.FioRun,
        window: tuple[float, float],
        stop: asyncio.Event,
    ) -> dict[str, Any]:
        """What one fio run reported, split into its JSON and text files and parsed, with the
        devices' figures over its measured window."""
        opts, (t_start, t_end) = self.opts, window
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
            raise TargetError(fio.failure_line(run, stem)) from None
        atomic_write(out.with_suffix(".json"), json_text)
        atomic_write(out.with_suffix(".txt"), report_text)
        out.unlink()
        parsed = fio.parse_report(document, report_text)
        if run.returncode != 0 and not run.interrupted:
            raise TargetError(fio.failure_line(run, stem, parsed["error"]))
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
                    "curve": o.curve, "capacity_tib": o.capacity_tib,
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
            for said in self.preamble():
                self.say(said)
            if target.kind == "files":
                await self._layout(target, bundle, stop)
            await self._points(target, bundle, stop)
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

    async def _points(
        self, target: fio.FioTarget, bundle: BundleWriter, stop: asyncio.Event
    ) -> None:
        for n, planned in enumerate(self.points, 1):
            if stop.is_set():
                break
            depth = (f"iodepth searched from {planned.iodepth}" if planned.search
                     else f"iodepth={planned.iodepth}")  # fmt: skip
            self.say(f"[{n}/{len(self.points)}] {planned.point.id}: {planned.point.rw} "
                     f"bs={planned.point.block_kib}k numjobs={planned.numjobs} {depth}")  # fmt: skip
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

    def preamble(self) -> list[str]:
        """What the console says before fio starts: the working sets and the mount."""
        rules = dict.fromkeys(
            f"working set {p.seed.table or p.point.id}: {p.work.rule}"
            for p in self.points
            if p.work
        )
        said = list(rules)
        for table in (self.mount or {}).get("tables", []):
            said += table["said"]
        return said + planning.advice(self.opts.presets)

    def finish(self, bundle: BundleWriter, status: str, error: str | None) -> dict[str, Any]:
        baseline: dict[str, Any] = {
            "fio": {"binary": self.binary, "version": self.version},
            "target": str(self.opts.target),
            "runtime_s": self.opts.runtime_s,
            "ramp_s": self.opts.ramp_s,
            "points": self.results,
            "mount": self.mount,
            "advice": planning.advice(self.opts.presets),
        }
        if self.envelope is not None:
            from sim.baseline.envelope import compare

            done = [r for r in self.results if r.get("status") == "completed"]
            baseline["comparison"] = compare(self.envelope, done, self.opts.capacity_tib)
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
