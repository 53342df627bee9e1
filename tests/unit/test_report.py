"""The run report: SVG helpers, bundle readers, the page (offline, escaped) and its commands."""

from __future__ import annotations

import asyncio
import csv
import itertools
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from hdrh.histogram import HdrHistogram

from sim.bundle.writer import OPS_COLUMNS
from sim.cli import main
from sim.report import render_html, render_report, write_report
from sim.report.charts import stage_marks
from sim.report.data import latency_buckets, series_from_bundle
from sim.report.scales import fmt_us, log_ticks, nice_ticks
from sim.report.svg import Panel, Points, Series, histogram_chart, scatter_chart, time_panels

SVG_NS = "{http://www.w3.org/2000/svg}"
HOSTILE = "<script>alert(1)</script>"
RESOURCE_ATTRS = {"src", "href", "xlink:href", "action", "data", "poster", "srcset", "background"}


# --------------------------------------------------------------------------- helpers


def parse_svg(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # raises on anything that is not well-formed XML
    assert root.tag == f"{SVG_NS}svg"
    return root


def drawn_points(root: ET.Element) -> int:
    """Coordinates drawn as path vertices and dots."""
    vertices = sum(len(re.findall(r"[ML]", p.get("d", ""))) for p in root.iter(f"{SVG_NS}path"))
    return vertices + len(list(root.iter(f"{SVG_NS}circle")))


class PageParser(HTMLParser):
    """Collects tags, resource references and inline SVGs of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.references: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in RESOURCE_ATTRS and value:
                self.references.append(value)
            if name == "style" and value and "url(" in value:
                self.references.append(value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse_page(html: str) -> PageParser:
    parser = PageParser()
    parser.feed(html)
    parser.close()
    return parser


def assert_offline(html: str) -> PageParser:
    page = parse_page(html)
    external = [r for r in page.references if not r.startswith("#")]
    assert external == [], f"the page references resources: {external}"
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(page.tags)
    assert "@import" not in html and "url(" not in html
    for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S):
        parse_svg(svg)
    return page


def encoded_histogram(values: list[int]) -> str:
    histogram = HdrHistogram(1, 3_600_000_000, 3)
    for value in values:
        histogram.record_value(value)
    return histogram.encode().decode("ascii")


def write_csv(path: Path, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


BLOCK_COLUMNS = (
    "t",
    "interval",
    "phase",
    "entity",
    "iops",
    "r_s",
    "w_s",
    "r_await_ms",
    "w_await_ms",
    "aqu_sz",
    "util_pct",
)
HOST_COLUMNS = ("t", "interval", "phase", "entity", "cpu_busy_pct", "process_cpu_pct")
SUMMARY = """
schema_version: 1
status: completed
reason: ""
scenario: {name: NAME, workload: slob, target: sqlite}
started_at: "2026-01-01T00:00:00.000+00:00"
ended_at: "2026-01-01T00:00:12.000+00:00"
sessions: 2
timing: {warmup_s: 2.0, measured_s: 10.0}
mix: {requested_pct: {read: 90, NAME: 10}, measured: {read: 1000}, exact: true}
storage: {block: {vda: {iops: 1000.0, samples: 10}}}
target: {kind: sqlite, path: NAME}
collectors: [{source: block, devices: [{name: vda, dev: "254:0"}]}]
messages: ["collector block: NAME"]
"""
STATS = """{count: 1000, errors: 0, errors_by_class: {}, ops_s: 100.0, p50_us: 200, p95_us: 900,
            p99_us: 3000, p99_9_us: 90000, max_us: 90111}"""
ANALYSIS = """
schema: 1
primary_op: read
primary_device: vda
correlation:
  read:
    p50_us: {await_ms: {pearson: 0.91, spearman: 0.88, n: 10}}
    p99_us: {await_ms: {pearson: 0.91, spearman: 0.88, n: 10}}
lag: {read: {metric: await_ms, best_lag_s: 1, r: 0.8, leader: storage}}
curve:
  x: device_iops
  points: [{x: 700, ops_s: 900, p50_us: 250, p99_us: 3000, n: 2},
           {x: 900, ops_s: 950, p50_us: 250, p99_us: 6000, n: 2},
           {x: 1100, ops_s: 1000, p50_us: 250, p99_us: 9000, n: 2},
           {x: 1300, ops_s: 1050, p50_us: 250, p99_us: 12000, n: 2},
           {x: 1500, ops_s: 1100, p50_us: 250, p99_us: 15000, n: 2}]
  knee: {x: 1300, p99_us: 12000, method: kneedle}
io_per_op: {device_ios_per_op: 1.2, device_read_ios_per_read: 0.9,
            db_blocks_read_per_read: null, cache_hit_pct: null}
regression:
  read: {y: p99_us, x: await_ms, slope_us_per_ms: 900.0, intercept_us: 150.0, r2: 0.83}
littles_law: {sessions: 2, concurrency_measured: 1.9, ratio: 0.95, note: ok}
verdict:
  call: storage-bound
  summary: p99 follows device await NAME
  evidence: [{check: "r(p99, await)", value: 0.91, threshold: 0.7, passed: true,
              meaning: latency moves with await}]
segments: [{label: step 1, intervals: 5, verdict: {call: inconclusive}, p99_us: 5000,
            device_iops: 800, await_ms: 0.7}]
"""


def with_hostile(text: str) -> Any:
    """The YAML with every NAME replaced by the hostile string (a plain scalar in YAML)."""
    return yaml.safe_load(text.replace("NAME", HOSTILE))


def synthetic_bundle(root: Path, name: str = "synthetic", steps: int = 2) -> Path:
    """A small two-step bundle: warm-up, 10 measured intervals, one block device, host CPU."""
    bundle = root / f"20260101-000000-{name}"
    bundle.mkdir(parents=True)
    scenario = {
        "name": name,
        "description": HOSTILE,
        "load": {"steps": [{"duration_s": 5, "sessions": 2**i} for i in range(steps)]},
        "target": {"kind": "sqlite", "path": f"/tmp/{HOSTILE}.sqlite"},
    }
    (bundle / "scenario.yaml").write_text(yaml.safe_dump(scenario), encoding="utf-8")
    ops_rows, block_rows, host_rows = [], [], []
    for i in range(12):
        phase = "warmup" if i < 2 else "measure"
        step = "" if i < 2 else (i - 2) * steps // 10
        head = (float(i + 1), i, phase)
        for op, share in (("read", 0.9), (HOSTILE, 0.1)):
            ops = 1000 * share * (1 + i / 10)
            p99 = "" if i == 6 else 2000 * (1 + i)  # an empty cell: a gap
            values = (
                *head,
                step,
                op,
                ops,
                int(ops),
                0,
                200 + 10 * i,
                900,
                p99,
                9000,
                20000,
                50,
                300,
            )
            ops_rows.append(dict(zip(OPS_COLUMNS, values, strict=True)))
        w_await = "nan" if i == 8 else 1.5
        values = (
            *head,
            "vda",
            500 + 100 * i,
            400,
            100 + 100 * i,
            0.5 + i / 10,
            w_await,
            1 + i / 2,
            5 * i,
        )
        block_rows.append(dict(zip(BLOCK_COLUMNS, values, strict=True)))
        host_rows.append(dict(zip(HOST_COLUMNS, (*head, "vm", 40 + i, 30), strict=True)))
    write_csv(bundle / "timeseries" / "ops.csv", OPS_COLUMNS, ops_rows)
    write_csv(bundle / "timeseries" / "block.csv", BLOCK_COLUMNS, block_rows)
    write_csv(bundle / "timeseries" / "host.csv", HOST_COLUMNS, host_rows)
    (bundle / "histograms").mkdir()
    measured = {
        "read": {"count": 1000, "hdr": encoded_histogram([200] * 900 + [3000] * 99 + [90000])},
        HOSTILE: {"count": 10, "hdr": encoded_histogram([500] * 10)},
    }
    (bundle / "histograms" / "measured.json").write_text(json.dumps(measured), encoding="utf-8")
    summary = with_hostile(SUMMARY)
    stats = yaml.safe_load(STATS)
    summary.update(run=bundle.name, operations={"read": stats, HOSTILE: {**stats, "count": 10}})
    (bundle / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return bundle


def synthetic_analysis(series: dict[str, Any]) -> dict[str, Any]:
    """An analysis dict of schema 1 with every section filled."""
    analysis: dict[str, Any] = with_hostile(ANALYSIS)
    analysis.update(series=series, intervals=len(series["t"]))
    return analysis


# --------------------------------------------------------------------------- scales


TICK_RANGES = [(0, 1), (0, 7), (3, 14.6), (0, 19876), (0, 21258.8), (-5, 5), (0.001, 0.004),
               (5, 5), (1.0, 5.0), (0, 1e-9), (-3, -1)]  # fmt: skip


@pytest.mark.parametrize(("lo", "hi"), TICK_RANGES)
def test_nice_ticks_cover_the_range_with_round_steps(lo: float, hi: float) -> None:
    ticks = nice_ticks(lo, hi)
    assert 2 <= len(ticks) <= 12
    assert ticks[0] <= lo and ticks[-1] >= hi
    step = ticks[1] - ticks[0]
    assert all(math.isclose(b - a, step, rel_tol=1e-6) for a, b in itertools.pairwise(ticks))
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1, 2, 2.5, 5)


def test_log_ticks_are_powers_of_ten_around_the_data() -> None:
    assert log_ticks(150, 40_000) == [100, 1000, 10_000, 100_000]
    assert log_ticks(150, 900) == [100, 200, 500, 1000]
    assert log_ticks(0, 10) == []


def test_latency_labels_use_the_unit_a_dba_reads() -> None:
    assert [fmt_us(v) for v in (0, 250, 1500, 2_100_000)] == ["0", "250 µs", "1.5 ms", "2.1 s"]


# --------------------------------------------------------------------------- SVG charts


def test_time_panels_share_the_time_axis_and_break_lines_at_gaps() -> None:
    t = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    panels = [
        Panel("ops/s", [Series("read", [10, 12, None, 14, math.nan, 15])]),
        Panel("latency", [Series("p99", [100, 200, 300, 400, 500, 600])], log_y=True),
    ]
    svg = time_panels(t, panels, marks=[(3.5, "step 2")])
    root = parse_svg(svg)
    paths = [p.get("d", "") for p in root.iter(f"{SVG_NS}path")]
    # 10, 12 | 14 | 15: one two-point run, two isolated points (dots, not joined through 0).
    assert paths[0].count("M") == 1 and paths[0].count("L") == 1
    assert paths[1].count("M") == 1 and paths[1].count("L") == 5
    x_of = [re.findall(r"M([\d.]+)", p)[0] for p in paths]
    assert x_of[0] == x_of[1], "both panels must map t=1 to the same x"
    labels = [el.text for el in root.iter(f"{SVG_NS}text")]
    assert "step 2" in labels
    assert {"1 s", "6 s"} <= set(labels)  # time ticks under the last panel only, once each
    assert labels.count("6 s") == 1
    assert {"100", "1k"} <= set(labels)  # the log panel's decades


def test_time_panels_draw_no_data_for_empty_series_and_empty_time() -> None:
    root = parse_svg(time_panels([1.0, 2.0], [Panel("empty", [Series("x", [None, None])])]))
    assert "no data" in [el.text for el in root.iter(f"{SVG_NS}text")]
    parse_svg(time_panels([], [Panel("empty", [Series("x", [])])]))
    parse_svg(time_panels([1.0], []))


def test_an_hour_long_run_gets_minute_ticks_and_no_dot_per_interval() -> None:
    t = [float(i) for i in range(1, 3601)]
    svg = time_panels(t, [Panel("ops/s", [Series("read", [1000 + i % 50 for i in range(3600)])])])
    root = parse_svg(svg)
    labels = [el.text for el in root.iter(f"{SVG_NS}text")]
    assert "60 min" in labels and not any(label and label.endswith(" s") for label in labels)
    assert not list(root.iter(f"{SVG_NS}circle"))  # 3,600 dots would hide the line
    assert len(svg) < 200_000


def test_scatter_marks_the_knee_and_survives_bad_points() -> None:
    points = Points("p99", [(100, 1000), (200, None), (None, 5), (300, math.inf), (400, 9000)])
    curve = Points("curve", [(100, 1000), (400, 9000)], line=True, dots=False)
    root = parse_svg(
        scatter_chart(
            [points, curve],
            title="t",
            x_title="IOPS",
            y_title="latency",
            log_y=True,
            mark=(400, 9000, "knee ≈ 400"),
        )
    )
    rings = [c for c in root.iter(f"{SVG_NS}circle") if c.get("r") == "8"]
    assert len(rings) == 1
    assert "knee ≈ 400" in [el.text for el in root.iter(f"{SVG_NS}text")]
    assert "no data" in scatter_chart([Points("x", [])], title="t", x_title="", y_title="")


def test_histogram_bars_on_log_axes() -> None:
    buckets = [(100.0, 158.5, 10), (158.5, 251.2, 1), (251.2, 398.1, 0), (398.1, 631.0, 5000)]
    root = parse_svg(histogram_chart(buckets, title="read", markers=[(120, "p50 120 µs")]))
    bars = [r for r in root.iter(f"{SVG_NS}rect") if r.find(f"{SVG_NS}title") is not None]
    assert len(bars) == 3  # the empty bucket draws nothing
    heights = [float(b.get("height", "0")) for b in bars]
    assert all(h > 0 for h in heights) and heights[2] > heights[0] > heights[1]
    assert "no data" in histogram_chart([], title="none")


def test_labels_are_escaped_inside_svg() -> None:
    svg = time_panels([1, 2], [Panel(HOSTILE, [Series(HOSTILE, [1, 2])])])
    root = parse_svg(svg)
    assert HOSTILE in [el.text for el in root.iter(f"{SVG_NS}text")]
    assert "<script" not in svg


def test_stage_log_gives_exact_step_starts_warmup_and_lab_ceilings() -> None:
    stages = [
        {"t": 0.0, "phase": "warmup", "step": None, "sessions": 1},
        {"t": 2.003, "phase": "measure", "step": 0, "sessions": 1},
        {
            "t": 4.2,
            "phase": "measure",
            "step": 1,
            "sessions": 4,
            "rate_ops_s": 500.0,
            "lab": {"read_iops": 300, "write_iops": None},
        },
    ]
    marks, bands = stage_marks(stages)
    assert bands == [(0.0, 2.003, "warm-up")]
    assert marks == [(2.003, "step 1: 1 sess."), (4.2, "step 2: 4 sess. 500/s ≤300 r IOPS")]
    assert stage_marks(stages[:2]) == ([], [(0.0, 2.003, "warm-up")])  # one step: no marks


# --------------------------------------------------------------------------- bundle readers


def test_latency_buckets_count_every_operation_in_log_buckets() -> None:
    buckets = latency_buckets(encoded_histogram([200] * 90 + [3000] * 9 + [90000]))
    assert sum(n for _, _, n in buckets) == 100
    assert all(hi / lo == pytest.approx(10**0.2) for lo, hi, _ in buckets)
    by_value = {v: n for v in (200, 3000, 90000) for lo, hi, n in buckets if lo <= v < hi}
    assert by_value == {200: 90, 3000: 9, 90000: 1}


def test_series_from_bundle_aligns_measured_intervals(tmp_path: Path) -> None:
    series = series_from_bundle(synthetic_bundle(tmp_path))
    assert series["t"] == [float(t) for t in range(3, 13)]  # warm-up left out
    assert series["step"][0] == 0 and series["step"][-1] == 1
    assert series["p99_us"]["read"][4] is None  # an empty cell is a gap
    assert series["device"]["vda"]["w_await_ms"][6] is None  # nan is a gap too
    assert series["device"]["vda"]["await_ms"][0] == pytest.approx((400 * 0.7 + 300 * 1.5) / 700)
    assert len(series["host"]["cpu_busy_pct"]) == 10


# --------------------------------------------------------------------------- the page


def test_report_without_analysis_is_offline_escaped_and_plotted(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path)
    path = render_report(bundle)
    assert path == bundle / "report.html"
    html = path.read_text(encoding="utf-8")
    page = assert_offline(html)
    assert HOSTILE not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert page.tags.count("svg") >= 4  # time series, curve, two histograms
    assert "could not be drawn" not in html
    assert "No analysis is available" in html
    assert not list(bundle.glob(".*.tmp")), "the atomic write left its temporary file"


def test_report_with_analysis_shows_verdict_knee_and_tables(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path)
    analysis = synthetic_analysis(series_from_bundle(bundle))
    html = render_report(bundle, analysis).read_text(encoding="utf-8")
    assert_offline(html)
    text = " ".join(parse_page(html).text)
    assert "Storage-bound." in text and f"p99 follows device await {HOSTILE}" in text
    assert "knee ≈ 1.3k, p99 12 ms" in text
    for heading in (
        "Evidence",
        "Correlation of latency",
        "Lag:",
        "Linear regression",
        "I/O cost per operation",
        "Little's law",
        "step 1",
    ):
        assert heading in text, heading
    assert "could not be drawn" not in html
    assert HOSTILE not in html


def test_report_reads_analysis_json_and_rejects_other_schemas(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path)
    analysis = synthetic_analysis(series_from_bundle(bundle))
    (bundle / "analysis.json").write_text(json.dumps(analysis), encoding="utf-8")
    assert "Storage-bound." in render_html(bundle)
    html = render_html(bundle, {**analysis, "schema": 99})
    assert "schema 99" in html and "Storage-bound." not in html


def test_a_damaged_analysis_costs_one_section_not_the_report(tmp_path: Path) -> None:
    bundle = synthetic_bundle(tmp_path)
    analysis = synthetic_analysis(series_from_bundle(bundle))
    analysis["correlation"] = {"read": ["not", "a", "dict"]}
    html = render_html(bundle, analysis)
    assert html.count("could not be drawn") == 1
    assert "Storage-bound." in html and "Latency histograms" in html
    assert_offline(html)


def test_partial_bundle_of_a_killed_run(tmp_path: Path) -> None:
    bundle = tmp_path / "run"
    bundle.mkdir()
    (bundle / "summary.json").write_text(
        json.dumps({"status": "running", "scenario": {"name": "x"}}), encoding="utf-8"
    )
    html = render_report(bundle).read_text(encoding="utf-8")
    assert_offline(html)
    assert "Partial report." in html and "could not be drawn" not in html


# --------------------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def real_bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 2-second run of the default scenario (SLOB-like on a temporary SQLite), in process."""
    from sim.config.resolve import resolve
    from sim.run.finish import finish_summary
    from sim.run.runner import prepare_run

    out = tmp_path_factory.mktemp("real")
    scenario = resolve(None, [("load.duration_s", 2.0), ("output.directory", str(out))])
    run = prepare_run(scenario)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(run.engine.run())
    finally:
        finish_summary(run)
        loop.close()
    yield run.bundle.path


def test_report_of_a_real_run(real_bundle: Path) -> None:
    html = render_report(real_bundle).read_text(encoding="utf-8")
    page = assert_offline(html)
    assert "could not be drawn" not in html
    svgs = [parse_svg(s) for s in re.findall(r"<svg.*?</svg>", html, flags=re.S)]
    assert len(svgs) >= 3 and page.tags.count("svg") == len(svgs)
    assert sum(drawn_points(s) for s in svgs) > 10
    assert "name: quickstart" in html  # the scenario as run


def test_report_command_and_runs_listing(
    real_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (real_bundle / "report.html").unlink(missing_ok=True)
    assert main(["report", str(real_bundle)]) == 0
    assert capsys.readouterr().out.strip() == str(real_bundle / "report.html")
    assert (real_bundle / "report.html").is_file()

    synthetic_bundle(real_bundle.parent)  # older: started 2026-01-01
    (real_bundle.parent / "not-a-run").mkdir()
    assert main(["runs", str(real_bundle.parent), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["run"] == real_bundle.name  # newest first
    assert len(rows) == 2 and rows[0]["op"] == "read" and rows[0]["status"] == "completed"
    if (real_bundle / "analysis.json").exists():  # sim.analysis is installed
        # A SQLite run in the page cache is "not-exercised" (sim.core.cache) as often as not.
        assert rows[0]["verdict"] in {
            "storage-bound",
            "client-bound",
            "database-bound",
            "inconclusive",
            "not-exercised",
        }
    assert main(["runs", str(real_bundle.parent)]) == 0
    assert real_bundle.name in capsys.readouterr().out


def test_write_report_drops_a_stale_analysis_when_the_bundle_cannot_be_analysed(
    tmp_path: Path,
) -> None:
    bundle = tmp_path / "killed"
    bundle.mkdir()
    (bundle / "summary.json").write_text(json.dumps({"status": "running"}), encoding="utf-8")
    stale = synthetic_analysis(series_from_bundle(synthetic_bundle(tmp_path)))
    (bundle / "analysis.json").write_text(json.dumps(stale), encoding="utf-8")
    path, problem = write_report(bundle)
    assert problem  # no time series: nothing to analyse (or no sim.analysis at all)
    assert not (bundle / "analysis.json").exists()
    assert "Storage-bound." not in path.read_text(encoding="utf-8")


def test_report_command_rejects_a_directory_that_is_not_a_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: report: {tmp_path} is not a run bundle (no summary.json in it)"]
    assert main(["runs", str(tmp_path / "missing")]) == 2
