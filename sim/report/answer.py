"""The answer of a run, said once and the same everywhere: report.html's first screen, the end
of ``dbsim run`` and ``dbsim report``, and ``dbsim report --format markdown|text|pdf``.

In this order, as a DBA pastes it into a change ticket:

1. **The SLOs**: per limit the measured value, the target, the margin, met or missed (a run
   that exits 1 says "missed" here, in words);
2. **one sentence** with the figures that decide: the primary operation's latency percentile
   at the delivered IOPS on the named device (:mod:`sim.bundle.iops`: the mean over the
   measured window, the block table's figure) and the limiting layer the verdict named;
3. **the caveats** that limit what the figures mean: storage not exercised, an invalid run, a
   run that did not complete, a mix or a load the run did not deliver, samples lost.

Built from summary.json and the analysis only (:func:`build_answer`); every renderer takes the
same :class:`Answer`, so the HTML, the console and the ticket text cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.bundle.figures import finite, primary_device
from sim.bundle.iops import IOPS_DEFINITION, run_iops, window_iops

#: A load step that delivered less than this share of the IOPS it asked for is a caveat.
DELIVERED_SHARE = 0.9

#: The verdict's call → the limiting layer, as the sentence says it.
LAYERS = {
    "storage-bound": "the limiting layer is the storage ({device})",
    "client-bound": "the limiting layer is the client (dbsim's CPU{host}), not the storage",
    "database-bound": "the limiting layer is the database (CPU, locks, commits): storage was "
    "nearly idle",
    "inconclusive": "no single limiting layer stands out (verdict inconclusive)",
    "not-exercised": "no layer is judged: the caches answered, not the storage",
    "invalid": "no layer is judged: the run's operations failed",
}


@dataclass(frozen=True)
class SloRow:
    """One SLO limit as the answer shows it."""

    label: str  # "read p99 ≤ 5.00 ms"
    measured: str  # "5.90 ms"
    target: str  # "≤ 5.00 ms"
    margin: str  # "+18.0 %", "missed by 18.0 %", "-"
    met: bool
    note: str = ""
    name: str = ""
    #: The console's line for it (sim.judge.slo.verdict_line, the wording scripts grep).
    line: str = ""


@dataclass(frozen=True)
class Answer:
    """What a run answers: SLOs, one sentence, caveats (see the module's docstring)."""

    #: "met", "missed", "not judged" or "none" (the scenario declared no SLO).
    slo_state: str
    slos: list[SloRow]
    sentence: str
    caveats: list[str] = field(default_factory=list)
    call: str | None = None
    op: str | None = None
    device: str | None = None
    #: The device's IOPS quoted by the sentence (the block table's mean), unrounded.
    iops: float | None = None
    #: Where the SLOs were judged when not on the whole measured window (a sweep's step).
    slo_window: str = ""

    @property
    def headline(self) -> str:
        """The SLO verdict in words: "SLOs met (3 of 3)", "SLO MISSED (1 of 3) — exit 1"."""
        met = sum(1 for row in self.slos if row.met)
        where = f" on {self.slo_window}" if self.slo_window else ""
        if self.slo_state == "met":
            return f"SLOs met ({met} of {len(self.slos)}){where}"
        if self.slo_state == "missed":
            missed = len(self.slos) - met
            return f"SLO MISSED ({missed} of {len(self.slos)} missed){where}: exit 1"
        if self.slo_state == "not judged":
            return "SLOs not judged"
        return "No SLO declared"


def fmt_us(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value >= 1_000_000:
        return f"{value / 1e6:,.2f} s"
    return f"{value / 1000:,.2f} ms" if value >= 1000 else f"{value:,.0f} µs"


def fmt_iops(value: float | None) -> str:
    """An IOPS figure as the sentence prints it (whole I/Os, thousands separated)."""
    return "n/a" if value is None else f"{value:,.0f}"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def slo_rows(summary: Mapping[str, Any]) -> list[SloRow]:
    """The summary's SLO verdicts as rows (sim.judge.slo's wording)."""
    from sim.judge.slo import ALL_OPS, LABELS, format_value, verdict_line

    rows = []
    for entry in _mapping(summary.get("slos")).get("verdicts") or []:
        if not isinstance(entry, Mapping):
            continue
        name = str(entry.get("slo"))
        label, sign = LABELS.get(name, (name, "vs"))
        scope = entry.get("op") or entry.get("device") or "?"
        scope = "all operations" if scope == ALL_OPS else str(scope)
        at = f" at {entry['at']}" if entry.get("at") else ""
        target = f"{sign} {format_value(name, finite(entry.get('limit')))}"
        margin = finite(entry.get("margin_pct"))
        met = entry.get("met") is True
        said = "-" if margin is None else f"{margin:+,.1f} %"
        if not met and margin is not None and margin < 0:
            said = f"missed by {-margin:,.1f} %"
            times = _times(name, finite(entry.get("measured")), finite(entry.get("limit")))
            said += f" ({times:,.1f}× the target)" if times is not None and times >= 2 else ""
        rows.append(
            SloRow(
                label=f"{scope} {label}{at}",
                measured=format_value(name, finite(entry.get("measured"))),
                target=target,
                margin=said,
                met=met,
                note=str(entry.get("note") or ""),
                name=str(entry.get("name") or ""),
                line=verdict_line(entry),
            )
        )
    return rows


def _times(limit_name: str, measured: float | None, limit: float | None) -> float | None:
    """How many times past its target a missed limit is (a maximum's measured / limit, a
    minimum's limit / measured); None when undefined."""
    if measured is None or limit is None or measured <= 0 or limit <= 0:
        return None
    return limit / measured if limit_name.endswith("_min") else measured / limit


def _slo_state(summary: Mapping[str, Any]) -> str:
    section = _mapping(summary.get("slos"))
    if not section:
        return "none"
    if not isinstance(section.get("met"), bool):
        return "not judged"
    return "met" if section["met"] else "missed"


def _primary_op(summary: Mapping[str, Any], analysis: Mapping[str, Any]) -> str | None:
    op = analysis.get("primary_op")
    if isinstance(op, str):
        return op
    operations = _mapping(summary.get("operations"))
    counts = {k: finite(_mapping(v).get("count")) or 0.0 for k, v in operations.items()}
    return min(counts, key=lambda k: (-counts[k], k)) if counts else None


def _device(summary: Mapping[str, Any], analysis: Mapping[str, Any]) -> str | None:
    device = analysis.get("primary_device")
    if isinstance(device, str):
        return device
    from sim.judge.slo import device_source

    return primary_device(_mapping(_mapping(summary.get("storage")).get(device_source())))


def _limiting_host(analysis: Mapping[str, Any]) -> str | None:
    """A run on several hosts: the host the verdict's client figures are from."""
    host = _mapping(analysis.get("hosts")).get("limiting")
    return str(host) if host else None


def _call(analysis: Mapping[str, Any]) -> str | None:
    call = _mapping(analysis.get("verdict")).get("call")
    return str(call) if call else None


def build_answer(summary: Mapping[str, Any], analysis: Mapping[str, Any] | None) -> Answer:
    """The run's answer from its summary.json and analysis (None: no analysis)."""
    analysis = analysis or {}
    rows = slo_rows(summary)
    state = _slo_state(summary)
    op, device, call = _primary_op(summary, analysis), _device(summary, analysis), _call(analysis)
    iops = run_iops(summary, device)
    if iops is None and device:  # a summary without block means (a run killed mid-way)
        series = _mapping(_mapping(_mapping(analysis.get("series")).get("device")).get(device))
        iops = window_iops(series.get("iops") or [])
    return Answer(
        slo_state=state,
        slos=rows,
        sentence=_sentence(summary, rows, state, op, device, iops, call, _limiting_host(analysis)),
        caveats=caveats(summary, device),
        call=call,
        op=op,
        device=device,
        iops=iops,
        slo_window=_slo_window(summary),
    )


def _slo_window(summary: Mapping[str, Any]) -> str:
    """The window the SLOs were judged on, when it is not the whole measured window."""
    window = _mapping(summary.get("slos")).get("window")
    return str(window) if window and window != "measured window" else ""


def _sentence(
    summary: Mapping[str, Any],
    rows: list[SloRow],
    state: str,
    op: str | None,
    device: str | None,
    iops: float | None,
    call: str | None,
    host: str | None = None,
) -> str:
    """ "read p99 5.90 ms at 4,239 IOPS on vda (mean over the measured window); the limiting
    layer is … — SLO read p99 ≤ 5.00 ms missed by 18.0 %"."""
    stats = _mapping(_mapping(summary.get("operations")).get(op or ""))
    p99 = finite(stats.get("p99_us"))
    what = f"{op} p99 {fmt_us(p99)}" if op else "no operation was measured"
    if device and iops is not None:
        where = f" at {fmt_iops(iops)} IOPS on {device} ({IOPS_DEFINITION})"
    else:
        ops_s = finite(stats.get("ops_s"))
        rate = f" at {ops_s:,.0f} ops/s" if ops_s is not None else ""
        where = f"{rate}, with no block device measured"
    layer = (
        LAYERS.get(call, f"verdict {call}").format(
            device=device or "the device", host=f" on host {host}" if host else ""
        )
        if call
        else "no analysis, so no limiting layer is named"
    )
    text = f"{what}{where}; {layer}"
    missed = [row for row in rows if not row.met]
    if state == "missed" and missed:
        first = missed[0]
        by = first.margin if first.margin.startswith("missed") else "missed"
        text += f" — SLO {first.label} {first.target} {by}"
        if len(missed) > 1:
            text += f" (and {len(missed) - 1} more missed)"
    elif state == "met":
        text += f" — {'the SLO' if len(rows) == 1 else f'all {len(rows)} SLOs'} met"
    return text + "."


def workload_headline(summary: Mapping[str, Any]) -> str | None:
    """What the workload's load report says must be read before any figure (the ``sql``
    workload with ``commit: true``: it changed the user's tables), or None."""
    load = _mapping(_mapping(summary.get("workload")).get("load"))
    headline = load.get("headline")
    return str(headline) if headline else None


def caveats(summary: Mapping[str, Any], device: str | None) -> list[str]:
    """What limits what the figures mean, worst first."""
    from sim.core.cache import not_exercised_headline

    out: list[str] = []
    said_first = workload_headline(summary)
    if said_first is not None:
        out.append(said_first)
    status = str(summary.get("status") or "unknown")
    errors = _mapping(summary.get("errors"))
    if errors.get("invalid"):
        why = summary.get("error") or "its operations failed"
        out.append(f"INVALID RUN: {why}; the figures describe failed operations, not the storage")
    cached = not_exercised_headline(summary)  # the console's and the web UI's wording
    if cached is not None:
        out.append(cached)
    if status != "completed":
        why = summary.get("error") or summary.get("reason") or "it did not complete"
        out.append(f"run {status}: {why}; the figures cover what was measured before it ended")
    slos = _mapping(summary.get("slos"))
    if slos and not isinstance(slos.get("met"), bool):
        out.append(f"SLOs not judged: {slos.get('error') or 'no verdict could be formed'}")
    if device is None:
        out.append("no block device was measured: the storage under the data was not observed")
    mix = _mapping(summary.get("mix"))
    if mix.get("exact") is False:
        out.append("operation mix NOT exact: the measured counts differ from the workload's rule")
    out.extend(_undelivered(summary))
    lost = _mapping(summary.get("collector_errors"))
    if lost:
        said = ", ".join(f"{k} {v}" for k, v in lost.items())
        out.append(f"collector samples lost ({said}): some intervals lack storage figures")
    return out


def _undelivered(summary: Mapping[str, Any]) -> list[str]:
    """Calibrated steps that did not deliver the IOPS they asked for."""
    out = []
    for stage in summary.get("stages") or []:
        stage = _mapping(stage)
        asked, got = finite(stage.get("rate_iops")), finite(stage.get("delivered_iops"))
        if stage.get("phase") != "measure" or not asked or got is None:
            continue
        if got < DELIVERED_SHARE * asked:
            step = stage.get("step")
            where = f"step {step + 1}" if isinstance(step, int) else "the run"
            out.append(
                f"{where} asked {asked:,.0f} IOPS and delivered {got:,.0f}: the load was not "
                "what the scenario asked"
            )
    return out


def text_lines(answer: Answer) -> list[str]:
    """The answer as console lines (unwrapped; the caller wraps them to its width)."""
    lines = [f"answer: {answer.headline}"]
    lines += [f"  {row.line}" for row in answer.slos]
    lines.append(f"  {answer.sentence}")
    lines += [f"  caveat: {c}" for c in answer.caveats]
    return lines
