"""HTML building blocks for the report: escaping, number formats, tables and the stylesheet.

Every value that reaches the page goes through :func:`cell` or :func:`esc`, which escape it;
only strings wrapped in :class:`Safe` (markup this package built itself) pass unescaped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from sim import __version__
from sim.report.scales import finite, fmt_us

DASH = "–"


class Safe(str):
    """Markup built by the report itself, inserted without escaping."""

    __slots__ = ()


def esc(value: object) -> str:
    """``value`` as text, HTML-escaped (quotes too: it may end up in an attribute)."""
    return escape("" if value is None else str(value), quote=True)


def us(value: object) -> str:
    """A latency in µs, in the unit a DBA reads it."""
    number = finite(value)
    return DASH if number is None else fmt_us(number).replace("-", "−")


def num(value: object, digits: int = 1) -> str:
    """A number with thousands separators and ``digits`` decimals; integers stay integers."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    number = finite(value)
    return DASH if number is None else f"{number:,.{digits}f}".replace("-", "−")


def ratio(value: object, digits: int = 2) -> str:
    """A coefficient (r, ρ, R²) with a true minus sign."""
    number = finite(value)
    return DASH if number is None else f"{number:.{digits}f}".replace("-", "−")


def short(value: object) -> str:
    """A measured figure with the digits that matter: 80, 9.73, 60.2, 16,860, 0.0193."""
    number = finite(value)
    if number is None:
        return DASH
    magnitude = abs(number)
    if number.is_integer() or magnitude >= 1000:
        text = f"{number:,.0f}"
    elif magnitude >= 10:
        text = f"{number:.1f}"
    elif magnitude >= 1:
        text = f"{number:.2f}"
    else:
        text = f"{number:.3g}"
    return text.replace("-", "−")


