"""Was the replay faithful? The replay's own capture against the production's capture × scale.

The tolerances (docs/capture.md, "Fidelity"), over the measured window:

- device read IOPS and write IOPS within ±5 % of the capture's times the scale;
- read share within 2 points of the capture's;
- mean read and write request sizes within 10 % of the capture's.

**A rate whose count is small.** A rate is a count over a window, and a count of ``n`` events
that arrive at random (Poisson) is itself uncertain by about ``1.96 / sqrt(n)`` (95 %): 0.55
writes/s over 20 s is 11 writes, ±59 %. Two such counts are compared, the capture's (its rate
× its window) and the replay's (the asked rate × the replay's window: the count the replay
should have seen, so a replay that delivered none is still judged), so a rate is judged at the
larger of its documented tolerance and ``1.96 × sqrt(1/n_capture + 1/n_asked)``
(:func:`poisson_tolerance`), and the check says so (``note``). When that interval is
:data:`NOT_JUDGED_HALF_WIDTH` (±100 %) or wider, no count could show a departure (even none
delivered lies inside it): the figure is **not judged**, its check says "not judged: N writes in
the window", and the console shows it; it is never a silent pass. The mean size of that
direction's requests is then not judged either (the mean of a handful).

Each judged check carries its **band** (:attr:`Check.band`): the lowest and the highest
delivered value it passes at, absolute, set here as it is judged (``ok`` is whether the
delivered value lies inside it); ``dbsim compare`` draws and prints that band, never its own.

A figure outside its tolerance makes the replay **unfaithful**, with its cause named from
what fio itself reported: fio completed less than asked by more than half the IOPS tolerance
(the target is too slow to deliver the asked IOPS at the production's concurrency), or fio issued what was asked and the device saw
something else (other I/O on the device; requests merged or split below fio).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sim.replay.shape import Shape

IOPS_TOL = 0.05
READ_SHARE_POINTS = 2.0
SIZE_TOL = 0.10
#: A direction the capture did not have may appear in the replay at this share of the asked
#: IOPS (a file system's own metadata writes) without being unfaithful.
STRAY_SHARE = 0.01
#: fio completing less than the asked rate by this much (over its own run, which the judged
#: window lies inside) is fio falling behind: the target too slow at that concurrency.
FIO_SHORT = IOPS_TOL / 2
#: The two-sided 95 % normal quantile: a Poisson count n's relative half-width is Z95/sqrt(n).
Z95 = 1.96
#: A rate whose counts' 95 % interval is this wide (relative) cannot be judged at all.
NOT_JUDGED_HALF_WIDTH = 1.0
NOT_JUDGED = "not judged"


@dataclass(frozen=True)
class Check:
    figure: str
    unit: str
    expected: float | None
    delivered: float | None
    tolerance: str
    ok: bool
    off: str  # "+3.1 %", "-0.4 points"
    note: str = ""  # how a small count widened the tolerance, or why it was not judged
    #: The band the delivered value was judged against: the lowest and the highest value it
    #: passes at (absolute, both included; ``ok`` is whether it lies inside); None when the
    #: figure was not judged. The one definition behind the verdict and the band that
    #: ``dbsim compare`` draws and prints (:mod:`sim.replay.against_figures`).
    band: tuple[float, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["band"] = None if self.band is None else list(self.band)
        return out


def inside(value: float, band: tuple[float, float]) -> bool:
    """Whether ``value`` passes at ``band`` (both ends included): every check's judgement."""
    return band[0] <= value <= band[1]


def relative(
    figure: str, unit: str, expected: float | None, got: float | None, tol: float
) -> Check:
    """``got`` judged within ±``tol`` (relative) of ``expected``: the band
    ``expected × (1 ± tol)``; not judged without both figures or when nothing was expected."""
    text = f"±{100 * tol:g} %"
    if expected is None or got is None or expected == 0:
        return Check(figure, unit, expected, got, text, True, "not judged")
    off = (got - expected) / expected
    band = (expected * (1 - tol), expected * (1 + tol))
    return Check(figure, unit, expected, got, text, inside(got, band), f"{100 * off:+.1f} %",
                 band=band)  # fmt: skip


def points(figure: str, expected: float | None, got: float | None, pts: float) -> Check:
    """A share (%) judged within ±``pts`` points of ``expected``: the band ``expected ± pts``
    (a share a side does not have, no calls at all, is taken as 0)."""
    want, have = expected or 0.0, got or 0.0
    band = (want - pts, want + pts)
    return Check(figure, "%", expected, got, f"±{pts:g} points", inside(have, band),
                 f"{have - want:+.2f} pt", band=band)  # fmt: skip


def poisson_tolerance(n_capture: float, n_asked: float) -> float | None:
    """The relative 95 % half-width of the ratio of two Poisson counts (the capture's and the
    replay's asked), ``1.96 × sqrt(1/n_capture + 1/n_asked)``; None when a count is zero."""
    if n_capture <= 0 or n_asked <= 0:
        return None
    return float(Z95 * (1.0 / n_capture + 1.0 / n_asked) ** 0.5)


