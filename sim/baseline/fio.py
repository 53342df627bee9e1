"""Driving the real fio: find it, write its job files, run it, read what it printed.

dbsim never imitates fio. Each point is one fio process started with
``--output-format=json,normal``: fio prints its JSON document and its usual text report into
one file; the JSON is parsed (fio's own IOPS, bandwidth and completion-latency percentiles,
nothing recomputed) and both parts are kept in the bundle verbatim (``fio/<point>.json`` and
``fio/<point>.txt``), so anyone can check a figure against fio's own words.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sim.baseline.matrix import PlannedPoint
from sim.baseline.strategy import RATE_PROCESS
from sim.errors import ConfigError, TargetError

FIO_ENV = "DBSIM_FIO"  # a fio binary other than the one on PATH
INSTALL_HINT = (
    "install it with `apt-get install fio` (Debian, Ubuntu), `dnf install fio` (RHEL, Fedora) "
    f"or point {FIO_ENV} at a fio binary; dbsim drives the real fio and has no substitute"
)
PERCENTILES = {"p50_us": "50.000000", "p95_us": "95.000000", "p99_us": "99.000000"}
PERCENTILES_EXTRA = {"p99_9_us": "99.900000"}
STOP_GRACE_S = 15.0  # after SIGINT fio stops its jobs and still prints its report
MIB = 1 << 20
_PRINTED = re.compile(r"^\s*(read|write)\s*:\s*(IOPS=[^,]+,\s*BW=\S+)", re.MULTILINE)


def find_fio(explicit: str | None = None) -> str:
    """The fio binary: ``explicit``, else ``$DBSIM_FIO``, else ``fio`` on PATH; ConfigError
    (exit 2) with the install hint when there is none."""
    wanted = explicit or os.environ.get(FIO_ENV) or "fio"
    found = shutil.which(wanted)
    if found is None:
        raise ConfigError(f"fio is not installed (no {wanted!r} on PATH): {INSTALL_HINT}")
    return found


def fio_version(binary: str) -> str:
    try:
        out = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"fio at {binary} does not run ({exc}): {INSTALL_HINT}") from exc
    version = out.stdout.strip()
    if out.returncode != 0 or not version.startswith("fio"):
        raise ConfigError(f"{binary} is not fio (it printed {version[:60]!r}): {INSTALL_HINT}")
    return version


# --------------------------------------------------------------------------- job files


@dataclass(frozen=True)
class FioTarget:
    """Where fio does its I/O: files in a dbsim-owned directory, or a whole raw device."""

    kind: Literal["files", "device"]
    path: Path  # the directory (files) or the device node
    size_bytes: int  # per job file (files) or the span of the device used (device)


def _global(target: FioTarget, runtime_s: float, ramp_s: float, direct: bool) -> list[str]:
    lines = [
        "[global]",
        "ioengine=libaio",
        f"direct={int(direct)}",
        "time_based=1",
        f"runtime={runtime_s:g}s",
        f"ramp_time={ramp_s:g}s",
        "group_reporting=1",
        "randrepeat=0",  # a fresh sequence each point: no cache can learn it
        "norandommap=1",
    ]
    if target.kind == "files":
        # One file per job clone, shared by every point: laid out once, before the first point.
        lines += [f"directory={target.path}", "filename_format=dbsim-fio.$jobnum"]
    else:
        lines.append(f"filename={target.path}")
    return lines


def job_file(
    planned: PlannedPoint,
    target: FioTarget,
    runtime_s: float,
    ramp_s: float,
    direct: bool = True,
    *,
    rate_iops: int | None = None,
    comments: Sequence[str] = (),
) -> str:
    """The fio job file of one point (at ``planned.iodepth``); ``rate_iops`` caps each job
    (an iorate curve step); ``comments`` head the file as ``#`` lines, which fio ignores."""
    point = planned.point
    lines = [f"# {c}" if c else "#" for c in comments]
    lines += _global(target, runtime_s, ramp_s, direct)
    lines += [
        f"[{point.id}]",
        f"rw={point.rw}",
        f"bs={point.block_kib}k",
        f"numjobs={planned.numjobs}",
        f"iodepth={planned.iodepth}",
    ]
    if point.rw in ("randrw", "rw"):
        lines.append(f"rwmixread={point.read_pct}")
    size = min(planned.job_bytes or target.size_bytes, target.size_bytes)
    if target.kind == "files":
        lines.append(f"size={size}")  # of each job's file: at most what was laid out
    elif point.access == "sequential" and planned.numjobs > 1:
        # Each job streams its own region, as separate sequential streams do on a LUN.
        region = _align(size // planned.numjobs)
        lines += [f"size={region}", f"offset_increment={region}"]
    else:
        lines.append(f"size={_align(size)}")
    if rate_iops is not None:
        lines += [f"rate_iops={rate_iops}", f"rate_process={RATE_PROCESS}"]
    return "\n".join(lines) + "\n"


def layout_job(target: FioTarget, numjobs: int) -> str:
    """The job files written in full by fio, once, with direct sequential writes: a file that
    is only allocated (fio's default layout uses fallocate) holds unwritten extents, and
    reading those returns zeros without any I/O — a read test would measure nothing."""
    return (
        "\n".join(
            [
                "[global]",
                "ioengine=libaio",
                "direct=1",
                "iodepth=4",
                "fallocate=none",
                f"directory={target.path}",
                "filename_format=dbsim-fio.$jobnum",
                f"size={target.size_bytes}",
                "[layout]",
                "rw=write",
                "bs=1m",
                f"numjobs={numjobs}",
            ]
        )
        + "\n"
    )


def _align(n: int) -> int:
    return max(MIB, n - n % MIB)


# --------------------------------------------------------------------------- running


@dataclass
class FioRun:
    returncode: int
    stderr: str
    interrupted: bool


async def run_fio(
    argv: Sequence[str],
    stop: asyncio.Event,
    wrap: Callable[[list[str]], list[str]] = list,
) -> FioRun:
    """Run fio; when ``stop`` is set, SIGINT it (fio then stops and still writes its report),
    and kill it if it does not end within :data:`STOP_GRACE_S`."""
    proc = await asyncio.create_subprocess_exec(
        *wrap(list(argv)),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # the user's Ctrl-C reaches dbsim, which stops fio itself
    )
    assert proc.stderr is not None
    stderr_task = asyncio.ensure_future(proc.stderr.read())
    waiter = asyncio.ensure_future(proc.wait())
    stopper = asyncio.ensure_future(stop.wait())
    interrupted = False
    try:
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done():
            interrupted = True
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(asyncio.shield(waiter), STOP_GRACE_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await waiter
    finally:
        stopper.cancel()
        if not waiter.done():  # cancelled from outside: never leave fio running
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(waiter)
    stderr = (await stderr_task).decode("utf-8", "replace")
    return FioRun(proc.returncode or 0, stderr, interrupted)


def failure_line(run: FioRun, what: str, job_error: int = 0) -> str:
    """fio's own last error line, for a one-line message; else the errno fio's JSON report
    gives for the job (``job_error``)."""
    lines = [ln.strip() for ln in run.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "err" in ln.lower()]
    # A job's error ("fio: pid=…, err=30/file:filesetup.c:805, func=open(…), error=Read-only
    # file system") goes to fio's output, not its stderr, and with --output=FILE fio loses it;
    # its JSON still has the errno, without which the message said only "no message".
    if not errors and job_error:
        errors = [f"err={job_error} ({os.strerror(job_error)})"]
    errors = errors or lines
    detail = errors[-1] if errors else "no message"
    return f"fio failed on {what} (exit {run.returncode}): {detail}"


# --------------------------------------------------------------------------- results


def split_output(text: str) -> tuple[dict[str, Any], str, str]:
    """fio's JSON document, its text as fio printed it, and the rest (fio's text report) from
    one ``json,normal`` output."""
    # fio writes its text header, then the JSON document (its first line a lone "{"), then
    # the rest of the text report.
    if text.startswith("{"):
        start = 0
    else:
        found = text.find("\n{\n")
        if found < 0:
            raise TargetError("fio printed no JSON report")
        start = found + 1
    try:
        document, end = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        raise TargetError(f"fio's JSON report cannot be read: {exc}") from exc
    if not isinstance(document, dict) or not document.get("jobs"):
        raise TargetError("fio's JSON report has no jobs")
    return document, text[start : start + end] + "\n", text[:start] + text[start + end :]


def _direction(data: dict[str, Any]) -> dict[str, Any]:
    clat = data.get("clat_ns") or {}
    percentiles = clat.get("percentile") or {}
    out: dict[str, Any] = {
        "iops": float(data.get("iops", 0.0)),
        "mib_s": float(data.get("bw_bytes", 0)) / MIB,
        "bw_kib_s": int(data.get("bw", 0)),
        "ios": int(data.get("total_ios", 0)),
        "io_bytes": int(data.get("io_bytes", 0)),
        "runtime_ms": int(data.get("runtime", 0)),
        "clat_mean_us": float(clat.get("mean", 0.0)) / 1000.0,
        "clat_max_us": float(clat.get("max", 0.0)) / 1000.0,
        "lat_mean_us": float((data.get("lat_ns") or {}).get("mean", 0.0)) / 1000.0,
    }
    for key, name in {**PERCENTILES, **PERCENTILES_EXTRA}.items():
        value = percentiles.get(name)
        out[key] = None if value is None else float(value) / 1000.0
    return out


def parse_report(document: dict[str, Any], text: str) -> dict[str, Any]:
    """The figures of one point as fio reported them (group_reporting: one job entry)."""
    job = document["jobs"][0]
    read, write = _direction(job.get("read") or {}), _direction(job.get("write") or {})
    return {
        "fio_version": document.get("fio version"),
        "job": job.get("jobname"),
        "error": int(job.get("error", 0)),
        "job_runtime_ms": int(job.get("job_runtime", 0)),
        "read": read,
        "write": write,
        "iops": read["iops"] + write["iops"],
        "mib_s": read["mib_s"] + write["mib_s"],
        "usr_cpu_pct": float(job.get("usr_cpu", 0.0)),
        "sys_cpu_pct": float(job.get("sys_cpu", 0.0)),
        "disk_util": document.get("disk_util", []),
        # fio's own text lines ("read: IOPS=43.0k, BW=168MiB/s"), shown beside the parsed ones.
        "printed": {d: m for d, m in _PRINTED.findall(text)},
    }
