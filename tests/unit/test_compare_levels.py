"""``dbsim compare`` as a person reads it, on hand-written bundles: repeated runs of each side
combined into one interval, runs at other load levels (sessions, load steps) matched by
delivered IOPS, the caveats of both runs first, the CSV, the 80-column console and the
``vs`` form of the command line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from sim.cli import main
from sim.judge.compare import compare, compare_runs
from sim.report.compare import render_csv, render_html
from tests.unit.test_compare import bundle, row


def bundles(root: Path, prefix: str, count: int, **kwargs: Any) -> list[Path]:
    return [bundle(root, f"{prefix}{i}", **kwargs) for i in range(count)]


def not_exercised(path: Path, reason: str) -> None:
    summary = json.loads((path / "summary.json").read_text())
    summary["cache"] = {"exercised": {"exercised": False, "reason": reason}}
    (path / "summary.json").write_text(json.dumps(summary))


def stepped(path: Path, factors: tuple[float, float]) -> Path:
    """Make a bundle's 10 intervals two load steps: the first five at its figures times
    ``factors[0]``, the last five times ``factors[1]`` (IOPS and ops/s; latencies too)."""
    series = path / "timeseries"
    for name in ("ops", "block"):
        lines = (series / f"{name}.csv").read_text().splitlines()
        header, rows = lines[0].split(","), [line.split(",") for line in lines[1:]]
        for cells in rows:
            step = 0 if int(cells[1]) < 5 else 1
            for i, column in enumerate(header):
                if column in ("ops_s", "count", "p50_us", "p99_us", "iops", "r_s"):
                    cells[i] = str(float(cells[i]) * factors[step])
            if "step" in header:
                cells[header.index("step")] = str(step)
        text = "\n".join([",".join(header), *(",".join(c) for c in rows)]) + "\n"
        (series / f"{name}.csv").write_text(text)
    return path


# --------------------------------------------------------------------------- repeated runs


def test_repeated_runs_of_each_side_are_combined_into_one_interval(tmp_path: Path) -> None:
    bases = bundles(tmp_path, "a", 3)
    cands = bundles(tmp_path, "b", 3, read=(1000.0, 200, 2400))
    result = compare_runs(bases, cands)
    p99 = row(result, "p99_us", "read")
    assert p99["batches"] == [30, 30]  # ten batch means of each of three runs, pooled
    assert p99["change"] == "worse" and p99["ratio"] == pytest.approx(1.2)
    assert result["verdict"]["call"] == "worse"
    assert [r["run"] for r in result["baseline"]["runs"]] == ["a0", "a1", "a2"]
    assert result["baseline"]["run"] == "a0 (+2 repeats)"
    assert result["baseline"]["intervals"] == 30 and result["caveats"] == []


def test_a_run_to_run_difference_widens_the_combined_interval(tmp_path: Path) -> None:
    # Each baseline run is steady within itself, but the three disagree by ±30 %: the
    # batch means alone would call +10 % significant; the runs' own spread must not.
    bases = [
        bundle(tmp_path, f"a{i}", read=(1000.0, 200, p99))
        for i, p99 in enumerate((1400.0, 2000.0, 2600.0))
    ]
    cands = bundles(tmp_path, "b", 3, read=(1000.0, 200, 2200))
    p99 = row(compare_runs(bases, cands), "p99_us", "read")
    assert p99["delta_pct"] == pytest.approx(10.0)
    assert p99["ci95"] is None or p99["ci95"][0] < 1 < p99["ci95"][1], p99
    assert p99["change"] != "worse"
    one = row(compare(bases[1], cands[1]), "p99_us", "read")
    assert one["significant"] is True  # one run against one: a tight, significant +10 %


def test_repeated_runs_must_differ_in_nothing_but_their_load(tmp_path: Path) -> None:
    bases = bundles(tmp_path, "a", 2)
    summary = json.loads((bases[1] / "summary.json").read_text())
    summary["scenario"]["workload"] = "ssb"
    (bases[1] / "summary.json").write_text(json.dumps(summary))
    result = compare_runs(bases, [bundle(tmp_path, "b")])
    assert result["verdict"]["call"] == "invalid"
    assert result["verdict"]["decided_by"][0].startswith(
        "the baseline runs differ: workload differs (slob → ssb)"
    )


# --------------------------------------------------------------------------- load levels


def test_runs_at_other_sessions_are_compared_at_the_matched_delivered_iops(
    tmp_path: Path,
) -> None:
    base = bundle(tmp_path, "base", sessions=4, iops=1500)
    cand = bundle(tmp_path, "cand", sessions=8, iops=1600, read=(1000.0, 200, 3000))
    result = compare(base, cand)
    assert result["levels"]["matched"] == 1
    [p99] = [r for r in result["rows"] if r["metric"] == "p99_us" and "read" in r["scope"]]
    assert p99["scope"].startswith("@ 1,") and p99["scope"].endswith(" IOPS read")
    assert p99["level"] == {"baseline": "sessions 4", "candidate": "sessions 8"}
    assert p99["change"] == "worse" and p99["delta_pct"] == pytest.approx(50.0, abs=0.5)
    iops = row(result, "device_iops")
    assert iops["change"] == "not judged" and iops["candidate"] == pytest.approx(1599, abs=2)
    [sessions] = [c for c in result["caveats"] if c["what"] == "sessions"]
    assert not sessions["invalidates"]
    assert sessions["text"] == (
        "sessions differs (4 → 8): compared at load levels matched by delivered load"
    )
    assert result["verdict"]["call"] == "worse"


def test_a_sweep_of_each_side_matches_only_levels_within_15_percent(tmp_path: Path) -> None:
    bases = [
        bundle(tmp_path, "a4", sessions=4, iops=1000),
        bundle(tmp_path, "a8", sessions=8, iops=2000),
    ]
    cands = [
        bundle(tmp_path, "b4", sessions=4, iops=1050),
        bundle(tmp_path, "b8", sessions=8, iops=3000),  # the new volume carries more
    ]
    result = compare_runs(bases, cands)
    assert result["levels"]["matched"] == 1
    assert {r["level"]["baseline"] for r in result["rows"]} == {"sessions 4"}
    unmatched = [n for n in result["notes"] if "has no level of the other side" in n]
    assert len(unmatched) == 2, result["notes"]
    assert any(n.startswith("the candidate level sessions 8 (2,9") for n in unmatched)


def test_load_steps_are_levels(tmp_path: Path) -> None:
    base = stepped(bundle(tmp_path, "base", iops=1000), (1.0, 2.0))
    cand = stepped(bundle(tmp_path, "cand", iops=1000, read=(1000.0, 200, 2400)), (1.0, 2.0))
    result = compare(base, cand)
    assert result["levels"]["matched"] == 2
    labels = [r["level"]["baseline"] for r in result["rows"] if r["metric"] == "device_iops"]
    assert labels == ["step 1 of sessions 4", "step 2 of sessions 4"]
    p99 = [r for r in result["rows"] if r["metric"] == "p99_us" and "read" in r["scope"]]
    assert [r["delta_pct"] for r in p99] == [pytest.approx(20.0, abs=0.5)] * 2


def test_no_matched_level_is_no_comparison(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base", sessions=4, iops=1000)
    cand = bundle(tmp_path, "cand", sessions=8, iops=5000)
    result = compare(base, cand)
    assert result["verdict"]["call"] == "invalid"
    [why] = result["verdict"]["decided_by"]
    assert why.startswith(
        "sessions differs (4 → 8): no load level of one side delivered within 15 % of the "
        "load of one of the other (baseline "
    ), why


# --------------------------------------------------------------------------- caveats first


def test_both_runs_not_exercised_is_said_first_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = bundle(tmp_path, "base"), bundle(tmp_path, "cand")
    not_exercised(base, "vda read 0.2/s against 1,000 reading operations/s")
    not_exercised(cand, "vda read 0.1/s against 1,010 reading operations/s")
    result = compare(base, cand)
    [first, *_] = result["caveats"]
    assert first["what"] == "storage not exercised" and first["run"] == "both"
    assert first["text"].startswith(
        "both runs: storage not exercised, so the figures compare caches, not storage "
        "(baseline: vda read 0.2/s"
    )
    assert main(["compare", str(base), str(cand)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("caveat: both runs: storage not exercised")
    assert main(["compare", str(base), str(cand), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["caveats"][0]["run"] == "both"
    html = render_html(result)
    assert html.index("Both runs: storage not exercised") < html.index("<h2>Figures</h2>")


def test_one_run_not_exercised_names_that_run(tmp_path: Path) -> None:
    base, cand = bundle(tmp_path, "base"), bundle(tmp_path, "cand")
    not_exercised(cand, "the data fits in the page cache")
    [caveat] = compare(base, cand)["caveats"]
    assert caveat["run"] == "candidate" and not caveat["invalidates"]
    assert caveat["text"] == (
        "the candidate run cand: storage not exercised, its figures are the caches' "
        "(the data fits in the page cache)"
    )


# --------------------------------------------------------------------------- output


def test_the_csv_has_one_row_per_figure_in_plain_numbers(tmp_path: Path) -> None:
    base = bundle(tmp_path, "base")
    cand = bundle(tmp_path, "cand", read=(1000.0, 200, 2400))
    result = compare(base, cand)
    rows = list(csv.DictReader(io.StringIO(render_csv(result))))
    assert len(rows) == len(result["rows"])
    p99 = next(r for r in rows if r["scope"] == "read" and r["figure"] == "p99")
    assert (p99["baseline"], p99["candidate"], p99["unit"]) == ("2000", "2400", "us")
    assert p99["verdict"] == "worse" and float(p99["ci95_low"]) > 1
    assert (p99["threshold"], p99["threshold_unit"]) == ("10", "%")


def test_the_console_fits_80_columns_and_says_each_reason_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    base = bundle(tmp_path, "base", noise_pct=40)
    cand = bundle(tmp_path, "cand", read=(1300.0, 300, 2600), noise_pct=40)
    csv_path = tmp_path / "out.csv"
    assert main(["compare", str(base), str(cand), "--csv", str(csv_path)]) == 0
    out = capsys.readouterr().out
    # The csv line names the file whole, however long tmp_path is (a parallel run's passes
    # 80 columns); every other line fits.
    lines = out.splitlines()
    assert f"csv: {csv_path}" in lines
    assert max(len(line) for line in lines if not line.startswith("csv: ")) <= 80, out
    assert "…" not in out
    result = compare(base, cand)
    for r in result["rows"]:  # every figure whole, in one cell of a folded table
        assert f" {r['scope']} " in out
    words = " ".join(out.split())  # the explanation may wrap
    assert words.count("includes 1 (run-to-run noise)") == 1, out
    assert words.count("95 % CI of the ratio") == 3, out  # the three rows beyond the noise
    assert "The candidate is undetermined" not in out and " than the baseline" not in out
    assert csv_path.read_text().startswith("scope,figure,unit,")


@pytest.mark.parametrize(
    "args",
    [["a", "b", "c"], ["vs", "b"], ["a", "vs"], ["a", "vs", "b", "vs", "c"], ["a"]],
)
def test_sides_that_are_not_two_are_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    base = bundle(tmp_path, "a")
    paths = [str(base) if a != "vs" else a for a in args]
    assert main(["compare", *paths]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: compare takes "), err


def test_the_vs_form_reads_both_sides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bases = bundles(tmp_path, "a", 2)
    cands = bundles(tmp_path, "b", 2, read=(1000.0, 200, 2400))
    code = main(["compare", *map(str, bases), "vs", *map(str, cands), "--json"])
    assert code == 1
    result = json.loads(capsys.readouterr().out)
    assert len(result["candidate"]["runs"]) == 2 and result["verdict"]["call"] == "worse"


def test_level_rows_with_long_scopes_still_fit_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # "@ 1,499 IOPS nvme0n1 → nvme1n1" is the widest key column; a header wider than its
    # cells ("ratio 95 % CI" over 11-character intervals) once pushed a part to 81.
    monkeypatch.setenv("COLUMNS", "80")
    base = bundle(tmp_path, "base", device="nvme0n1", sessions=4, iops=1500)
    cand = bundle(tmp_path, "cand", device="nvme1n1", sessions=8, iops=1550)
    assert main(["compare", str(base), str(cand)]) == 0
    out = capsys.readouterr().out
    assert "IOPS nvme0n1 → nvme1n1" in out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "…" not in out


def test_levels_use_one_load_unit_when_a_run_has_no_device(tmp_path: Path) -> None:
    # A file tree on tmpfs has no block device: both sides' levels are then matched by
    # ops/s, never the disk's IOPS against the other side's ops/s.
    base = bundle(tmp_path, "base", sessions=4, iops=5000)
    cand = bundle(tmp_path, "cand", sessions=8)
    summary = json.loads((cand / "summary.json").read_text())
    summary["storage"] = {}
    (cand / "summary.json").write_text(json.dumps(summary))
    (cand / "timeseries" / "block.csv").unlink()
    result = compare(base, cand)
    units = {v["load_unit"] for side in ("baseline", "candidate") for v in result["levels"][side]}
    assert units == {"ops/s"}
    assert result["levels"]["matched"] == 1
    assert result["verdict"]["call"] != "invalid"


def test_the_workloads_score_of_each_run_is_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = []
    for name, ort in (("base", 3.344), ("cand", 1.575)):
        path = bundle(tmp_path, name)
        summary = json.loads((path / "summary.json").read_text())
        point = {"step": 0, "mb_s": 22.0, "valid": True, "mean_latency_ms": ort}
        summary["workload"] = {"score": {"load_points": [point], "highest_valid": point,
                                         "overall_response_time_ms": ort}}  # fmt: skip
        (path / "summary.json").write_text(json.dumps(summary))
        runs.append(path)
    assert main(["compare", *map(str, runs)]) == 0
    words = " ".join(capsys.readouterr().out.split())
    assert (
        "score (the workload's own, measured): baseline highest valid – ops/s, overall "
        "response time 3.344 ms; candidate highest valid – ops/s, overall response time "
        "1.575 ms"
    ) in words
    html = render_html(compare(*runs))
    assert "<h2>Score</h2>" in html and "3.344" in html and "1.575" in html
