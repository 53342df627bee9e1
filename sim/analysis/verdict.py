"""The verdict: what limited the run — storage, the client, the database — or "cannot tell".

The call is made from :class:`Findings` (window figures computed by
:mod:`sim.analysis.analyze`) by :func:`decide`, in this order:

``storage-bound``
    The operations reach storage (device I/Os per operation ≥ :data:`REACH_IOS_PER_OP`, or
    database block reads per operation ≥ the same), the device is saturated (%util ≥
    :data:`UTIL_BUSY_PCT`, or an IOPS plateau: across steps the IOPS rose by no more than
    :data:`PLATEAU_TOLERANCE` while the load rose (or stayed, and the storage's ceiling came
    down) and p99 rose by ≥ :data:`PLATEAU_MIN_RISE`;
    in a run without steps the IOPS varied by ≤ :data:`PLATEAU_CV` while the sessions were
    inside operations ≥ :data:`SESSIONS_BUSY_RATIO` of the time), and application latency
    moves with storage (the best of Pearson and Spearman, p99 or p50 of the primary operation
    against the device's await or aqu-sz, ≥ :data:`COUPLING_MIN_R` over ≥
    :data:`COUPLING_MIN_POINTS` intervals — or the stepped plateau itself, where latency rose
    across the steps while IOPS did not). A plateau at low %util counts only when the sessions wait for the
    device — device reads plus flushes per operation ≥ :data:`REACH_IOS_PER_OP` — and the
    client is not out of CPU (it could be the client's ceiling, or a cached run's steady
    write-back). Never when storage is idle (below).
``client-bound``
    The load generator is out of CPU and storage is not saturated: dbsim's process used ≥
    :data:`CLIENT_PROCESS_PCT` % of one core (Python's GIL makes one core the ceiling), or the
    host was ≥ :data:`HOST_BUSY_PCT` % busy while dbsim's process spent ≥
    :data:`CLIENT_CPU_SHARE_PCT` % of each session's time on CPU.
``database-bound``
    Storage is idle — %util < :data:`UTIL_IDLE_PCT` and device I/Os per operation <
    :data:`IDLE_IOS_PER_OP`, or the database cache served ≥ :data:`CACHE_ALL_HIT_PCT` % of
    block requests — and the client is not out of CPU: the time goes to CPU, locks or commits
    inside the database.
``inconclusive``
    Anything else; the evidence list still says what was measured.

Tuning data — runs made for this on the development machine (2 vCPUs; its virtio disk
``vda`` and a PostgreSQL server shared with other people's concurrent work, which shows):

* SLOB-like SQLite reads (600 MB table, no updates) on a private :mod:`storage.lab` lab:
  ext4 on a loop device, 300 read-IOPS blk-throttle ceiling, 200 MB memory cgroup. Steps of
  1, 2, 4, 8 sessions × 8 s: step medians of 299.9–300.2 IOPS while p99 went 0.21 → 0.40 →
  0.85 → 1.50 s, 50 device reads per read, Little's L/sessions 0.94, dbsim 4 % of a core —
  and %util 0–5 %, r_await 0.04–0.8 ms, aqu-sz 0.01–0.24: blk-throttle holds the I/O above
  the device, where iostat does not see it, so the best latency-to-await correlation was
  0.16. Hence the plateau path beside %util, and the stepped plateau counting as coupling.
  Without steps (4 sessions, 20 s): IOPS varied by 1.3 % (coefficient of variation), L/sessions
  1.01, and p99 followed aqu-sz at r = 0.80 (0.85 and 0.69 in the halves). All storage-bound.
* The same ceiling on the shared ``vda`` (the lab notes' recipe by hand): steps again at
  304–305 IOPS, storage-bound; without steps a neighbour's reads took ``vda`` to 20–49 k IOPS
  for half the run (IOPS varying by 91 %, %util 48 %) and the call was inconclusive.
* The default SQLite quickstart (everything in the page cache, 10 % updates): %util 9–32 %,
  5–10 device I/Os per operation, mostly WAL write-back (reads plus flushes: 0.02–0.24 per
  operation, on a disk others were reading from too), IOPS varying by 46 % — no plateau, and
  that alone kept it from storage-bound; best coupling 0.54. Cached PostgreSQL
  runs reached 0.54–0.65: with a best-of-eight correlation on a shared disk, coupling alone
  separates nothing, and saturation plus I/O on the path are the real gates. Verdicts:
  client-bound or inconclusive, never storage-bound.
* dbsim's process CPU: 4–8 % of a core when storage-bound, 11–27 % against a cached
  PostgreSQL (whose backends kept the host 100 % busy: 1–7 % per session; the first half of one
  such run was called database-bound), 73–97 % per interval for a single cached SQLite session.
  The host was 90–100 % busy from other processes through most runs, the storage-bound ones
  included (95–99 % on the loop-device lab, dbsim at 4 %): hence
  :data:`CLIENT_CPU_SHARE_PCT`, so that a busy host alone does not make a run client-bound.
* Ground truth on PostgreSQL (tests/integration/test_ground_truth.py, docs/ground-truth.md):
  a 625 MiB SLOB table on the lab, 128 MiB memory group, shared_buffers 16 MB. Under a 500
  read-IOPS ceiling, steps of 1, 2, 4, 8, 16 sessions with think time ran at about 150, 300,
  500, 500, 500 read IOPS: storage-bound from step 3, knee 500–502. With 8 sessions
  throughout and the ceiling cut from 2000 to 500 IOPS, the steps were (2000 IOPS, p99
  0.33–0.50 s) and (500, 1.1–1.2 s): the IOPS *fell*, which the stepped plateau did not
  accept until :func:`~sim.analysis.stats.plateau_knee` honoured its "or below it", and step
  2 was inconclusive (%util 0–5 %, coupling within the step −0.36 to 0.12) in 3 runs of 3;
  storage-bound in 7 of 7 since. iostat's await did not carry the cut (0.06–0.11 → 0.10–0.20
  ms; r with p99 −0.13 to 0.74); the database's read wait per block did (3.5 → 13 ms,
  r = 0.91–0.95). A hot spot that fits in shared_buffers: 0 device reads, database-bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: %util at which a device counts as busy (iostat's usual "saturated" mark; on multi-queue
#: devices 100 % is not a hard ceiling, so this is a sign, not proof).
UTIL_BUSY_PCT = 80.0
#: %util below which a device counts as idle for the database-bound call.
UTIL_IDLE_PCT = 20.0
#: Correlation of application latency with storage latency that counts as "moves with it":
#: r = 0.5 explains a quarter of the variance. Throttled runs reached 0.58–0.85 (but 0.16
#: across the loop-device steps, where the stepped plateau carries the call), cached runs on
#: the shared disk 0.54–0.65 too: necessary, never sufficient — saturation and I/O on the
#: operations' path decide.
COUPLING_MIN_R = 0.5
#: Fewer intervals than this and a correlation is not trusted as evidence (with 4 points
#: r ≥ 0.5 happens by chance one time in four, and the verdict takes the best of eight).
COUPLING_MIN_POINTS = 5
#: Device (or database) I/Os per operation from which the operations reach storage: one
#: operation in five waiting for an I/O is enough for storage to shape the latency.
REACH_IOS_PER_OP = 0.2
#: Below this many device I/Os per operation storage is idle (one in twenty operations).
IDLE_IOS_PER_OP = 0.05
#: Database cache hit ratio at which reads never reach storage.
CACHE_ALL_HIT_PCT = 99.0
#: dbsim's process CPU (% of one core) at which the client is out of CPU: the sessions share
#: one interpreter lock, so one core is the ceiling whatever the host has — but not 100 %:
#: a single cached SQLite session, CPU-bound by construction, measured 73–97 % per interval
#: (mean 86–91 % over four runs), the hand-offs between the loop thread and its worker
#: leaving the core idle part of the time. 90 % would split those runs by chance.
CLIENT_PROCESS_PCT = 80.0
#: Share of its CFS periods in which a CPU quota (a container's limit) throttled dbsim's
#: cgroup, from which the client is out of CPU: the quota stopped it at least every other
#: period. A worker held to 0.1 core under a load needing more was throttled in 89-100 % of
#: periods per interval (tests/integration/test_netns_verdict.py), an unlimited one in none;
#: on a host short of CPU for other reasons the group may not even reach its quota, so the
#: process-CPU gate (80 % of the quota) alone can miss it.
CLIENT_THROTTLED_PCT = 50.0
#: Host CPU busy % at which the load generator's host is saturated.
HOST_BUSY_PCT = 90.0
#: With the host saturated, the client counts as out of CPU only if dbsim's sessions spent at
#: least this share of their time on CPU (process CPU / sessions): a session that computes
#: a quarter of the time waits about as long again for a CPU on a full host, while one that
#: computes 2 % of the time (the throttled runs) is barely slowed.
CLIENT_CPU_SHARE_PCT = 25.0
#: Relative IOPS change across steps still called a plateau (per-second IOPS under
#: blk-throttle wobbled by ±5 %, a neighbour's I/O adds more).
PLATEAU_TOLERANCE = 0.15
#: p99 rise across the plateau that shows the extra load only queued.
PLATEAU_MIN_RISE = 0.5
#: Coefficient of variation of IOPS below which a run without steps sits on a plateau.
PLATEAU_CV = 0.15
#: Little's-law ratio from which the sessions were waiting inside operations, not elsewhere.
SESSIONS_BUSY_RATIO = 0.8

CALLS = ("storage-bound", "client-bound", "database-bound", "inconclusive")


@dataclass
class Check:
    """One measured fact and the threshold it was held against."""

    check: str
    value: float | None
    threshold: float | None
    passed: bool
    meaning: str
    #: The branch of :func:`decide` this check feeds ("storage-bound", "client-bound",
    #: "database-bound") and the gate it answers there; "reference" rows change no call.
    branch: str = "reference"
    gate: str = ""
    #: How the value passes against the threshold ("<": storage idle, "≤": a plateau's spread).
    comparison: str = "≥"

    def as_dict(self) -> dict[str, Any]:
        finite = self.value is not None and math.isfinite(self.value)
        value = round(self.value, 4) if finite and self.value is not None else None
        return {
            "check": self.check,
            "value": value,
            "threshold": self.threshold,
            "passed": self.passed,
            "meaning": self.meaning,
            "branch": self.branch,
            "gate": self.gate,
            "comparison": self.comparison,
        }


@dataclass
class Findings:
    """The figures a verdict is made from, for one window (the run, a step, a half)."""

    op: str | None = None
    device: str | None = None
    p99_us: float | None = None
    iops: float | None = None
    util_pct: float | None = None
    #: The device's combined await (iostat's), median over the window: the latency it showed.
    await_ms: float | None = None
    ios_per_op: float | None = None
    #: Device reads plus flushes per operation: the I/O a session waits for (buffered writes
    #: are written back later, unless the device is busy enough to throttle the writers).
    sync_ios_per_op: float | None = None
    db_reads_per_op: float | None = None
    cache_hit_pct: float | None = None
    coupling_r: float | None = None
    coupling_what: str = ""
    coupling_n: int = 0
    #: Plateau evidence: (value, threshold, passed, meaning), or None when not assessable.
    plateau: tuple[float | None, float, bool, str] | None = None
    #: The plateau came from steps, where latency rose as the load rose: that is coupling too.
    stepped_plateau: bool = False
    host_busy_pct: float | None = None
    process_cpu_pct: float | None = None
    cpu_share_pct: float | None = None
    littles_ratio: float | None = None
    in_process_db: bool = False
    #: An open-loop run: Little's law says nothing about sessions waiting (not shown).
    open_loop: bool = False
    #: Other collectors' figures against latency: (title, best r, intervals, description).
    collector_coupling: list[tuple[str, float | None, int, str]] = field(default_factory=list)
    #: The most dbsim's process can use, in % of one core: 100, or its cgroup's CPU quota
    #: when lower (a container's limit). None: one core.
    cpu_ceiling_pct: float | None = None
    #: Share of the quota's CFS periods in which the client's cgroup was throttled.
    throttled_pct: float | None = None
    #: A run on several hosts (sim.analysis.hosts): the host whose client figures these are
    #: (the one closest to its CPU ceiling) and how its CPU is said; where storage limited
    #: (the hosts' device awaits) and the array's own view beside them.
    client_host: str | None = None
    client_said: str = ""
    storage_where: str = ""
    array_view: str = ""


def _ge(value: float | None, threshold: float) -> bool:
    return value is not None and value >= threshold


def _lt(value: float | None, threshold: float) -> bool:
    return value is not None and value < threshold


def _fmt_us(us: float | None) -> str:
    if us is None:
        return "n/a"
    if us >= 1_000_000:
        return f"{us / 1e6:.2f} s"
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def _num(value: float | None, digits: int = 0, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}{unit}"


@dataclass(frozen=True)
class Gates:
    """The verdict's yes/no questions, answered from one window's findings."""

    busy: bool
    plateau: bool
    reaches: bool
    correlated: bool
    coupled: bool
    all_hits: bool
    idle: bool
    process_full: bool
    host_full: bool
    client_full: bool
    waits_on_io: bool
    saturated: bool


def gates(f: Findings) -> Gates:
    busy = _ge(f.util_pct, UTIL_BUSY_PCT)
    plateau = f.plateau is not None and f.plateau[2]
    correlated = _ge(f.coupling_r, COUPLING_MIN_R) and f.coupling_n >= COUPLING_MIN_POINTS
    all_hits = _ge(f.cache_hit_pct, CACHE_ALL_HIT_PCT)
    ceiling = 100.0 if f.cpu_ceiling_pct is None else min(100.0, f.cpu_ceiling_pct)
    process_full = _ge(f.process_cpu_pct, CLIENT_PROCESS_PCT * ceiling / 100.0) or _ge(
        f.throttled_pct, CLIENT_THROTTLED_PCT
    )
    host_full = _ge(f.host_busy_pct, HOST_BUSY_PCT)
    client_full = process_full or (host_full and _ge(f.cpu_share_pct, CLIENT_CPU_SHARE_PCT))
    # A plateau at low %util is a ceiling only if the sessions wait for that device (reads,
    # flushes: the database's block reads do not count, the OS page cache may serve them) and
    # are not out of CPU themselves: a cached run's write-back can be steady too.
    waits_on_io = _ge(f.sync_ios_per_op, REACH_IOS_PER_OP)
    return Gates(
        busy=busy,
        plateau=plateau,
        reaches=_ge(f.ios_per_op, REACH_IOS_PER_OP) or _ge(f.db_reads_per_op, REACH_IOS_PER_OP),
        correlated=correlated,
        coupled=correlated or (plateau and f.stepped_plateau),
        all_hits=all_hits,
        idle=(_lt(f.util_pct, UTIL_IDLE_PCT) and _lt(f.ios_per_op, IDLE_IOS_PER_OP))
        or (all_hits and not busy),
        process_full=process_full,
        host_full=host_full,
        client_full=client_full,
        waits_on_io=waits_on_io,
        saturated=busy or (plateau and waits_on_io and not client_full),
    )


def evidence(f: Findings, g: Gates) -> list[Check]:
    """Every fact the call rests on, with its threshold and the branch of :func:`decide` it
    feeds; then, for reference, how latency followed the figures other collectors declare
    correlatable (they do not change the call). Checks that do not apply to the run are left
    out: the database's rows when no database statistics were collected (a file workload),
    Little's law for an open loop (arrivals do not wait for sessions)."""
    dev = f.device or "the device"
    sb, db = "storage-bound", "database-bound"
    checks = [
        Check("device %util", f.util_pct, UTIL_BUSY_PCT, g.busy,
              f"{dev} busy ≥ {UTIL_BUSY_PCT:.0f} % of the time (blk-throttle and QoS ceilings "
              "can saturate a device at low %util)", sb, "storage saturated"),
        Check("IOPS plateau", f.plateau[0] if f.plateau else None,
              f.plateau[1] if f.plateau else None, g.plateau,
              f.plateau[3] if f.plateau else "not assessable (no device, or too few intervals)",
              sb, "storage saturated", comparison="≤"),
        Check("latency follows storage", f.coupling_r, COUPLING_MIN_R, g.correlated,
              f"{f.coupling_what or 'no defined correlation'} over {f.coupling_n} intervals",
              sb, "latency moves with storage"),
        Check("device I/Os per operation", f.ios_per_op, REACH_IOS_PER_OP,
              _ge(f.ios_per_op, REACH_IOS_PER_OP),
              "operations reach the device (reads, writes and flushes of the whole device)",
              sb, "I/O on the operations' path"),
        Check("device reads+flushes per operation", f.sync_ios_per_op, REACH_IOS_PER_OP,
              g.waits_on_io, "I/O the sessions wait for (needed for a plateau at low %util)",
              sb, "storage saturated"),
    ]  # fmt: skip
    if f.db_reads_per_op is not None or f.cache_hit_pct is not None:
        checks += [
            Check("database block reads per operation", f.db_reads_per_op, REACH_IOS_PER_OP,
                  _ge(f.db_reads_per_op, REACH_IOS_PER_OP),
                  "blocks the database read from the OS (page cache or device) per operation",
                  sb, "I/O on the operations' path"),
            Check("database cache hit %", f.cache_hit_pct, CACHE_ALL_HIT_PCT, g.all_hits,
                  "share of block requests the database cache served", db, "storage idle"),
        ]  # fmt: skip
    checks.append(_idle_check(f, g))
    checks += _client_checks(f, g)
    if not f.open_loop:
        ratio = f.littles_ratio
        checks.append(
            Check("Little's law L / sessions", ratio, SESSIONS_BUSY_RATIO,
                  _ge(ratio, SESSIONS_BUSY_RATIO),
                  "share of session time spent inside timed operations", sb, "storage saturated")
        )  # fmt: skip
    for title, r, n, what in f.collector_coupling:
        follows = _ge(r, COUPLING_MIN_R) and n >= COUPLING_MIN_POINTS
        meaning = f"{what or 'no defined correlation'} over {n} intervals (for reference)"
        checks.append(Check(f"latency follows {title}", r, COUPLING_MIN_R, follows, meaning))
    return checks


