"""Whether a run's figures describe the storage or the run's own failures.

A run whose operations failed measured the errors, not the target: its latencies are those of
the few operations that got through (or of none), its device figures those of a workload that
was not applied. Its outcome says so before any figure (docs/bundle.md, "Failed and invalid"):

* an operation of the workload that was issued in the measured window and never succeeded
  makes the run **invalid** — whatever the budget;
* an error share above the budget (``load.max_error_pct``) for any operation makes it
  invalid too (the share of all operations together can only pass it when one does),
  unless the scenario judges the error share with an SLO (``error_pct_max``): then the SLO's
  verdict decides (exit 1 when missed);
* a completed run in which no operation completed or failed in the measured window (none
  issued, or every one still waiting at the end: a lock held throughout) is invalid.

An invalid run that completed ends ``failed`` (exit 3) with one ``error:`` line naming, per
operation, the dominant error class and one example message. The summary's ``errors`` section
holds the counts behind it (built here for single-process runs and for merged distributed ones).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from sim.core.metrics import OpStats


def error_section(
    totals: Mapping[str, OpStats],
    examples: Mapping[str, Mapping[str, str]],
    *,
    judged_ops: Collection[str],
    budget_pct: float,
    budget_by_slo: bool,
) -> dict[str, Any]:
    """The measured window's errors: per operation what was issued, what completed, what failed
    by class (with the dominant class and its example), the shares against the budget, and
    whether the run is ``invalid`` (with the one-line ``reason``).

    ``judged_ops``: the workload's operations; other names in ``totals`` (``connect``: failed
    reconnection attempts during an outage) are reported but judged by nobody, since their
    successes are not counted. ``budget_by_slo``: an SLO judges the share, so a share over the
    budget is noted but does not make the run invalid.
    """
    by_op = {
        name: _op_errors(stats, examples.get(name, {}), judged=name in judged_ops)
        for name, stats in sorted(totals.items())
        if stats.count + stats.error_count
    }
    issued_all = sum(e["issued"] for e in by_op.values() if e["judged"])
    errors_all = sum(e["errors"] for e in by_op.values() if e["judged"])
    never = [n for n, e in by_op.items() if e["judged"] and e["completed"] == 0]
    over = [
        n for n, e in by_op.items() if e["judged"] and e["errors"] and e["error_pct"] > budget_pct
    ]
    share = _pct(errors_all, issued_all) if issued_all else 0.0
    problems = [_failed_phrase(n, by_op[n]) for n in never]
    problems += [_share_phrase(n, by_op[n], budget_pct) for n in over if n not in never]
    if not issued_all:
        # Issued and still in flight at the end (a lock held all along) counts nowhere.
        problems.append("no operation completed or failed in the measured window")
    invalid = bool(never) or not issued_all or (bool(problems) and not budget_by_slo)
    section: dict[str, Any] = {
        "issued": issued_all,
        "errors": errors_all,
        "error_pct": share,
        "budget_pct": budget_pct,
        "budget_from": "slos (error_pct_max)" if budget_by_slo else "load.max_error_pct",
        # The share of all operations is a weighted mean of the operations' shares, so it is
        # over the budget only when one of them is.
        "over_budget": bool(over),
        "operations": by_op,
        "invalid": invalid,
    }
    if invalid:
        section["reason"] = "; ".join(problems)
    return section


def _op_errors(stats: OpStats, examples: Mapping[str, str], *, judged: bool) -> dict[str, Any]:
    """One operation's measured errors: issued, completed, failed by class (the dominant
    class first, with its example), and whether the run's validity counts it."""
    errors = stats.error_count
    issued = stats.count + errors
    entry: dict[str, Any] = {
        "issued": issued,
        "completed": stats.count,
        "errors": errors,
        "error_pct": _pct(errors, issued),
        "classes": dict(sorted(stats.errors.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
    if errors:
        dominant = next(iter(entry["classes"]))
        entry["dominant"] = dominant
        entry["example"] = examples.get(dominant, "")
    entry["judged"] = judged
    return entry


def failure_line(section: Mapping[str, Any]) -> str | None:
    """The ``error:`` line of an invalid run (None for a valid one)."""
    if not section.get("invalid"):
        return None
    return f"invalid run: {section.get('reason', 'its operations failed')}"


def verdict_sentence(section: Mapping[str, Any]) -> str:
    """What the verdict says of an invalid run, in place of a storage call."""
    return f"invalid: {section.get('reason', 'its operations failed')}"


def _failed_phrase(name: str, entry: Mapping[str, Any]) -> str:
    return f"100 % of {name} failed ({entry['errors']:,} of {entry['issued']:,}; {_example(entry)})"


def _share_phrase(name: str, entry: Mapping[str, Any], budget_pct: float) -> str:
    return (
        f"{entry['error_pct']:g} % of {name} failed ({entry['errors']:,} of {entry['issued']:,}, "
        f"budget {budget_pct:g} %; {_example(entry)})"
    )


def _example(entry: Mapping[str, Any]) -> str:
    dominant = entry.get("dominant", "")
    example = entry.get("example") or ""
    if not example:
        return str(dominant)
    # Drivers' messages often start with their class already (asyncpg: "UndefinedTableError:
    # relation … does not exist" inside the target's "postgres: prepare read: …").
    return example if dominant in example else f"{dominant}: {example}"


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 3) if whole else 0.0
