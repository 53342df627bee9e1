"""Which host or layer limits a run on several hosts (issue #32).

A distributed run's bundle keeps each worker host's own samples (sim.live.worker_samples):
its CPU (the source playing :data:`~sim.registry.ROLE_HOST_CPU`, one entity per host, named
by the host) and its block devices (:data:`~sim.registry.ROLE_DEVICE`, ``<host>/<device>``).
The verdict is made on the merged counts and the sum of the hosts' devices
(:data:`~sim.analysis.series.HOSTS_SUM`); this module says *where*:

* the client: each host's dbsim CPU against its ceiling — one core (the interpreter lock), or
  its cgroup's CPU quota when lower (``cpu_limit_cores``, a container's limit) — and the
  host's own busy % with the share of session time its sessions computed. The host closest
  to its ceiling stands for the client in the verdict's client checks, named there: one
  starved worker host holds back its share of the load even when the others idle.
* the storage: each host's busiest device, its await and how it followed the latency of the
  run's primary operation (the verdict's own coupling), so a storage-bound call says
  whether every host's device await rose together (a shared array or volume limiting) or
  one host's alone (that host's LUN or path); and the array's own view (the source playing
  :data:`~sim.registry.ROLE_ARRAY`, sampled once for the run) beside them.

Only roles are asked for, never a collector's name (tests/unit/test_collector_declarations.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.analysis import sections, stats
from sim.analysis.series import BundleSeries, primary_device, role_entities
from sim.analysis.stats import FloatArray
from sim.analysis.verdict import CLIENT_THROTTLED_PCT, COUPLING_MIN_POINTS, COUPLING_MIN_R
from sim.registry import ROLE_ARRAY, ROLE_HOST_CPU, collector, collector_with_role


@dataclass(frozen=True)
class HostClient:
    """One worker host's client figures over a window (means of its intervals)."""

    host: str
    process_cpu_pct: float | None
    busy_pct: float | None
    #: Its cgroup's CPU quota in cores, when it has one (None: none seen).
    limit_cores: float | None
    throttled_pct: float | None
    sessions: float | None

    @property
    def ceiling_pct(self) -> float:
        """The most CPU dbsim's process can use there, in % of one core."""
        cores = 1.0 if self.limit_cores is None else min(1.0, self.limit_cores)
        return 100.0 * cores

    @property
    def used_pct(self) -> float | None:
        """dbsim's process CPU as a share of its ceiling."""
        if self.process_cpu_pct is None:
            return None
        return 100.0 * self.process_cpu_pct / self.ceiling_pct

    @property
    def cpu_share_pct(self) -> float | None:
        if self.process_cpu_pct is None or not self.sessions:
            return None
        return self.process_cpu_pct / self.sessions

    def said(self) -> str:
        """'CPU 99 % of its 0.20-core quota' / 'CPU 97 % of one core' / host busy."""
        if self.used_pct is None:
            return f"host {_pct(self.busy_pct)} busy"
        if self.limit_cores is not None and self.limit_cores < 1.0:
            throttled = (
                f", throttled in {self.throttled_pct:.0f} % of its periods"
                if self.throttled_pct is not None
                else ""
            )
            return f"CPU {self.used_pct:.0f} % of its {self.limit_cores:.2f}-core quota{throttled}"
        return f"CPU {self.used_pct:.0f} % of one core, host {_pct(self.busy_pct)} busy"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} %"


def worker_hosts(summary: Mapping[str, Any]) -> dict[str, float]:
    """A distributed run's worker hosts and their sessions (none for a one-process run)."""
    distributed = summary.get("distributed")
    workers = distributed.get("workers") if isinstance(distributed, dict) else None
    out: dict[str, float] = {}
    for worker in workers if isinstance(workers, list) else []:
        if isinstance(worker, dict) and worker.get("host"):
            host = str(worker["host"])
            sessions = worker.get("sessions")
            number = float(sessions) if isinstance(sessions, (int, float)) else 0.0
            out[host] = out.get(host, 0.0) + number
    return out


def _mean(cols: Mapping[str, FloatArray], key: str) -> float | None:
    return stats.nan_mean(cols[key]) if key in cols else None


def host_clients(window: BundleSeries) -> list[HostClient]:
    """Each worker host's client figures, for a run on two or more hosts (else none)."""
    hosts = worker_hosts(window.summary)
    if len(hosts) < 2:
        return []
    entities = role_entities(window, ROLE_HOST_CPU)
    out = []
    for host, sessions in sorted(hosts.items()):
        cols = entities.get(host)
        if cols is None:
            continue
        limit = _mean(cols, "cpu_limit_cores")
        out.append(
            HostClient(
                host=host,
                process_cpu_pct=_mean(cols, "process_cpu_pct"),
                busy_pct=_mean(cols, "cpu_busy_pct"),
                limit_cores=limit,
                throttled_pct=_mean(cols, "cpu_throttled_pct"),
                sessions=sessions or None,
            )
        )
    return out