def _rate(
    figure: str, noun: str, capture: Shape, replay: Shape, rates: tuple[float, float, float]
) -> Check:
    """A rate judged at the larger of :data:`IOPS_TOL` and its counts' Poisson interval
    (module docstring); ``rates`` = (captured, asked = captured × scale, delivered)."""
    captured, want, got = rates
    n_capture = captured * capture.window.seconds
    n_asked = want * replay.window.seconds
    poisson = poisson_tolerance(n_capture, n_asked)
    counts = (
        f"{n_capture:.0f} {noun} in the capture's {capture.window.seconds:.3g} s window, "
        f"{n_asked:.0f} asked in the replay's {replay.window.seconds:.3g} s"
    )
    if poisson is None or poisson >= NOT_JUDGED_HALF_WIDTH:
        width = "" if poisson is None else f", Poisson's 95 % interval ±{100 * poisson:.0f} %"
        off = f"{100 * (got - want) / want:+.1f} %" if want > 0 else "-"
        return Check(
            figure, "1/s", want, got, NOT_JUDGED, True, off,
            f"{figure} not judged: {n_capture:.0f} {noun} in the window (the capture's "
            f"{capture.window.seconds:.3g} s; {n_asked:.0f} asked in the replay's "
            f"{replay.window.seconds:.3g} s{width}): too few for any tolerance",
        )  # fmt: skip
    check = relative(figure, "1/s", want, got, max(IOPS_TOL, poisson))
    if poisson <= IOPS_TOL:
        return check
    pct = f"{100 * poisson:.0f}" if poisson >= 0.1 else f"{100 * poisson:.1f}"
    tol = f"±{pct} % Poisson"
    note = (
        f"{figure} judged at ±{pct} %, not ±{100 * IOPS_TOL:g} %: {counts}, "
        f"Poisson's 95 % interval 1.96 x sqrt(1/{n_capture:.0f} + 1/{n_asked:.0f})"
    )
    return replace(check, tolerance=tol, note=note)  # its band is the widened one


def _stray(figure: str, total: float, got: float) -> Check:
    band = (0.0, STRAY_SHARE * total)
    tol = f"≤ {100 * STRAY_SHARE:g} % of asked"
    return Check(figure, "1/s", 0.0, got, tol, inside(got, band), f"+{got:.3g}/s", band=band)


def checks(capture: Shape, replay: Shape, scale: float) -> list[Check]:
    out = []
    asked = capture.iops * scale
    for figure, noun, captured, got in (
        ("read IOPS", "reads", capture.read_iops, replay.read_iops),
        ("write IOPS", "writes", capture.write_iops, replay.write_iops),
    ):
        want = captured * scale
        if want == 0:
            out.append(_stray(figure, asked, got))
        else:
            out.append(_rate(figure, noun, capture, replay, (captured, want, got)))
    want_pct, got_pct = capture.read_pct, replay.read_pct
    if want_pct is not None and got_pct is not None:
        out.append(points("read share", want_pct, got_pct, READ_SHARE_POINTS))
    rates = {c.figure: c for c in out}
    for figure, rate, noun, want_kib, got_kib in (
        ("read size", "read IOPS", "reads", capture.read_kib, replay.read_kib),
        ("write size", "write IOPS", "writes", capture.write_kib, replay.write_kib),
    ):
        size = relative(figure, "KiB", want_kib, got_kib, SIZE_TOL)
        if rates[rate].tolerance == NOT_JUDGED:
            # The mean of a handful of requests is as uncertain as their count: 4 writes of
            # the file system's own averaged 24 KiB in one capture, 6 of the replay's 6.7.
            size = Check(
                figure, "KiB", want_kib, got_kib, NOT_JUDGED, True, size.off,
                f"{figure} not judged: the mean of too few {noun} (as the {rate})",
            )  # fmt: skip
        out.append(size)
    return out


def cause(failed: list[Check], fio_iops: dict[str, float], asked: dict[str, float]) -> str:
    """Why the replay departed, from the first figure that did and fio's own report
    (``fio_iops``: what fio completed per direction; ``asked``: what the job asked)."""
    first = failed[0]
    short = {
        d: (asked[d], fio_iops.get(d, 0.0))
        for d in asked
        if asked[d] > 0 and fio_iops.get(d, 0.0) < (1 - FIO_SHORT) * asked[d]
    }
    if short:
        said = "; ".join(
            f"{d}s asked {a:,.0f}/s, fio completed {g:,.0f}/s" for d, (a, g) in short.items()
        )
        return f"target too slow to deliver the asked IOPS ({said}, measured by fio)"
    if first.figure.endswith("IOPS") and first.delivered is not None and first.expected is not None:
        if first.delivered > first.expected:
            return (
                f"the device saw more {first.figure} than fio issued: other I/O on the "
                "target's device, or requests split below fio"
            )
        return (
            f"fio issued the asked IOPS but the device saw fewer {first.figure}: requests "
            "merged below fio"
        )
    if first.figure == "read share":
        return (
            "the workload cannot reach the read share: the device saw another mix than fio issued"
        )
    return (
        f"the device's {first.figure} is not fio's: requests merged or split below fio "
        f"({first.off})"
    )


def judge(
    capture: Shape,
    replay: Shape,
    scale: float,
    fio_iops: dict[str, float],
    asked: dict[str, float],
) -> dict[str, Any]:
    """The fidelity section of one scale: every check, faithful or not, and the cause
    (``fio_iops``: what fio completed per direction; ``asked``: what its job asked)."""
    found = checks(capture, replay, scale)
    failed = [c for c in found if not c.ok]
    spread = _spread(capture, replay, scale)
    return {
        "faithful": not failed,
        "checks": [c.as_dict() for c in found],
        "failed": [c.figure for c in failed],
        "cause": cause(failed, fio_iops, asked) if failed else None,
        "per_interval": spread,
    }


def _spread(capture: Shape, replay: Shape, scale: float) -> dict[str, Any]:
    """Each interval's delivered IOPS as a share of the asked: the lowest and the highest."""
    asked = capture.iops * scale
    ratios = [v / asked for v in replay.iops_per_interval] if asked > 0 else []
    return {
        "intervals": len(ratios),
        "lowest_pct": 100 * min(ratios) if ratios else None,
        "highest_pct": 100 * max(ratios) if ratios else None,
    }