def _client_checks(f: Findings, g: Gates) -> list[Check]:
    """The client-bound branch's checks: is the load generator out of CPU."""
    cb = "client-bound"
    ceiling = (
        f.cpu_ceiling_pct if f.cpu_ceiling_pct is not None and f.cpu_ceiling_pct < 100 else None
    )
    where = f"host {f.client_host}, the closest to its CPU ceiling: " if f.client_host else ""
    return [
        Check("dbsim process CPU % of one core", f.process_cpu_pct,
              CLIENT_PROCESS_PCT if ceiling is None else CLIENT_PROCESS_PCT * ceiling / 100,
              g.process_full, where + ("the client's interpreter lock makes one core its "
              "ceiling" if ceiling is None else f"its cgroup's CPU quota ({ceiling / 100:.2f} "
              f"core) is its ceiling, {CLIENT_PROCESS_PCT:.0f} % of it counts as out of CPU"),
              cb, "client out of CPU"),
        *([Check("CPU quota throttled % of periods", f.throttled_pct, CLIENT_THROTTLED_PCT,
                 _ge(f.throttled_pct, CLIENT_THROTTLED_PCT),
                 where + "its cgroup's CPU quota stopped dbsim's process in this share of its "
                 "periods", cb, "client out of CPU")] if f.throttled_pct is not None else []),
        Check("host CPU busy %", f.host_busy_pct, HOST_BUSY_PCT, g.host_full,
              where + "the load generator's host, all CPUs (other processes included)",
              cb, "client out of CPU"),
        Check("dbsim CPU % of session time", f.cpu_share_pct, CLIENT_CPU_SHARE_PCT,
              _ge(f.cpu_share_pct, CLIENT_CPU_SHARE_PCT),
              "process CPU per session: how much of their time the sessions computed",
              cb, "client out of CPU"),
    ]  # fmt: skip