def limiting_client(clients: list[HostClient]) -> HostClient | None:
    """The host whose dbsim is closest to its CPU ceiling — a quota throttling it in at
    least :data:`~sim.analysis.verdict.CLIENT_THROTTLED_PCT` % of its periods counts as at
    it — then the busiest host."""
    known = [c for c in clients if c.used_pct is not None or c.busy_pct is not None]
    if not known:
        return None
    return max(
        known,
        key=lambda c: (
            max(
                c.used_pct or 0.0,
                100.0 if (c.throttled_pct or 0.0) >= CLIENT_THROTTLED_PCT else 0.0,
            ),
            c.used_pct or 0.0,
            c.busy_pct or 0.0,
            c.host,
        ),
    )


@dataclass(frozen=True)
class HostDevice:
    """One host's busiest device over a window: its await and how latency followed it."""

    host: str
    device: str
    await_ms: float | None
    util_pct: float | None
    r: float | None
    n: int

    @property
    def follows(self) -> bool:
        return self.r is not None and self.r >= COUPLING_MIN_R and self.n >= COUPLING_MIN_POINTS


def host_devices(
    window: BundleSeries, op: str | None, devices: Mapping[str, dict[str, FloatArray]]
) -> list[HostDevice]:
    """Each worker host's busiest device (a run on two or more hosts; else none)."""
    hosts = worker_hosts(window.summary)
    if len(hosts) < 2:
        return []
    out = []
    for host in sorted(hosts):
        mine = {d: f for d, f in devices.items() if d.startswith(f"{host}/")}
        name = primary_device(mine)
        if name is None:
            continue
        figures = mine[name]
        r, _, n = sections.coupling(window, op, figures)
        out.append(
            HostDevice(
                host=host,
                device=name,
                await_ms=stats.nan_median(figures["await_ms"]) if "await_ms" in figures else None,
                util_pct=_mean(figures, "util_pct"),
                r=r,
                n=n,
            )
        )
    return out


def storage_where(hosts: list[HostDevice]) -> str:
    """Where storage limited, said from the hosts' devices: every host's await rising
    together (a layer they share) or only some hosts' (their own LUNs or paths)."""
    if len(hosts) < 2:
        return ""
    each = ", ".join(
        f"{h.device} await {_ms(h.await_ms)}"
        + (f" r = {h.r:.2f}" if h.r is not None else " (no correlation)")
        for h in hosts
    )
    rising = [h for h in hosts if h.follows]
    if len(rising) == len(hosts):
        return f"every host's device await rising together with the latency ({each})"
    if rising:
        names = " and ".join(f"host {h.host}" for h in rising)
        return f"only {names}'s device await rising with the latency ({each})"
    return f"no single host's device await following the latency ({each})"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} ms"


def array_view(window: BundleSeries) -> str:
    """The array's busiest volume or LUN over the window and its IOPS, from the source that
    plays the array role (sampled once for the run), or ''."""
    source = collector_with_role(ROLE_ARRAY)
    entry = collector(source) if source else None
    if entry is None or not entry.ios_figure:
        return ""
    best: tuple[float, str] | None = None
    for entity, cols in role_entities(window, ROLE_ARRAY).items():
        iops = cols.get(entry.ios_figure)
        if iops is None or not np.any(np.isfinite(iops)):
            continue
        mean = float(np.nanmean(iops))
        if best is None or mean > best[0]:
            best = (mean, entity)
    if best is None:
        return ""
    return f"the array's {best[1]} at {best[0]:,.0f} IOPS (mean, the array's own counters)"


def client_findings(
    window: BundleSeries, host: Mapping[str, FloatArray] | None, sessions: float | None
) -> dict[str, Any]:
    """The verdict's client figures (:class:`~sim.analysis.verdict.Findings` fields): on
    several hosts those of the host closest to its CPU ceiling, named; on one host its own,
    with its cgroup's CPU quota as the ceiling when it has one."""
    limiting = limiting_client(host_clients(window))
    if limiting is not None:
        return {
            "process_cpu_pct": limiting.process_cpu_pct,
            "host_busy_pct": limiting.busy_pct,
            "cpu_share_pct": limiting.cpu_share_pct,
            "cpu_ceiling_pct": limiting.ceiling_pct,
            "throttled_pct": limiting.throttled_pct,
            "client_host": limiting.host,
            "client_said": limiting.said(),
        }
    cols = host or {}
    process = _mean(cols, "process_cpu_pct")
    limit = _mean(cols, "cpu_limit_cores")
    return {
        "process_cpu_pct": process,
        "host_busy_pct": _mean(cols, "cpu_busy_pct"),
        "cpu_share_pct": process / sessions if process is not None and sessions else None,
        "cpu_ceiling_pct": None if limit is None else 100.0 * min(1.0, limit),
        "throttled_pct": _mean(cols, "cpu_throttled_pct"),
    }


