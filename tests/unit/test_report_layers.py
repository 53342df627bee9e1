"""The layers below the host in the report and the analysis (issue #18): an array's volume and
LUN figures on the same time axis as the application's p99 and the host device's await, and
the I/Os per operation counted by the array beside those the host's block device counted.

The bundle is the report tests' synthetic one (one block device, host CPU) with an
``ontap.csv`` written as the ONTAP collector writes it; the figures are drawn from the
collector's own registry declarations, so nothing here names ONTAP to the report."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from sim.analysis import analyze_bundle
from sim.report import render_report
from sim.report.collector_charts import bundle_collector_panels
from sim.report.data import series_from_bundle
from tests.unit.test_report import parse_svg, synthetic_bundle, write_csv

ONTAP_COLUMNS = ("t", "interval", "phase", "entity", "read_iops", "write_iops", "total_iops",
                 "read_latency_us", "write_latency_us", "total_latency_us", "read_bps",
                 "write_bps")  # fmt: skip
ENTITIES = ("volume:lun", "lun:/vol/lun/lun")


def _with_ontap(bundle: Path) -> Path:
    """ONTAP rows for every interval of the synthetic bundle: the array serves each block
    I/O once (its total IOPS = the device's), its read latency rising with the interval."""
    rows: list[dict[str, Any]] = []
    for i in range(12):
        phase = "warmup" if i < 2 else "measure"
        device_iops = 500 + 100 * i  # the synthetic block device's iops column
        for entity in ENTITIES:
            values = (float(i + 1), i, phase, entity, 400, device_iops - 400, device_iops,
                      400 + 100 * i, 900, 500 + 80 * i, 400 * 8192, 100 * 8192)  # fmt: skip
            rows.append(dict(zip(ONTAP_COLUMNS, values, strict=True)))
    write_csv(bundle / "timeseries" / "ontap.csv", ONTAP_COLUMNS, rows)
    return bundle


def _panel_titles(svg: ET.Element) -> list[str]:
    return [el.text or "" for el in svg.iter("{http://www.w3.org/2000/svg}text")]


def test_the_array_layer_is_drawn_on_the_run_time_axis(tmp_path: Path) -> None:
    bundle = _with_ontap(synthetic_bundle(tmp_path))
    t = [float(v) for v in series_from_bundle(bundle)["t"]]
    panels = bundle_collector_panels(bundle, t)
    titles = [p.title for p in panels]
    assert titles == ["ONTAP: I/O rates", "ONTAP: throughput (MB/s)", "ONTAP: latency (log)"]
    latency = panels[-1]
    read = next(s for s in latency.series if s.label == "volume:lun Read await")
    # µs in the CSV, ms on the chart; one value per measured interval (t = 3 … 12).
    assert list(read.ys) == pytest.approx([(400 + 100 * i) / 1000 for i in range(2, 12)])

    html = render_report(bundle, None).read_text(encoding="utf-8")
    start = html.index("<svg", html.index('id="timeseries"'))
    svg = parse_svg(html[start : html.index("</svg>", start) + 6])
    texts = _panel_titles(svg)
    # Application p99, the host's device await and the array's latency: one figure, one axis.
    order = [
        next(i for i, text in enumerate(texts) if text.startswith(prefix))
        for prefix in ("Latency per operation", "Device await", "ONTAP: latency")
    ]
    assert order == sorted(order), texts


def test_ios_per_operation_are_counted_by_the_host_and_by_the_array(tmp_path: Path) -> None:
    bundle = _with_ontap(synthetic_bundle(tmp_path))
    analysis = analyze_bundle(bundle)
    io = analysis["io_per_op"]
    layers = {layer["entity"]: layer for layer in io["layers"]}
    assert set(layers) == set(ENTITIES)
    for layer in layers.values():
        assert layer["source"] == "ontap" and layer["title"] == "ONTAP"
        # The array counted what the device counted: the same I/Os per operation.
        assert layer["ios_per_op"] == pytest.approx(io["device_ios_per_op"], rel=1e-3)
    text = render_report(bundle, analysis).read_text(encoding="utf-8")
    assert "ONTAP volume:lun I/Os per operation" in text
