"""The profile on the console: its sentences first, then tables folded to the width (never a
figure cut short), then what the data could not say and where the files are."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from sim.cli.tables import Column, folded
from sim.profile.columns import DEVICE_COLUMNS
from sim.profile.database import DB_COLUMNS, WAIT_BOUNDS, WAIT_COLUMNS
from sim.profile.nfs import OP_COLUMNS
from sim.profile.words import headline, recorded, show

PEAK_COLUMNS = (("busiest_minute", "busiest minute"), ("busiest_15min", "busiest 15-min"))


def stacked(heading: str) -> str:
    """A heading of several words one word a line: rich never wraps a heading of a column
    that does not wrap, so a long one would widen the table past the width the folding
    measured (tables.folded counts a heading's longest word)."""
    return heading.replace(" ", "\n")


def say(out: Console, text: str, indent: str = "  ") -> None:
    """``text`` wrapped at spaces to the console's width, continuation lines indented; a
    path longer than the width stays whole on a line of its own, to be copied."""
    wrapped = textwrap.fill(
        text,
        width=max(out.width, 40),
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    )
    out.print(wrapped, highlight=False, markup=False, soft_wrap=True)


def print_profile(out: Console, doc: dict[str, Any], written: Sequence[str] = ()) -> None:
    for line in headline(doc):
        say(out, line)
    say(out, recorded(doc))
    for table in _tables(doc, out.width):
        out.print(table)
    if doc["not_in_data"]:
        out.print("Not in the data:", highlight=False, markup=False)
        for item in doc["not_in_data"]:
            say(out, f"- {item['what']} ({item['from']})", indent="    ")
    for line in written:
        say(out, line)


def _tables(doc: dict[str, Any], width: int) -> list[Any]:
    tables: list[Any] = []
    devices = doc.get("devices")
    if devices:
        tables += _storage_table(doc, devices, width)
        tables += _sizes_table(devices, width)
        tables += _devices_table(devices, width)
    tables += _daily_table(doc, width)
    tables += _database_tables(doc.get("database"), width)
    tables += _nfs_tables(doc.get("nfs_client"), width)
    return tables


def _storage_table(doc: dict[str, Any], devices: dict[str, Any], width: int) -> list[Any]:
    peaks = doc["peaks"]
    resolved = [(key, name) for key, name in PEAK_COLUMNS if "figures" in (peaks.get(key) or {})]
    headers = ["figure", "mean", "p95", "max", *(name for _, name in resolved)]
    rows = []
    for col in DEVICE_COLUMNS:
        summary = devices["summary"].get(col.key)
        if summary is None:
            continue
        cells = [show(summary[k]) for k in ("mean", "p95", "max")]
        cells += [show(peaks[key]["figures"].get(col.key)) for key, _ in resolved]
        rows.append([col.label, *cells])
    span = doc["span"]
    title = f"storage ({span['intervals']:,} intervals of {span['interval_s']:g} s)"
    columns = [Column("figure", "left"), *(Column(stacked(h)) for h in headers[1:])]
    return folded(columns, rows, width, title=title)


def _sizes_table(devices: dict[str, Any], width: int) -> list[Any]:
    reads, writes = devices.get("read_sizes"), devices.get("write_sizes")
    if not reads and not writes:
        return []
    shares = {
        side: {b["bucket"]: b for b in (entry or {}).get("buckets", [])}
        for side, entry in (("read", reads), ("write", writes))
    }
    buckets = next(iter(s for s in shares.values() if s)).values()
    rows = [
        [
            b["label"],
            *(show(shares[side].get(b["bucket"], {}).get("pct")) for side in ("read", "write")),
        ]
        for b in buckets
    ]
    columns = [Column("size", "left"), Column("reads"), Column("writes")]
    return folded(columns, rows, width, title="request sizes (traced requests, whole data)")


def _devices_table(devices: dict[str, Any], width: int) -> list[Any]:
    rows = [
        [
            name,
            show(row.get("iops")),
            show(row.get("read_await_ms")),
            show(row.get("write_await_ms")),
            show(row.get("queue"), ""),
            show(row.get("util_pct")),
            "yes" if row["counted"] else "no",
        ]
        for name, row in devices["devices"].items()
    ]
    headers = ("device", "IOPS", "read await", "write await", "aqu-sz", "%util", "counted")
    columns = [
        Column(stacked(h), "left" if h in ("device", "counted") else "right") for h in headers
    ]
    return folded(columns, rows, width, title="devices (means over the data)")


def _daily_table(doc: dict[str, Any], width: int) -> list[Any]:
    shape = doc.get("daily_shape") or {}
    if "hours" not in shape:
        return []
    label = doc["peaks"]["load"]["label"]
    rows = [
        [f"{h['hour']:02d}:00", str(h["days"]), show(h["mean"], ""), show(h["max"], "")]
        for h in shape["hours"]
    ]
    columns = [Column("hour", "left"), Column("days"), Column("mean"), Column("max")]
    title = f"average day, {label} by hour ({shape['zone']})"
    return folded(columns, rows, width, title=title)


def _database_tables(database: dict[str, Any] | None, width: int) -> list[Any]:
    if not database:
        return []
    tables: list[Any] = []
    for entity, entry in database["entities"].items():
        rows = [
            [col.label, *(show(entry["summary"][col.key][k]) for k in ("mean", "p95", "max"))]
            for col in DB_COLUMNS
            if col.key in entry["summary"]
        ]
        columns = [Column("figure", "left"), Column("mean"), Column("p95"), Column("max")]
        tables += folded(columns, rows, width, title=f"database {entity} per interval")
    if database["waits"]:
        # Headings without a space: a folded part never cuts one short.
        labels = [f"≤{b}ms" for b in WAIT_BOUNDS] + [">1024ms"]
        rows = [
            [entry["event"], *(show(entry["shares_pct"].get(c), "%") for c in WAIT_COLUMNS)]
            for entry in database["waits"].values()
        ]
        columns = [Column(stacked("wait event"), "left"), *map(Column, labels)]
        tables += folded(columns, rows, width, title="wait histograms (% of waits per bucket)")
    return tables


def _nfs_tables(nfs: dict[str, Any] | None, width: int) -> list[Any]:
    if not nfs:
        return []
    tables: list[Any] = []
    for mount, entry in nfs["mounts"].items():
        rows = [
            [op, *(show((found["summary"].get(c.key) or {}).get("mean")) for c in OP_COLUMNS)]
            for op, found in entry["operations"].items()
        ]
        columns = [Column("operation", "left"), *(Column(stacked(c.label)) for c in OP_COLUMNS)]
        tables += folded(columns, rows, width, title=f"NFS {mount}: per operation (means)")
    return tables