def _idle_check(f: Findings, g: Gates) -> Check:
    """The "storage idle" check with the figure of the clause that decided it: a row reading "0.29
    (threshold 0.05) met" would be false when the database cache made storage idle."""
    by_io = _lt(f.util_pct, UTIL_IDLE_PCT) and _lt(f.ios_per_op, IDLE_IOS_PER_OP)
    if g.idle and not by_io:
        return Check(
            "storage idle", f.cache_hit_pct, CACHE_ALL_HIT_PCT, True,
            f"the database cache served ≥ {CACHE_ALL_HIT_PCT:.0f} % of block requests and "
            f"{f.device or 'the device'} was not busy (its {_num(f.ios_per_op, 2)} I/Os per "
            f"operation are above the {IDLE_IOS_PER_OP} mark)", "database-bound", "storage idle",
        )  # fmt: skip
    return Check(
        "storage idle", f.ios_per_op, IDLE_IOS_PER_OP, g.idle,
        f"< {IDLE_IOS_PER_OP} device I/Os per operation with %util < {UTIL_IDLE_PCT:.0f} "
        f"(%util {_num(f.util_pct)}), or the database cache served ≥ {CACHE_ALL_HIT_PCT:.0f} %",
        "database-bound", "storage idle", comparison="<",
    )  # fmt: skip


