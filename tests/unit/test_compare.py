"""``dbsim compare``: deltas, the verdict by thresholds, the thresholds file, the HTML page and
the exit codes, on hand-written bundles."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.cli import main
from sim.errors import ConfigError, ScenarioError
from sim.judge.compare import Thresholds, compare, load_thresholds
from sim.report.compare import render_html, table_rows


def bundle(
    root: Path,
    name: str,
    *,
    read: tuple[float, float, float] = (1000.0, 200, 2000),
    device: str = "vda",
    iops: float = 1500.0,
    r_await: float = 1.0,
    sessions: int = 4,
    ios_per_op: float | None = None,
    status: str = "completed",
    noise_pct: float = 1.0,
) -> Path:
    """A bundle with read (ops/s, p50 µs, p99 µs) and update, over 10 s, one block device,
    and its 10 one-second intervals: each figure alternately ``noise_pct`` above and below
    its whole-run value (so the intervals' mean is that value)."""
    path = root / name
    path.mkdir(parents=True)
    ops_s, p50, p99 = read
    summary = {
        "run": name,
        "status": status,
        "sessions": sessions,
        "scenario": {"name": name, "workload": "slob", "target": "sqlite"},
        "timing": {"measured_s": 10.0},
        "operations": {
            "read": {"count": int(ops_s * 10), "ops_s": ops_s, "p50_us": p50, "p99_us": p99},
            "update": {"count": 1000, "ops_s": 100.0, "p50_us": 900, "p99_us": 9000},
        },
        "storage": {
            "block": {
                device: {"iops": iops, "r_s": iops, "w_s": 0.0, "r_await_ms": r_await,
                         "w_await_ms": 0.0},
            }
        },
    }  # fmt: skip
    (path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    write_series(path, summary, noise_pct)
    (path / "scenario.yaml").write_text(
        yaml.safe_dump({"name": name, "load": {"mode": "closed", "sessions": sessions}}),
        encoding="utf-8",
    )
    if ios_per_op is not None:
        analysis = {"schema": 1, "primary_device": device,
                    "io_per_op": {"device_ios_per_op": ios_per_op}}  # fmt: skip
        (path / "analysis.json").write_text(json.dumps(analysis), encoding="utf-8")
    return path


def write_series(path: Path, summary: dict[str, Any], noise_pct: float) -> None:
    """timeseries/ops.csv and block.csv of 10 measured one-second intervals around the
    summary's figures."""
    (path / "timeseries").mkdir()
    ops_lines = ["t,interval,phase,step,op,ops_s,count,errors,p50_us,p99_us"]
    block_lines = ["t,interval,phase,entity,r_s,w_s,iops,r_await_ms,w_await_ms"]
    [(device, means)] = summary["storage"]["block"].items()
    for i in range(10):
        f = 1 + (noise_pct / 100) * (1 if i % 2 else -1) * (1 + (i % 3) / 2)
        for op, s in summary["operations"].items():
            ops_s = s["ops_s"] * f
            ops_lines.append(f"{i + 1},{i},measure,,{op},{ops_s},{ops_s},0,"
                             f"{s['p50_us'] * f},{s['p99_us'] * f}")  # fmt: skip
        iops = means["iops"] * f
        block_lines.append(f"{i + 1},{i},measure,{device},{iops},0,{iops},"
                           f"{means['r_await_ms'] * f},0")  # fmt: skip
    for name, lines in (("ops", ops_lines), ("block", block_lines)):
        (path / "timeseries" / f"{name}.csv").write_text("\n".join(lines) + "\n")


def row(result: dict[str, Any], metric: str, scope: str | None = None) -> dict[str, Any]:
    [found] = [
        r
        for r in result["rows"]
        if r["metric"] == metric and (scope is None or r["scope"] == scope)
    ]
    return found


# --------------------------------------------------------------------------- verdicts


def test_a_run_against_itself_is_equivalent(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    result = compare(base, base)
    assert result["verdict"]["call"] == "equivalent"
    assert result["verdict"]["decided_by"] == []
    assert all(r["delta"] == 0 for r in result["rows"])
    assert result["notes"] == []


def test_a_p99_regression_beyond_the_threshold_is_worse(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", read=(1000.0, 200, 2400))
    result = compare(base, cand)
    p99 = row(result, "p99_us", "read")
    assert (p99["delta"], p99["delta_pct"], p99["change"]) == (400, 20.0, "worse")
    assert result["verdict"]["call"] == "worse"
    assert result["verdict"]["decided_by"] == [
        "read p99 +20.0 % (threshold 10 %, 95 % CI of the ratio 1.18-1.22)"
    ]
    assert p99["ratio"] == pytest.approx(1.2) and p99["significant"] is True
    assert p99["batches"] == [10, 10]  # 10 intervals, alternating: one per batch


def test_a_change_beyond_the_threshold_within_the_noise_is_no_significant_difference(
    tmp_path: Path,
) -> None:
    base = bundle(tmp_path, "base", noise_pct=40)
    cand = bundle(tmp_path, "cand", read=(1000.0, 200, 2400), noise_pct=40)
    result = compare(base, cand)
    p99 = row(result, "p99_us", "read")
    assert p99["change"] == "no significant difference"
    assert p99["ci95"][0] < 1 < p99["ci95"][1]
    assert result["verdict"]["call"] == "no significant difference"
    [why] = result["verdict"]["decided_by"]
    assert why.startswith("read p99 +20.0 % (threshold 10 %, 95 % CI of the ratio 0.")
    assert result["verdict"]["explanations"] == {
        "within the noise": "beyond the threshold, but the ratio's 95 % interval includes 1 "
        "(run-to-run noise)"
    }


def test_without_per_interval_series_nothing_is_significant(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", read=(1000.0, 200, 2400))
    for path in (cand / "timeseries").iterdir():
        path.unlink()
    result = compare(base, cand)
    # Beyond the threshold, but nothing to weigh it against: said so, never called noise.
    assert row(result, "p99_us", "read")["change"] == "undetermined (no interval)"
    assert result["verdict"]["call"] == "undetermined (no interval)"
    assert result["candidate"]["intervals"] is None
    assert any(n.startswith("the candidate has no per-interval series") for n in result["notes"])


def test_within_the_threshold_is_equivalent(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", read=(980.0, 210, 2150))
    result = compare(base, cand)
    assert result["verdict"]["call"] == "equivalent"
    assert row(result, "ops_s", "read")["change"] == "within"


def test_higher_throughput_and_lower_await_are_better(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", read=(1200.0, 200, 2000), r_await=0.5)
    result = compare(base, cand)
    assert result["verdict"]["call"] == "better"
    assert row(result, "ops_s", "read")["change"] == "better"
    assert row(result, "await_ms")["delta_pct"] == -50.0
    assert len(result["verdict"]["decided_by"]) == 2


def test_one_regression_outweighs_improvements(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", read=(2000.0, 100, 1000), r_await=1.5)  # await +50 %
    result = compare(base, cand)
    assert result["verdict"]["call"] == "worse"
    assert result["verdict"]["decided_by"] == [
        "vda await +50.0 % (threshold 20 %, 95 % CI of the ratio 1.48-1.52)"
    ]


def test_a_threshold_of_none_reports_without_judging(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", read=(1000.0, 200, 4000))
    result = compare(base, cand, Thresholds(max_p99_regression_pct=None))
    assert row(result, "p99_us", "read")["change"] == "not judged"
    assert result["verdict"]["call"] == "equivalent"


def test_only_the_named_operations_are_judged(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", read=(1000.0, 200, 4000))
    result = compare(base, cand, Thresholds(ops=["update", "scan"]))
    assert row(result, "p99_us", "read")["change"] == "not judged"
    assert result["verdict"]["call"] == "equivalent"
    assert any("scan" in note for note in result["notes"])


def test_storage_rows_compare_each_runs_main_device(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base", device="sda", iops=1000, ios_per_op=0.9)
    cand = bundle(tmp_path, "cand", device="nvme0n1", iops=1100, ios_per_op=0.9)
    result = compare(base, cand)
    iops = row(result, "device_iops")
    assert iops["scope"] == "sda → nvme0n1" and iops["delta_pct"] == 10.0
    assert iops["change"] == "not judged"  # IOPS alone says little: off by default
    assert row(result, "ios_per_op")["delta"] == 0
    assert result["baseline"]["device"] == "sda" and result["candidate"]["device"] == "nvme0n1"


@pytest.mark.parametrize(
    ("changes", "caveat"),
    [
        ({"summary": {"cache": {"data_bytes": 2**30}}}, "data size (bytes) differs (None → 1,073,741,824)"),
        ({"summary": {"mix": {"requested_pct": {"read": 50}}}}, "operation mix (requested %) differs"),
        ({"summary": {"scenario": {"workload": "ssb", "target": "sqlite"}}}, "workload differs (slob → ssb)"),
        ({"summary": {"timing": {"measured_s": 4.0}}}, "measured time (s) differs (10 → 4): the candidate"),
        ({"parameters": {"scale": "1G"}}, "workload parameter scale differs (None → 1G)"),
    ],
)  # fmt: skip
def test_a_caveat_that_matters_makes_the_comparison_invalid(
    tmp_path: Path, changes: dict[str, Any], caveat: str
) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", sessions=changes.get("sessions", 4))
    edit(cand, changes)
    result = compare(base, cand)
    assert result["verdict"]["call"] == "invalid"
    assert any(line.startswith(caveat) for line in result["verdict"]["decided_by"]), result
    assert all(c["invalidates"] for c in result["caveats"])


def test_a_somewhat_shorter_run_is_a_caveat_but_not_invalid(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand")
    edit(cand, {"summary": {"timing": {"measured_s": 8.0}}})
    result = compare(base, cand)
    assert result["verdict"]["call"] == "equivalent"
    assert result["notes"] == [
        "measured time (s) differs (10 → 8): the shorter run's figures are noisier"
    ]


def edit(path: Path, changes: dict[str, Any]) -> None:
    """Change a hand-written bundle's summary, scenario load or workload parameters."""
    summary = json.loads((path / "summary.json").read_text())
    summary.update(changes.get("summary", {}))
    (path / "summary.json").write_text(json.dumps(summary))
    scenario = yaml.safe_load((path / "scenario.yaml").read_text())
    scenario["load"].update(changes.get("load", {}))
    if "parameters" in changes:
        scenario["workload"] = {"name": "slob", "parameters": changes["parameters"]}
    (path / "scenario.yaml").write_text(yaml.safe_dump(scenario))


def test_ios_per_op_without_analysis_comes_from_the_means(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base", iops=1100)  # 1,100 IOPS for 10 s over 11,000 ops
    assert row(compare(base, base), "ios_per_op")["baseline"] == pytest.approx(1.0)


def test_an_unfinished_run_gets_a_note(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", status="interrupted")
    assert "the candidate run did not complete (status interrupted)" in compare(base, cand)["notes"]


def test_not_a_bundle_names_the_role(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    with pytest.raises(ConfigError, match=r"^candidate: .* is not a run bundle \(no such"):
        compare(base, tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"^baseline: .* \(no summary.json in it\)"):
        compare(tmp_path / "empty", base)
    failed = tmp_path / "failed"
    failed.mkdir()
    (failed / "summary.json").write_text('{"status": "failed"}', encoding="utf-8")
    with pytest.raises(ConfigError, match="no measured operations"):
        compare(base, failed)


# --------------------------------------------------------------------------- thresholds


def test_thresholds_file_and_options(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("max_p99_regression_pct: 25\nmax_await_regression_pct: null\n")
    limits = load_thresholds(path, {"max_p99_regression_pct": 30, "max_p50_regression_pct": None})
    assert limits.max_p99_regression_pct == 30  # the option wins over the file
    assert limits.max_await_regression_pct is None  # the file switched it off
    assert limits.max_p50_regression_pct == 10  # an option not given keeps the default


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max_p99_regression: 5\n", "max_p99_regression: Extra inputs are not permitted"),
        ("max_p99_regression_pct: -5\n", "max_p99_regression_pct: Input should be greater"),
        ("- 1\n", "thresholds are a mapping, got list"),
        ("a: [\n", "not valid YAML"),
    ],
)
def test_bad_thresholds_are_bad_input(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_thresholds(path)
    assert str(info.value).startswith(f"{path}: ") and expected in str(info.value)
    assert isinstance(info.value, ConfigError) and info.value.exit_code == 2


def test_a_missing_thresholds_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such thresholds file"):
        load_thresholds(tmp_path / "nope.yaml")
    assert issubclass(ScenarioError, ConfigError)


# --------------------------------------------------------------------------- output


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_is_self_contained_and_escapes_names(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand<script>alert(1)</script>", read=(1000.0, 200, 2400))
    html = render_html(compare(base, cand))
    page = Page()
    page.feed(html)
    tags = {tag for tag, _ in page.tags}
    assert "script" not in tags and "link" not in tags and "img" not in tags
    assert not any(k in ("src", "href") for _, attrs in page.tags for k in attrs)
    linked = html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # a namespace, not a request
    assert "http://" not in linked and "https://" not in linked and "url(" not in html
    assert "Content-Security-Policy" in html
    text = " ".join(page.text)
    assert "cand<script>" in text  # shown as text, escaped in the markup
    assert "read p99 +20.0 % (threshold 10 %, 95 % CI of the ratio 1.18-1.22)" in text
    assert "worse" in text and "figures: measured, over the measured window" in text


def test_table_rows_use_a_dbas_units(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", read=(1000.0, 200, 2400))
    result = compare(base, cand)
    rows = {(r[0], r[1]): r for r in table_rows(result)}
    low, high = row(result, "p99_us", "read")["ci95"]
    assert low < 1.2 < high
    assert rows[("read", "p99")][2:] == [
        "2.00 ms",
        "2.40 ms",
        "+20.0 %",
        f"{low:.3f}–{high:.3f}",
        "10 %",
        "worse",
    ]
    assert rows[("vda", "await")][2] == "1.00 ms"


def test_cli_exit_codes_json_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = bundle(tmp_path, "base")
    worse = bundle(tmp_path, "worse", read=(1000.0, 200, 2400))
    assert main(["compare", str(base), str(base)]) == 0
    assert "verdict: candidate equivalent" in capsys.readouterr().out
    out = tmp_path / "cmp.html"
    assert main(["compare", str(base), str(worse), "--json", "--html", str(out)]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"]["call"] == "worse" and result["html"] == str(out)
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert main(["compare", str(base), str(worse), "--max-p99-regression-pct", "25"]) == 0
    capsys.readouterr()
    other = bundle(tmp_path, "other", iops=5000, sessions=8)
    assert main(["compare", str(base), str(other)]) == 4
    out_lines = capsys.readouterr().out.splitlines()
    assert out_lines[0].startswith("comparison invalid: sessions differs (4 → 8)")
    assert any(
        line.startswith("verdict: candidate invalid (sessions differs") for line in out_lines
    )
    assert main(["compare", str(base), str(tmp_path / "nope")]) == 2
    assert "error: candidate: " in capsys.readouterr().err
    assert main(["compare", str(base), str(worse), "--max-p99-regression-pct", "-1"]) == 2
    bad = tmp_path / "t.yaml"
    bad.write_text("bogus: 1\n")
    assert main(["compare", str(base), str(worse), "--thresholds", str(bad)]) == 2
    assert f"error: {bad}: bogus: Extra inputs" in capsys.readouterr().err
