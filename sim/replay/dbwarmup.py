"""The warm-up of every run of a replay on a database (sim.replay.dbjob, docs/capture.md,
"Replaying on a database").

**The write path's delay.** A database writes its dirtied blocks into the page cache (when it
evicts them, or at a checkpoint) and the kernel writes them to the device once they have been
dirty ``vm.dirty_expire_centisecs`` (30 s by default), at its flusher's next wake-up
(``vm.dirty_writeback_centisecs``). Measured on the lab (pgbench -N at 41 tps on a
tablespace, docs/capture.md): no device write for the first 26 s, then a steady 64 writes/s
that went on 30 s after pgbench stopped. A run's device writes over its first half-minute
are therefore the writes of what ran before it, not its own: when the capture wrote, every
run of the replay warms up for the host's write-back delay (:func:`writeback_delay_s`, read
from /proc/sys/vm) before its measured stage, so the measured writes are the run's own
updates in their steady state, and the calibration's writes per update are measured there.

**Windows shorter than that delay.** The same path makes a database's few writes a second
arrive in the write-back's and the checkpoints' cycles, so a window shorter than the delay
holds a sample of those cycles, not their rate: a read production with 2 % row updates
(pgbench, bench/replay_db.py --mix) captured over 12 s and replayed in 8 s runs calibrated
0.16 device writes a row update where its 1x run wrote 1.0, and 1x wrote +415 % of the
captured writes; captured over 60 s and replayed in 30 s runs, the writes a row update measured
0.84-1.38 run to run and the scales' writes came within -22 % to +38 % (docs/capture.md). A
replay says so before its scales (:func:`short_windows`), never silently.
"""

from __future__ import annotations

from sim.replay.shape import Shape

#: A run's warm-up when the capture made no writes to reproduce (the closed loop settles).
SHORT_WARMUP_S = 2.0
#: The flusher's wake-up and the expiry are the kernel's (centiseconds under /proc/sys/vm);
#: their defaults when the files cannot be read.
VM = "/proc/sys/vm"
DEFAULT_EXPIRE_S, DEFAULT_WRITEBACK_S = 30.0, 5.0
#: The warm-up is the write-back delay plus this margin (the run's own interval edges), and
#: at most MAX_WARMUP_S (a host set to hold dirty pages for minutes is said, not waited for).
WARMUP_MARGIN_S = 3.0
MAX_WARMUP_S = 90.0
#: A capture whose writes are below this share of its I/O made none a replay reproduces: its
#: writes are the file system's own (fidelity's STRAY_SHARE, the same rule).
WRITE_SHARE_MIN = 0.01


def writeback_delay_s(vm: str = VM) -> tuple[float, str]:
    """Seconds from a page written into the page cache to the device, at most (the expiry and
    one flusher period), and where the figures came from."""
    got = []
    for name, default in (
        ("dirty_expire_centisecs", DEFAULT_EXPIRE_S),
        ("dirty_writeback_centisecs", DEFAULT_WRITEBACK_S),
    ):
        try:
            with open(f"{vm}/{name}", encoding="ascii") as fh:
                got.append((int(fh.read().strip()) / 100.0, f"{vm}/{name}"))
        except (OSError, ValueError):
            got.append((default, f"{name} unreadable: the kernel's default {default:g} s"))
    (expire, a), (wake, b) = got
    return expire + wake, f"{expire:g} s expiry + {wake:g} s flusher period ({a}, {b})"


def warmup_for(capture: Shape) -> tuple[float, str]:
    """The warm-up each run of the replay needs: the write-back delay when the capture wrote."""
    if capture.iops <= 0 or capture.write_iops < WRITE_SHARE_MIN * capture.iops:
        return SHORT_WARMUP_S, "the capture made no writes to reproduce: the closed loop settles"
    delay, how = writeback_delay_s()
    warmup = min(delay + WARMUP_MARGIN_S, MAX_WARMUP_S)
    return warmup, (
        f"the host's write-back delay ({how}) + {WARMUP_MARGIN_S:g} s, at most "
        f"{MAX_WARMUP_S:g} s: the measured writes are the run's own, written back"
    )


def short_windows(capture: Shape, duration_s: float, vm: str = VM) -> list[str]:
    """Caveats, before any scale, when the capture wrote and its window, or each run's
    measured stage (``--duration``), is shorter than the host's write-back delay (module
    docstring); none otherwise."""
    if capture.iops <= 0 or capture.write_iops < WRITE_SHARE_MIN * capture.iops:
        return []
    delay, how = writeback_delay_s(vm)
    out = []
    if capture.window.seconds < delay:
        out.append(
            f"the capture's window ({capture.window.seconds:.3g} s) is shorter than this "
            f"host's write-back delay ({delay:g} s: {how}): a database's writes reach the "
            "device in the write-back's and the checkpoints' cycles, so its "
            f"{capture.write_iops:.3g} writes/s are a sample of those cycles, not their rate "
            "(capture a minute or more)"
        )
    if duration_s < delay:
        out.append(
            f"--duration {duration_s:g} s is shorter than this host's write-back delay "
            f"({delay:g} s): each run's measured writes, the calibration's writes an update "
            "among them, are a sample of the write-back's cycles (replay 30 s or more)"
        )
    return out