def decide(f: Findings) -> dict[str, Any]:
    """The verdict for one window: ``{"call", "summary", "evidence"}``."""
    g = gates(f)
    if g.reaches and g.saturated and g.coupled and not g.idle:
        call, summary = "storage-bound", _storage_bound(f, g)
    elif g.client_full and not g.saturated:
        call, summary = "client-bound", _client_bound(f, g)
    elif g.idle and not g.client_full:
        call, summary = "database-bound", _database_bound(f)
    else:
        reason = _inconclusive_reason(f, g.reaches, g.saturated, g.coupled, g.idle)
        call, summary = "inconclusive", f"Inconclusive: {reason}."
    return {"call": call, "summary": summary, "evidence": [c.as_dict() for c in evidence(f, g)]}


def _storage_bound(f: Findings, g: Gates) -> str:
    dev, op = f.device or "the device", f.op or "the workload"
    how = (
        f"was {f.util_pct:.0f} % busy"
        if g.busy and f.util_pct is not None
        else f"held a plateau of about {_num(f.iops)} IOPS"
    )
    why = (
        f"{f.coupling_what} r = {f.coupling_r:.2f}"
        if g.correlated and f.coupling_r is not None
        else "latency rose across the steps while IOPS did not"
    )
    per_op = f.ios_per_op if f.ios_per_op is not None else f.db_reads_per_op
    # The device's own latency, whatever figure correlated best: on a LUN whose array queues
    # (QoS, saturation) it is where the array's latency shows to the host.
    waited = f" with {_fmt_us(f.await_ms * 1000)} await" if f.await_ms is not None else ""
    beside = "; ".join(part for part in (f.array_view, f.storage_where) if part)
    return (
        f"Storage-bound: {op} latency (p99 {_fmt_us(f.p99_us)}) moved with {dev} "
        f"({why}) while {dev} {how}{waited}, at {_num(per_op, 1)} I/Os per operation"
        + (f": {beside}." if beside else ".")
    )


