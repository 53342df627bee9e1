"""The answer (sim.report.answer) and the verdict's evidence as report markup.

The answer block is the report's first screen: the SLO table, the sentence, the caveats. The
evidence table follows in the Verdict section: each row says which branch of the verdict it
fed (storage-, client-, database-bound) and the gate it answers there, and whether it drove
the call that was made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.report.answer import Answer
from sim.report.markup import Safe, esc, plain, table

#: Calls the evidence can drive; the others ("invalid", "not-exercised") withhold the call.
STORAGE_CALLS = frozenset({"storage-bound", "client-bound", "database-bound"})

ANSWER_CSS = """
.answer { margin: 10px 0 12px; padding: 10px 14px; border: 1px solid var(--line);
  border-left: 6px solid #1b7f4b; background: #f3faf6; border-radius: 4px; }
.answer.ans-missed { border-left-color: #b3261e; background: #fdf1f0; }
.answer.ans-caveated { border-left-color: #b26b00; background: #fff7e6; }
.answer.ans-none, .answer.ans-not-judged { border-left-color: #8a94a0; background: var(--soft); }
.answer h2 { margin: 0 0 6px; border: 0; padding: 0; font-size: 18px; color: var(--ink); }
.answer .sentence { font-size: 15px; font-weight: 600; margin: 6px 0; }
.answer table { margin: 2px 0 6px; background: #fff; }
.answer ul { margin: 4px 0 0 18px; padding: 0; } .answer li { margin: 2px 0; }
.missed-word { color: #b3261e; font-weight: bold; } .met-word { color: #1b7f4b; font-weight: bold; }
"""


def answer_block(answer: Answer) -> Safe:
    """The first screen's answer: SLO table, the sentence, the caveats."""
    state = answer.slo_state.replace(" ", "-")
    cls = "missed" if state == "missed" else state
    if cls == "met" and answer.caveats:
        cls = "caveated"
    parts = [f"<h2>{esc(answer.headline)}</h2>"]
    if answer.slos:
        rows = [
            [
                row.label + (f" [{row.name}]" if row.name else ""),
                row.measured,
                row.target,
                row.margin,
                Safe('<span class="met-word">met</span>')
                if row.met
                else Safe('<span class="missed-word">missed</span>'),
                row.note,
            ]
            for row in answer.slos
        ]
        headers: tuple[str, ...] = ("SLO", "measured", "target", "margin", "result", "note")
        if not any(row.note for row in answer.slos):  # no empty column
            headers, rows = headers[:-1], [r[:-1] for r in rows]
        parts.append(table(headers, rows, left=(0, 4, 5)))
    parts.append(f'<p class="sentence">{esc(answer.sentence)}</p>')
    if answer.caveats:
        items = "".join(f"<li>{esc(c)}</li>" for c in answer.caveats)
        parts.append(f"<p><strong>Caveats:</strong></p><ul>{items}</ul>")
    return Safe(
        f'<style>{ANSWER_CSS}</style><section class="answer ans-{esc(cls)}" id="answer">'
        f"{''.join(parts)}</section>"
    )


def _threshold(entry: Mapping[str, Any]) -> str:
    threshold = entry.get("threshold")
    if threshold is None:
        return "-"
    return f"{entry.get('comparison') or '≥'} {plain(threshold)}"


def _role(entry: Mapping[str, Any], call: str) -> str:
    """What the row did for the call: "drove: storage-bound (storage saturated)", "against
    client-bound …", "reference"."""
    branch = str(entry.get("branch") or "reference")
    if branch == "reference":
        return "reference only (changes no call)"
    gate = f" ({entry['gate']})" if entry.get("gate") else ""
    if call not in STORAGE_CALLS:
        return f"{branch}{gate}: call withheld ({call})"
    if branch == call:
        return f"drove {branch}{gate}" if entry.get("passed") else f"{branch}{gate}: not met"
    return f"{branch}{gate}" + (": met, not decisive" if entry.get("passed") else ": not met")


def _marked(role: str) -> Safe | str:
    """The rows that made the call stand out."""
    return Safe(f"<strong>{esc(role)}</strong>") if role.startswith("drove") else role


def evidence_table(result: Mapping[str, Any]) -> Safe | None:
    """The checks behind the call, each with the branch it fed; None without rows."""
    call = str(result.get("call") or "inconclusive")
    rows = [
        [
            e.get("check"),
            plain(e.get("value")),
            _threshold(e),
            Safe('<span class="met">met</span>')
            if e.get("passed")
            else Safe('<span class="unmet">not met</span>'),
            _marked(_role(e, call)),
            e.get("meaning"),
        ]
        for e in result.get("evidence") or []
        if isinstance(e, Mapping)
    ]
    if not rows:
        return None
    return table(
        ("check", "value", "threshold", "condition", "branch of the verdict", "meaning"),
        rows,
        left=(0, 3, 4, 5),
        caption="Evidence: the checks behind the call, and the branch of the verdict each fed",
    )