def storage_findings(
    window: BundleSeries, op: str | None, devices: Mapping[str, dict[str, FloatArray]]
) -> dict[str, Any]:
    """Where storage limited (the hosts' devices) and the array's view, as Findings fields."""
    return {
        "storage_where": storage_where(host_devices(window, op, devices)),
        "array_view": array_view(window),
    }


def _workers_by_host(summary: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    distributed = summary.get("distributed")
    workers = distributed.get("workers") if isinstance(distributed, dict) else None
    out: dict[str, list[dict[str, Any]]] = {}
    for worker in workers if isinstance(workers, list) else []:
        if isinstance(worker, dict) and worker.get("host"):
            out.setdefault(str(worker["host"]), []).append(worker)
    return out


def _operations(workers: list[dict[str, Any]]) -> tuple[int, int, float]:
    """Operations counted and failed by a host's workers, and their longest measured time."""
    count = errors = 0
    seconds = 0.0
    for worker in workers:
        for figures in (worker.get("operations") or {}).values():
            count += int(figures.get("count") or 0)
            errors += int(figures.get("errors") or 0)
        seconds = max(seconds, float(worker.get("measured_s") or 0.0))
    return count, errors, seconds


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def hosts_section(
    series: BundleSeries, op: str | None, devices: Mapping[str, dict[str, FloatArray]]
) -> dict[str, Any] | None:
    """``analysis.json``'s ``hosts``, for a run on two or more hosts (else None): per host its
    workers' operations (their own engines' counts, merged exactly), its busiest device over
    the measured window, its CPU against its ceiling and its clock offset; the host whose
    client figures the verdict used (``limiting``)."""
    clients = {c.host: c for c in host_clients(series)}
    if not clients and len(worker_hosts(series.summary)) < 2:
        return None
    disks = {d.host: d for d in host_devices(series, op, devices)}
    limiting = limiting_client(list(clients.values()))
    rows = []
    for host, workers in sorted(_workers_by_host(series.summary).items()):
        count, errors, seconds = _operations(workers)
        client, disk = clients.get(host), disks.get(host)
        device = devices.get(disk.device) if disk else None
        offsets = [(w.get("clock") or {}).get("offset_s") for w in workers]
        rows.append(
            {
                "host": host,
                "workers": len(workers),
                "sessions": sum(int(w.get("sessions") or 0) for w in workers),
                "status": ", ".join(sorted({str(w.get("status") or "") for w in workers})),
                "operations": count,
                "errors": errors,
                "ops_s": _rounded(count / seconds if seconds else None),
                "device": disk.device if disk else None,
                "device_iops": _rounded(_mean(device, "iops")) if device else None,
                "await_ms": _rounded(disk.await_ms) if disk else None,
                "util_pct": _rounded(disk.util_pct) if disk else None,
                "latency_r": _rounded(disk.r) if disk else None,
                "process_cpu_pct": _rounded(client.process_cpu_pct) if client else None,
                "cpu_limit_cores": _rounded(client.limit_cores) if client else None,
                "cpu_of_ceiling_pct": _rounded(client.used_pct) if client else None,
                "cpu_throttled_pct": _rounded(client.throttled_pct) if client else None,
                "cpu_busy_pct": _rounded(client.busy_pct) if client else None,
                "clock_offset_s": next((o for o in offsets if isinstance(o, (int, float))), None),
            }
        )
    return {
        "rows": rows,
        "limiting": limiting.host if limiting else None,
    }


def cpu_series(series: BundleSeries) -> dict[str, dict[str, list[float | None]]]:
    """Each worker host's CPU per interval (busy %, dbsim's process), for a run on two or
    more hosts (else none): ``analysis.json``'s ``series.hosts``."""
    hosts = worker_hosts(series.summary)
    if len(hosts) < 2:
        return {}
    entities = role_entities(series, ROLE_HOST_CPU)
    return {
        host: {
            key: sections.as_list(cols[key])
            for key in ("cpu_busy_pct", "process_cpu_pct", "cpu_limit_cores")
            if key in cols
        }
        for host, cols in sorted(entities.items())
        if host in hosts
    }