def _client_bound(f: Findings, g: Gates) -> str:
    dev, op = f.device or "the device", f.op or "the workload"
    inside = "; SQLite runs inside dbsim, so that includes the database" if f.in_process_db else ""
    who = "dbsim's process" if g.process_full else "the load generator's host"
    if f.client_host:
        return (
            f"Client-bound on host {f.client_host} ({f.client_said}): {who} there ran out of "
            f"CPU (host {_num(f.host_busy_pct)} % busy, dbsim's process "
            f"{_num(f.process_cpu_pct)} % of one core) while {dev} was not saturated, so {op} "
            f"latency (p99 {_fmt_us(f.p99_us)}) tells more about that host's CPU than about "
            "the storage."
        )
    return (
        f"Client-bound: {who} ran out of CPU (host {_num(f.host_busy_pct)} % busy, dbsim's "
        f"process {_num(f.process_cpu_pct)} % of one core{inside}) while {dev} was not "
        f"saturated, so {op} latency (p99 {_fmt_us(f.p99_us)}) tells more about CPU than "
        "about the storage."
    )


def _database_bound(f: Findings) -> str:
    dev, op = f.device or "the device", f.op or "the workload"
    hit = f", cache hit {f.cache_hit_pct:.1f} %" if f.cache_hit_pct is not None else ""
    return (
        f"Database-bound: storage was nearly idle ({dev} {_num(f.util_pct)} % busy, "
        f"{_num(f.ios_per_op, 2)} I/Os per operation{hit}) and dbsim was not short of CPU "
        f"({_client_cpu(f)}), so {op} latency (p99 {_fmt_us(f.p99_us)}) is spent in the "
        "database (CPU, locks, commits), not in storage."
    )


