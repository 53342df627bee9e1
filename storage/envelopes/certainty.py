"""One certainty per sizing answer, never above its weakest input.

A verdict rests on its binding limit, and that limit on what the page prints. The answer's
``certainty`` is the weakest of:

* the binding figure's kind (:data:`storage.envelopes.model.Basis`): ``published`` (a stored
  point, or a rule the page states), ``derived`` (arithmetic on printed figures the page
  implies but does not print: Extreme's 128 MiBps per TiB), ``interpolated`` (the verdict holds
  across the rule's leave-one-out band), ``within_uncertainty`` (the demand lies inside that
  band), ``untested`` (no case on the page tests the rule), ``outside`` (no published point
  brackets it);
* ``estimate`` when the binding limit carries an estimate flag (a request size, mix or level
  the page does not state for that figure: database IOPS at any size, an 'up to' maximum, the
  random-to-sequential bridge, Premium read against the Extreme tables), or when the workload
  is read at a size that is itself an assumption (read and write sizes far apart, a
  ``--block-size`` that contradicts the numbers) and a table sets the binding figure.

:data:`CERTAINTIES` lists them strongest first. ``estimate`` ranks below
``within_uncertainty`` (a measured band against an unmeasured assumption) and above
``untested`` (an interpolation with no error at all, on top of whatever it assumes).

A verdict that rests on an ``estimate`` or an ``untested`` figure exits as any verdict does (0
fits, 1 does not fit) and says so in a ``caveat:`` line under it (JSON: ``certainty_caveat``):
docs/sizing.md, "Three kinds of number".
"""

from __future__ import annotations

from collections.abc import Iterable

from storage.envelopes.model import Flag, Limit

#: Strongest first; an answer's certainty is the weakest of its inputs.
CERTAINTIES = (
    "published",
    "derived",
    "interpolated",
    "within_uncertainty",
    "estimate",
    "untested",
    "outside",
)
#: Demand and limit equal within this relative difference are equal: the float arithmetic of
#: MiB/s and operations (2.284 + 764 MiB/s at 64 KiB, turned into operations and back) leaves a
#: few units in the 16th digit, and "at the published limit" must not read as over it.
AT_LIMIT_REL = 1e-9
#: What a verdict exactly at its limit says: "FITS, at the published limit" …
AT_LIMIT = {
    "published": "at the published limit",
    "derived": "at the derived limit",
    "interpolated": "at the interpolated limit",
    "within_uncertainty": "at the interpolated limit",
    "estimate": "at the limit",
    "untested": "at the interpolated limit",
    "outside": "at the held limit",
}


def weakest(found: Iterable[str]) -> str:
    """The weakest certainty of ``found`` (``published`` when empty)."""
    return max(found, key=CERTAINTIES.index, default="published")


def basis_certainty(limit: Limit, demand: float) -> str:
    """What the binding figure's kind alone allows (see the module docstring)."""
    if limit.basis != "interpolated":
        return limit.basis
    if limit.band is None or not limit.band.tested:
        return "untested"
    lowest = limit.band.lowest_ceiling(limit.value)
    highest = limit.band.highest_ceiling(limit.value)
    if lowest < demand <= highest:
        return "within_uncertainty"
    return "interpolated"


def certainty_of(limit: Limit, demand: float, reading: Iterable[Flag] = ()) -> str:
    """The answer's one certainty: the weakest of the binding figure's kind, its estimate
    flags, and the ``reading`` flags (how the workload was read) when a table sets it."""
    found = [basis_certainty(limit, demand)]
    if any(f.kind == "estimate" for f in limit.flags):
        found.append("estimate")
    if limit.scales_with == "none" and any(f.kind == "estimate" for f in reading):
        found.append("estimate")
    return weakest(found)


def verdict_suffix(certainty: str, extrapolated: bool) -> str:
    """What follows ``FITS`` / ``DOES NOT FIT`` for this certainty."""
    if certainty == "within_uncertainty":
        return ", within the interpolation's uncertainty"
    if certainty == "untested":
        return " (on an interpolation its page cannot test)"
    if certainty == "estimate":
        return " (on an estimate: see the caveat)"
    if extrapolated:
        return " (extrapolated: --allow-extrapolation)"
    return ""


def caveat(certainty: str, fits: bool | None) -> str | None:
    """The line a verdict on an estimate or an untested interpolation carries, or None."""
    if fits is None:
        return None
    code = "exit 0, as any fit" if fits else "exit 1, as any misfit"
    if certainty == "untested":
        return (
            "this verdict rests on an interpolation that no published point of the page can "
            f"test (its error is unknown), not on a published figure; {code} (JSON: "
            "certainty 'untested')"
        )
    if certainty == "estimate":
        return (
            "this verdict rests on an assumption the page does not state (the '! estimate' "
            f"flags), not on a published figure alone; {code} (JSON: certainty 'estimate')"
        )
    return None


__all__ = [
    "AT_LIMIT",
    "AT_LIMIT_REL",
    "CERTAINTIES",
    "basis_certainty",
    "caveat",
    "certainty_of",
    "verdict_suffix",
    "weakest",
]
