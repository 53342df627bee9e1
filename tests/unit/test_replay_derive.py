"""``dbsim replay`` on paper: the shape a profile gives, the fio job derived from it (parsed
by fio itself), fidelity's tolerances and causes, the verdict and headroom, and the refusals
of bad input (one line, exit 2). No device is touched here (tests/integration/
test_replay_fio.py replays on loop devices)."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sim.errors import ConfigError
from sim.profile import build_profile
from sim.replay import fidelity, verdict
from sim.replay.fiojob import MIN_DEPTH, derive, job_text, split_of
from sim.replay.plan import check_target, parse_scales
from sim.replay.shape import Shape, Window, production_window, shape_over
from tests.support.profile_bundles import block_rows, write_bundle

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _profile(series: dict[str, list[Any]]) -> dict[str, Any]:
    return {
        "bundle": "b",
        "devices": {"series": series},
        "peaks": {"busiest_minute": {"unresolved": "short"}},
    }


def _series() -> dict[str, list[Any]]:
    """Idle, a partial first interval, four busy ones, a partial last, idle."""
    reads = [0.0, 40.0, 300.0, 320.0, 280.0, 300.0, 60.0, 0.0]
    writes = [0.0, 10.0, 100.0, 100.0, 120.0, 80.0, 20.0, 0.0]
    n = len(reads)
    return {
        "t": [float(i + 1) for i in range(n)],
        "interval_s": [1.0] * n,
        "iops": [r + w for r, w in zip(reads, writes, strict=True)],
        "read_iops": reads,
        "write_iops": writes,
        "read_kib": [None, 8.0, 16.0, 24.0, 8.0, 16.0, 8.0, None],
        "write_kib": [None, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, None],
        "inflight_mean": [None, 1.0, 2.0, 2.0, 2.0, 2.0, 1.0, None],
        "seq_pct": [None, 0.0, 10.0, 10.0, 10.0, 10.0, 0.0, None],
        "read_size_kib_le_8": [None, 40, 200, 160, 280, 200, 60, None],
        "read_size_kib_le_64": [None, 0, 100, 160, 0, 100, 0, None],
        "write_size_kib_le_8": [None, 10, 100, 100, 120, 80, 20, None],
    }


def test_the_active_span_leaves_out_idle_and_partial_intervals() -> None:
    series = _series()
    shape = production_window(_profile(series))
    busy = range(2, 6)  # the active span is 1..6; its partial first and last go
    assert shape.window.intervals == 4
    assert shape.read_iops == pytest.approx(sum(series["read_iops"][i] for i in busy) / 4)
    assert shape.write_iops == pytest.approx(sum(series["write_iops"][i] for i in busy) / 4)
    kib = sum(series["read_kib"][i] * series["read_iops"][i] for i in busy)
    assert shape.read_kib == pytest.approx(kib / sum(series["read_iops"][i] for i in busy))
    assert shape.read_sizes == {
        "le_8": sum(series["read_size_kib_le_8"][i] for i in busy),
        "le_64": sum(series["read_size_kib_le_64"][i] for i in busy),
    }


def test_the_busiest_minute_is_the_window_when_the_profile_resolves_one(tmp_path: Path) -> None:
    factors = [1] * 200
    factors[100:160] = [3] * 60
    doc = build_profile(write_bundle(tmp_path, block_rows(START, 1.0, factors), 1.0))
    shape = production_window(doc)
    minute = doc["peaks"]["busiest_minute"]
    assert shape.window.how.startswith("the busiest minute")
    assert shape.window.seconds == pytest.approx(minute["seconds"])
    assert shape.iops == pytest.approx(minute["iops"]["value"], rel=1e-4)
    # Means only (no traced requests): one block size, the mean read size 4 KiB aligned.
    assert not shape.read_sizes and shape.inflight is None
    job = derive(shape, 1.0)
    read = next(d for d in job.directions if d.rw == "randread")
    assert read.split == ((max(4, round(shape.read_kib / 4) * 4), 100),)
    assert "no request-size histogram" in " ".join(job.rules)


def test_bssplit_keeps_power_of_two_sizes_that_match_the_mean() -> None:
    assert split_of({"le_8": 70, "le_64": 30}, 0.7 * 8 + 0.3 * 64) == ((8, 70), (64, 30))
    # A mean below the buckets' upper bounds scales the sizes down inside their buckets.
    split = split_of({"le_8": 70, "le_64": 30}, 20.0)
    assert all(4 < k <= 8 or 32 < k <= 64 for k, _ in split)
    mean = sum(k * p for k, p in split) / 100
    assert abs(mean - 20.0) < abs(24.8 - 20.0)
    assert split_of({}, 13.0) == ((12, 100),)  # no histogram: the mean, 4 KiB aligned


def _shape(read: float, write: float, read_kib: float = 16.0, write_kib: float = 8.0) -> Shape:
    window = Window(0.0, 10.0, 10.0, 10, "test")
    return Shape(
        window, read, write, read_kib, write_kib, {"le_8": 70, "le_64": 30}, {"le_8": 1}, 0.0, 1.5
    )


def test_the_job_scales_the_rates_and_depth_and_fio_accepts_it(tmp_path: Path) -> None:
    shape = _shape(300.0, 100.0)
    job = derive(shape, 2.0, {"read": {"iops": 1.1}})
    read, write = job.directions
    assert read.iops == pytest.approx(300.0 * 2 / 1.1) and write.iops == pytest.approx(200.0)
    assert read.depth == 5  # ceil(2 x 1.5 in flight x 2 x 300/400)
    assert write.depth == MIN_DEPTH  # ceil(2 x 1.5 x 2 x 100/400) = 2, raised to the least
    text = job_text(job, tmp_path / "f", 1 << 24, 5, 1)
    assert "rate_process=poisson" in text and f"rate_iops={round(read.iops)}" in text
    assert f"rate={round(write.iops * 8 * 1024)}" in text
    assert_fio_parses(text, tmp_path / "replay.fio")


def assert_fio_parses(text: str, path: Path) -> None:
    """fio itself reads the job file (``--parse-only``: nothing runs)."""
    if shutil.which("fio") is None:
        pytest.skip("!!! NOT RUN: fio is missing (its parse of the job)")
    path.write_text(text)
    parsed = subprocess.run(["fio", "--parse-only", str(path)], capture_output=True, text=True)
    assert parsed.returncode == 0, parsed.stderr


def test_fidelity_tolerances_and_the_causes() -> None:
    capture = _shape(300.0, 100.0)
    near = _shape(300.0 * 2 * 1.04, 100.0 * 2 * 0.96, 16.0 * 1.09, 8.0)
    judged = fidelity.judge(
        capture, near, 2.0, {"read": 624.0, "write": 192.0}, {"read": 600, "write": 200}
    )
    assert judged["faithful"], judged
    slow = _shape(400.0, 400.0 / 3)  # the read share kept: only the rates fall short
    judged = fidelity.judge(
        capture, slow, 2.0, {"read": 400.0, "write": 400.0 / 3}, {"read": 600, "write": 200}
    )
    assert not judged["faithful"] and judged["failed"] == ["read IOPS", "write IOPS"]
    assert judged["cause"].startswith("target too slow to deliver the asked IOPS")
    more = _shape(660.0, 200.0)
    judged = fidelity.judge(
        capture, more, 2.0, {"read": 600.0, "write": 200.0}, {"read": 600, "write": 200}
    )
    assert "more read IOPS than fio issued" in judged["cause"]
    bigger = _shape(600.0, 200.0, 16.0 * 1.2)
    judged = fidelity.judge(
        capture, bigger, 2.0, {"read": 600.0, "write": 200.0}, {"read": 600, "write": 200}
    )
    assert judged["failed"] == ["read size"] and "merged or split below fio" in judged["cause"]


def _entry(
    scale: float, faithful: bool, met: bool | None, cause: str | None = None
) -> dict[str, Any]:
    return {
        "scale": scale,
        "fidelity": {"faithful": faithful, "cause": cause},
        "verdict": {"slos_met": met} if faithful else None,
        "replay": {"read_iops": 250.0 * scale * 0.8, "write_iops": 0.0},
    }


def test_headroom_is_the_largest_faithful_scale_that_met_the_slos() -> None:
    scales = [
        _entry(1, True, True),
        _entry(2, True, True),
        _entry(3, False, None, "target too slow to …"),
    ]
    room = verdict.headroom(scales, 250.0)
    assert room["largest_passing_scale"] == 2
    assert room["ceiling"]["times_capture"] == pytest.approx(3 * 0.8)
    assert verdict.exit_code(scales) == verdict.EXIT_UNFAITHFUL
    assert verdict.exit_code(scales[:2]) == 0
    assert verdict.exit_code([_entry(1, True, True), _entry(2, True, False)]) == 1
    rows = verdict.scale_verdict(
        {"read_p99": 3.0}, {"read_p99": 2.5, "write_p99": 9.0}, {"read_p99": 2.0}
    )
    assert not rows["slos_met"] and rows["latency"][0]["production_ms"] == 3.0


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: parse_scales("1,x"), "--scale"),
        (lambda: parse_scales("0,2"), "above 0"),
        (lambda: verdict.parse_slos(["p99=2"]), "read_p99"),
        (lambda: verdict.parse_slos(["read_p99=fast"]), "not a number"),
    ],
)
def test_bad_options_are_one_clear_error(call: Any, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        call()


def test_targets_refused_name_why(tmp_path: Path) -> None:
    scenario = tmp_path / "db.yaml"
    scenario.write_text("target: {kind: postgres}\n")
    assert check_target(scenario) == scenario  # a database scenario (tests/unit/test_replay_db.py)
    with pytest.raises(ConfigError, match="neither it nor its parent"):
        check_target(tmp_path / "no" / "such")
    assert check_target(tmp_path / "new") == tmp_path / "new"


def test_the_cli_refuses_a_bad_bundle_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sim.cli.entry import main

    rc = main(["replay", str(tmp_path / "missing"), "--on", str(tmp_path / "t"), "--scale", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error:"), err


def test_the_shape_over_no_interval_is_refused() -> None:
    with pytest.raises(ConfigError, match="no interval"):
        shape_over(_series(), [], "nothing")