def _client_cpu(f: Findings) -> str:
    """The client's CPU as measured: dbsim's process, and the host when it was busy (a busy
    host is not the client's ceiling unless the sessions computed, see CLIENT_CPU_SHARE_PCT)."""
    said = f"dbsim's process {_num(f.process_cpu_pct)} % of one core"
    if f.cpu_share_pct is not None:
        said += f", {f.cpu_share_pct:.0f} % of session time"
    if f.host_busy_pct is not None:
        said += f"; host {f.host_busy_pct:.0f} % busy"
    return said


def _inconclusive_reason(
    f: Findings, reaches: bool, saturated: bool, coupled: bool, idle: bool
) -> str:
    dev = f.device or "no block device"
    if f.device is None and f.cache_hit_pct is None:
        return (
            "no storage figures were collected (no block device or database statistics), so "
            "storage cannot be judged"
        )
    parts = [
        f"{dev} was {_num(f.util_pct)} % busy at {_num(f.iops)} IOPS (mean)",
        f"{_num(f.ios_per_op, 2)} device I/Os per operation",
        f"latency-to-storage correlation {_num(f.coupling_r, 2)}",
    ]
    if f.host_busy_pct is not None:
        parts.append(
            f"host CPU {f.host_busy_pct:.0f} % busy, dbsim {_num(f.process_cpu_pct)} % of a core"
        )
    missing = [
        name
        for name, ok in (
            ("saturated storage", saturated),
            ("latency following storage", coupled),
            ("I/O on the operations' path", reaches),
        )
        if not ok
    ]
    lead = "no single bottleneck stands out"
    if reaches and not idle and missing:
        lead = f"storage is used but shows no {' or '.join(missing)}"
    return f"{lead} ({'; '.join(parts)})"