def plain(value: object) -> str:
    """Any JSON value as short text: scalars as they are, containers as compact JSON."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return short(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return ", ".join(plain(v) for v in value) or DASH
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def cell(value: object) -> str:
    return value if isinstance(value, Safe) else esc(value)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    left: int | Collection[int] = 1,
    caption: str = "",
    cls: str = "",
) -> Safe:
    """A titled table; text columns (the first ``left``, or the indexes in ``left``) are
    left-aligned, the others are numbers, right-aligned.

    The title is a heading above the table rather than a ``<caption>``: a caption is as
    narrow as its table and wraps on a two-column table.
    """
    text = set(range(left)) if isinstance(left, int) else set(left)
    head = "".join(
        f'<th class="{"l" if i in text else "r"}">{esc(h)}</th>' for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{"l" if i in text else "r"}">{cell(v)}</td>' for i, v in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    title = f"<h3>{esc(caption)}</h3>" if caption else ""
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    return Safe(
        f'<div class="tbl">{title}<table class="{esc(cls)}">{thead}<tbody>{body}</tbody>'
        "</table></div>"
    )


def _records(value: list[dict[str, Any]]) -> Safe:
    """A list of flat records (tables loaded, devices watched) as a small nested table."""
    keys = list(dict.fromkeys(k for record in value for k in record))
    rows = ([plain(record.get(k)) for k in keys] for record in value)
    return table(keys, rows, left=0, cls="nested")


def kv_table(items: Mapping[str, Any], *, caption: str = "") -> Safe:
    """Two columns, key and value; a list of records becomes a nested table."""
    rows = [
        [
            k,
            _records(v)
            if v and isinstance(v, list) and all(isinstance(r, dict) for r in v)
            else plain(v),
        ]
        for k, v in items.items()
    ]
    return table(("", ""), rows, left=2, caption=caption, cls="kv")


def badge(text: str, kind: str) -> Safe:
    return Safe(f'<span class="badge {esc(kind)}">{esc(text)}</span>')


def section(anchor: str, title: str, *parts: str) -> Safe:
    body = "".join(cell(p) for p in parts)
    return Safe(f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{body}</section>')


def para(text: str, cls: str = "") -> Safe:
    attr = f' class="{esc(cls)}"' if cls else ""
    return Safe(f"<p{attr}>{esc(text)}</p>")


CSS = """
:root { --ink: #1f2933; --muted: #5b6470; --line: #d5dae0; --soft: #f4f6f8; --accent: #0b4f8a; }
* { box-sizing: border-box; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body { margin: 0 auto; max-width: 980px; padding: 24px 28px 40px; color: var(--ink);
  background: #fff; font: 14px/1.45 "DejaVu Sans", "Segoe UI", "Liberation Sans", Arial,
  sans-serif; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 2px solid
  var(--accent); color: var(--accent); }
h3 { font-size: 14px; margin: 18px 0 6px; }
p { margin: 6px 0; }
.sub { color: var(--muted); margin-bottom: 12px; }
.facts { display: grid; grid-template-columns: repeat(3, auto 1fr); gap: 3px 12px; margin: 0;
  padding: 10px 12px; background: var(--soft); border: 1px solid var(--line); border-radius: 4px;
  font-size: 13px; }
.facts dt { color: var(--muted); white-space: nowrap; }
.facts dd { margin: 0; overflow-wrap: anywhere; }
.verdict { font-size: 16px; padding: 10px 14px; border-left: 6px solid var(--muted);
  background: var(--soft); margin: 14px 0 8px; }
.verdict.storage-bound { border-color: #D55E00; }
.verdict.client-bound { border-color: #CC79A7; }
.verdict.database-bound { border-color: #0072B2; }
.verdict.inconclusive { border-color: #8a94a0; }
.verdict.invalid { border-color: #b3261e; background: #fdf1f0; }
.verdict.not-exercised { border-color: #b3261e; background: #fdf1f0; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
  font-weight: bold; color: #fff; background: #8a94a0; }
.badge.completed, .badge.pass { background: #1b7f4b; }
.badge.interrupted { background: #b26b00; }
.badge.failed, .badge.running, .badge.fail { background: #b3261e; }
.badge.running { background: #0b4f8a; }
.alert { padding: 8px 12px; border: 1px solid #e0b4b0; background: #fdf1f0; border-radius: 4px; }
.note { color: var(--muted); font-size: 13px; }
.tbl { break-inside: avoid; page-break-inside: avoid; }
table { border-collapse: collapse; margin: 4px 0 12px; font-size: 13px; width: auto;
  max-width: 100%; }
table.nested { margin: 0; font-size: 12px; }
table.nested th, table.nested td { padding: 1px 6px; text-align: left; white-space: nowrap;
  overflow-wrap: normal; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
td.r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th.r { text-align: right; }
td.l, th.l { text-align: left; }
table.kv > tbody > tr > td:first-child { color: var(--muted); white-space: nowrap; }
table.kv > tbody > tr > td { overflow-wrap: anywhere; text-align: left; }
.strong { background: #fde2d3; padding: 0 4px; } .moderate { background: #fff1dc; padding: 0 4px; }
.ok { color: #1b7f4b; font-weight: bold; } .bad { color: #b3261e; font-weight: bold; }
.met { font-weight: bold; white-space: nowrap; } .unmet { color: var(--muted); white-space: nowrap; }
table.segments td:nth-child(2) { min-width: 22em; }
table.segments td:first-child { white-space: nowrap; }
figure { margin: 8px 0 16px; break-inside: avoid; page-break-inside: avoid; }
figcaption { color: var(--muted); font-size: 12px; margin-top: 2px; }
svg.chart { display: block; width: 100%; height: auto; background: #fff; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 16px; }
.grid2 figure { margin: 0; }
pre { background: var(--soft); border: 1px solid var(--line); padding: 10px; font-size: 12px;
  white-space: pre-wrap; overflow-wrap: anywhere; }
pre.columns { column-count: 2; column-gap: 28px; column-rule: 1px solid var(--line); }
nav { font-size: 13px; margin: 12px 0; } nav a { margin-right: 10px; color: var(--accent); }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; border-top: 1px solid
  var(--line); padding-top: 6px; }
@page { size: A4; margin: 12mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 10.5pt; }
  nav { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  table, tr { break-inside: avoid; page-break-inside: avoid; }
  .facts { grid-template-columns: repeat(2, auto 1fr); }
}
"""


def page(title: str, body: str, footer: str) -> str:
    """A whole self-contained page: ``title`` and ``footer`` are plain text (escaped here),
    ``body`` is markup built with this module. The footer starts with dbsim's version and
    the time the page was generated."""
    generated = datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # No external resource may load, even if a value slipped through unescaped.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{body}"
        f"<footer>Generated by dbsim {esc(__version__)} on {esc(generated)}. {esc(footer)}"
        "</footer></body></html>\n"
    )
