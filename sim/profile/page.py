"""The profile as one self-contained page (inline CSS and SVG, no script, no request): the
sentences, the per-interval charts drawn with the report's SVG code (the peak windows
shaded), the tables, the average day and what the data could not say."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sim.profile.columns import DEVICE_COLUMNS
from sim.profile.database import DB_COLUMNS, WAIT_BOUNDS, WAIT_COLUMNS
from sim.profile.nfs import OP_COLUMNS
from sim.profile.words import headline, recorded, show
from sim.report.draw import PALETTE
from sim.report.markup import Safe, esc, page, section, table
from sim.report.scales import fmt_ms, fmt_number, fmt_pct
from sim.report.svg import Panel, Points, Series, scatter_chart, time_panels

#: Points per line at most: longer series are drawn as means of consecutive intervals.
MAX_POINTS = 1500
PEAK_BANDS = (("busiest_minute", "busiest minute"), ("busiest_15min", "busiest 15 min"))
BAR_CSS = ".bar { display: inline-block; height: 10px; background: #0072B2; }</style>"


def _thin(values: Sequence[float | None], step: int) -> list[float | None]:
    """Means of ``step`` consecutive values (gaps left out; all gaps: a gap)."""
    out: list[float | None] = []
    for start in range(0, len(values), step):
        chunk = [v for v in values[start : start + step] if v is not None]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


def _clock(doc: dict[str, Any]) -> float | None:
    """The epoch the report's axis labels (local time) turn back into the bundle's own
    wall clock: the capture's hours, not the reader's."""
    stamp = doc.get("start")
    if not stamp:
        return None
    return datetime.fromisoformat(stamp).replace(tzinfo=None).timestamp()


def _device_panels(series: dict[str, Any], thin: Any) -> list[Panel]:
    def line(key: str, label: str, color: int, *, dashed: bool = False) -> list[Series]:
        if key not in series:
            return []
        return [Series(label, thin(series[key]), PALETTE[color], dashed=dashed)]

    panels = [
        Panel("IOPS", [*line("read_iops", "reads", 0), *line("write_iops", "writes", 1)]),
        Panel("MB/s", [*line("read_mb_s", "read", 0), *line("write_mb_s", "written", 1)]),
        Panel(
            "Request size (KiB, mean)",
            [*line("read_kib", "read", 0), *line("write_kib", "write", 1)],
        ),
        Panel(
            "Device latency",
            [
                *line("read_await_ms", "read await", 0),
                *line("write_await_ms", "write await", 1),
                *line("read_p99_ms", "read p99", 0, dashed=True),
                *line("write_p99_ms", "write p99", 1, dashed=True),
            ],
            y_format=fmt_ms,
        ),
        Panel(
            "Queue depth",
            [*line("queue", "aqu-sz", 2), *line("inflight_mean", "in flight at issue", 3)],
        ),
    ]
    if "seq_pct" in series:
        panels.append(
            Panel("Sequential share", line("seq_pct", "sequential", 2), fmt_pct, y_max=100)
        )
    return [p for p in panels if p.series]


def _charts(doc: dict[str, Any]) -> str:
    devices = doc.get("devices")
    if not devices:
        return ""
    series = devices["series"]
    t = series["t"]
    step = max(1, -(-len(t) // MAX_POINTS))
    times = [t[min(i + step - 1, len(t) - 1)] for i in range(0, len(t), step)]
    # The 15 minutes shaded, the minute (inside them, often) a marked start.
    windows = {k: w for k, _ in PEAK_BANDS if "figures" in (w := doc["peaks"].get(k) or {})}
    quarter, minute = windows.get("busiest_15min"), windows.get("busiest_minute")
    bands = [(quarter["start_t"], quarter["end_t"], "")] if quarter else []  # the caption names it
    marks = [(minute["start_t"], "busiest minute")] if minute else []
    svg = time_panels(
        times,
        _device_panels(series, lambda values: _thin(values, step)),
        marks=marks,
        bands=bands,
        label="storage per interval",
        clock=_clock(doc),
    )
    note = "each point one interval" if step == 1 else f"each point the mean of {step} intervals"
    caption = (
        f"The counted devices per interval ({note}), on the bundle's clock; shaded: the "
        "busiest 15 minutes; dashed: the start of the busiest minute."
    )
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def _daily_chart(doc: dict[str, Any]) -> str:
    shape = doc.get("daily_shape") or {}
    if "hours" not in shape:
        return ""
    means = [(float(h["hour"]), h["mean"]["value"]) for h in shape["hours"]]
    highs = [(float(h["hour"]), h["max"]["value"]) for h in shape["hours"]]
    label = doc["peaks"]["load"]["label"]
    svg = scatter_chart(
        [
            Points("mean", means, PALETTE[0], line=True),
            Points("highest interval", highs, PALETTE[1], line=True, dashed=True),
        ],
        title=f"Average day: {label} by hour ({shape['zone']})",
        x_title="hour of the day",
        y_title=label,
        x_format=lambda v: f"{v:g}",
        y_format=fmt_number,
    )
    return f"<figure>{svg}</figure>"


def _summary_table(doc: dict[str, Any]) -> str:
    devices = doc.get("devices")
    if not devices:
        return ""
    peaks = doc["peaks"]
    resolved = [(k, n) for k, n in PEAK_BANDS if "figures" in (peaks.get(k) or {})]
    rows = []
    for col in DEVICE_COLUMNS:
        entry = devices["summary"].get(col.key)
        if entry is None:
            continue
        cells = [show(entry[k]) for k in ("mean", "p95", "max")]
        cells += [show(peaks[k]["figures"].get(col.key)) for k, _ in resolved]
        about = devices["columns"][col.key]
        rows.append([col.label, *cells, f"{about['what']}: {about['source']}"])
    headers = ["figure", "mean", "p95", "max", *(n for _, n in resolved), "what, from"]
    return table(headers, rows, left=(0, len(headers) - 1), caption="Storage per interval")


def _sizes(devices: dict[str, Any]) -> str:
    parts = []
    for side in ("read", "write"):
        sizes = devices.get(f"{side}_sizes")
        if not sizes:
            continue
        rows = []
        for bucket in sizes["buckets"]:
            pct = bucket["pct"]["value"] or 0.0
            bar = Safe(f'<span class="bar" style="width:{pct * 1.5:.0f}px"></span>')
            rows.append([bucket["label"], f"{bucket['requests']:,}", show(bucket["pct"]), bar])
        caption = f"{side.title()} request sizes ({sizes['requests']:,} traced requests)"
        parts.append(table(("size", "requests", "share", ""), rows, caption=caption))
    return "".join(parts)


def _devices_table(devices: dict[str, Any]) -> str:
    rows = [
        [
            name,
            show(row.get("iops")),
            show(row.get("read_await_ms")),
            show(row.get("write_await_ms")),
            show(row.get("queue"), ""),
            show(row.get("util_pct")),
            "counted" if row["counted"] else f"not counted: {row.get('why_not_counted', '')}",
        ]
        for name, row in devices["devices"].items()
    ]
    headers = ("device", "IOPS", "read await", "write await", "aqu-sz", "%util", "")
    return table(headers, rows, left=(0, 6), caption="Devices (means over the data)")


DB_LINES = (
    (
        "Physical I/O requests/s",
        fmt_number,
        ("phys_read_req_s", "phys_write_req_s", "log_write_req_s"),
    ),
    ("Commits/s", fmt_number, ("commits_s",)),
    ("Waits", fmt_ms, ("single_block_read_ms", "multi_block_read_ms", "log_write_ms")),
)


def _database_chart(doc: dict[str, Any], database: dict[str, Any]) -> str:
    """The databases' I/O requests, commits and waits per interval, one panel each."""
    t = database["t"]
    step = max(1, -(-len(t) // MAX_POINTS))
    times = [t[min(i + step - 1, len(t) - 1)] for i in range(0, len(t), step)]
    panels = []
    for title, fmt, keys in DB_LINES:
        lines = [
            Series(
                f"{entity} {key}" if len(database["entities"]) > 1 else key,
                _thin(entry["series"][key], step),
                PALETTE[n % len(PALETTE)],
            )
            for n, (entity, entry, key) in enumerate(
                (e, v, k) for e, v in database["entities"].items() for k in keys if k in v["series"]
            )
        ]
        if lines:
            panels.append(Panel(title, lines, y_format=fmt))
    if not panels:
        return ""
    svg = time_panels(times, panels, label="database per interval", clock=_clock(doc))
    note = "each point one interval" if step == 1 else f"each point the mean of {step} intervals"
    return f"<figure>{svg}<figcaption>{esc(f'The database per interval ({note}).')}</figcaption></figure>"


def _database(doc: dict[str, Any]) -> str:
    database = doc.get("database")
    if not database or not (database["entities"] or database["waits"]):
        return ""
    parts: list[str] = [Safe(_database_chart(doc, database))]
    for entity, entry in database["entities"].items():
        rows = [
            [
                col.label,
                *(show(entry["summary"][col.key][k]) for k in ("mean", "p95", "max")),
                f"{entry['columns'][col.key]['what']}: {entry['columns'][col.key]['source']}",
            ]
            for col in DB_COLUMNS
            if col.key in entry["summary"]
        ]
        headers = ("figure", "mean", "p95", "max", "what, from")
        parts.append(table(headers, rows, left=(0, 4), caption=f"Database {entity}"))
    if database["waits"]:
        labels = [f"≤{b}ms" for b in WAIT_BOUNDS] + [">1024ms"]
        rows = [
            [e["event"], *(show(e["shares_pct"].get(c), "%") for c in WAIT_COLUMNS)]
            for e in database["waits"].values()
        ]
        parts.append(table(["event", *labels], rows, caption="Wait histograms (% per bucket)"))
    return section("database", "Database", *parts)


def _nfs(doc: dict[str, Any]) -> str:
    nfs = doc.get("nfs_client")
    if not nfs:
        return ""
    parts = []
    for mount, entry in nfs["mounts"].items():
        rows = [
            [op, *(show((found["summary"].get(c.key) or {}).get("mean")) for c in OP_COLUMNS)]
            for op, found in entry["operations"].items()
        ]
        headers = ["operation", *(c.label for c in OP_COLUMNS)]
        parts.append(table(headers, rows, caption=f"NFS {mount}: per operation (means)"))
    return section("nfs", "NFS", *parts)


def render_page(doc: dict[str, Any]) -> str:
    """The whole page of ``doc`` (a profile document)."""
    sentences = "".join(f'<p class="verdict">{esc(line)}</p>' for line in headline(doc))
    limits = "".join(f"<li>{esc(i['what'])} ({esc(i['from'])})</li>" for i in doc["not_in_data"])
    devices = doc.get("devices")
    storage = (
        section(
            "storage",
            "Storage",
            Safe(_charts(doc)),
            _summary_table(doc),
            Safe(_sizes(devices)),
            _devices_table(devices),
        )
        if devices
        else ""
    )
    body = (
        f'<header><h1>dbsim profile</h1><p class="sub">{esc(recorded(doc))}</p></header>'
        + section("peak", "What production asks of its storage", Safe(sentences))
        + storage
        + section("day", "Average day", Safe(_daily_chart(doc) or _said(doc, "daily_shape")))
        + _database(doc)
        + _nfs(doc)
        + section("limits", "What the data could not say", Safe(f"<ul>{limits}</ul>"))
    )
    footer = (
        f"profile_version {doc['profile_version']}; each figure measured, imported or derived "
        "as its source says (profile.json)."
    )
    # The size bars: the report's stylesheet has none; one rule, in the page's own style.
    return page(f"dbsim profile: {doc['bundle']}", body, footer).replace("</style>", BAR_CSS, 1)


def _said(doc: dict[str, Any], key: str) -> str:
    return f'<p class="note">{esc((doc.get(key) or {}).get("unresolved", ""))}</p>'
