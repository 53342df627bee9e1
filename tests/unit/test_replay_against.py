"""``dbsim compare CAPTURE REPLAY``'s arithmetic and its refusals, on hand-made series and
directories: each side's per-interval range and the 95 % interval of its mean (exact numbers),
the per-interval values as a window's figure weighs them, each kind of judged figure's
tolerance band (drawn as it was judged: the check's own), the paths ``replay.json`` names,
and the capture's identity (device and inode). The whole command on real captures and
replays: tests/integration/test_replay_fio.py and test_replay_files.py."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.replay import fidelity, fileplan
from sim.replay.against import check_identity, is_replay_dir, read_replay
from sim.replay.against_figures import FIGURES, differs, figure_row, shape_mismatches
from sim.replay.against_scale import _check_mismatches, file_row
from sim.replay.against_windows import Window as AgainstWindow
from sim.replay.against_windows import locate
from sim.replay.fidelity import Check
from sim.replay.filejob import shape_over as file_shape
from sim.replay.shape import Shape, Window
from sim.replay.spread import device_values, file_values, mean_interval, side, spread

T975_9 = 2.262  # Student's t, 9 degrees of freedom (sim.analysis.stats' table)


def test_spread_is_the_lowest_and_highest_interval() -> None:
    assert spread([3.0, None, 1.0, 2.5]) == (1.0, 3.0)
    assert spread([None, float("nan")]) is None


def test_mean_interval_from_ten_uncorrelated_intervals() -> None:
    # 1, 3, 1, 3 ...: no positive autocorrelation, so ten batches of one interval each; mean
    # 2, sample sd sqrt(10/9), standard error 1/3: 2 +- 2.262/3.
    low, high, batches = mean_interval([1.0, 3.0] * 5, [1.0] * 10) or (0, 0, 0)
    assert batches == 10
    assert low == pytest.approx(2 - T975_9 / 3, abs=1e-9)
    assert high == pytest.approx(2 + T975_9 / 3, abs=1e-9)


def test_side_scales_every_value_and_holds_the_mean_interval_at_zero() -> None:
    scaled = side([1.0, 3.0] * 5, [1.0] * 10, factor=2.0)
    assert (scaled.low, scaled.high, scaled.intervals) == (2.0, 6.0, 10)
    assert scaled.mean_low == pytest.approx(4 - 2 * T975_9 / 3, abs=1e-9)
    assert scaled.mean_high == pytest.approx(4 + 2 * T975_9 / 3, abs=1e-9)
    # Nine idle intervals and one of 10: mean 1, sd sqrt(10), standard error 1: 1 +- 2.262,
    # whose low end (-1.262) no rate can take.
    burst = side([0.0] * 9 + [10.0], [1.0] * 10)
    assert burst.mean_low == 0.0
    assert burst.mean_high == pytest.approx(1 + T975_9, abs=1e-9)


def test_a_shares_mean_interval_is_held_at_100() -> None:
    # Nine intervals at 100 % and one at 0: mean 90, sd sqrt(1000), standard error 10:
    # 90 +- 22.62, whose high end (112.62 %) no share can take.
    share = side([100.0] * 9 + [0.0], [1.0] * 10, ceiling=100.0)
    assert share.mean_high == 100.0
    assert share.mean_low == pytest.approx(90 - 10 * T975_9, abs=1e-9)
    assert side([100.0] * 9 + [0.0], [1.0] * 10).mean_high == pytest.approx(90 + 10 * T975_9)


def test_fewer_than_five_batch_means_give_no_interval() -> None:
    few = side([1.0, 2.0, 3.0, 4.0], [1.0] * 4)
    assert (few.low, few.high, few.mean_low, few.mean_high, few.batches) == (
        1.0, 4.0, None, None, 0
    )  # fmt: skip
    # A zero weight leaves its interval out (an interval without reads has no read size).
    assert side([5.0, 7.0], [0.0, 1.0]).intervals == 1


def test_device_values_weigh_as_the_window_does() -> None:
    series = {
        "t": [1.0, 2.0, 3.0],
        "interval_s": [1.0, 1.0, 2.0],
        "read_iops": [30.0, 0.0, 10.0],
        "write_iops": [10.0, 0.0, 30.0],
        "read_kib": [8.0, None, 16.0],
    }
    assert device_values(series, [0, 1, 2], "read_iops") == ([30.0, 0.0, 10.0], [1.0, 1.0, 2.0])
    shares, weights = device_values(series, [0, 1, 2], "read_pct")
    assert shares == [75.0, None, 25.0] and weights == [40.0, 0.0, 80.0]
    sizes, reads = device_values(series, [0, 2], "read_kib")
    assert sizes == [8.0, 16.0] and reads == [30.0, 20.0]
    # A column the profile does not have (no blocklatency: no p99) is all None.
    assert device_values(series, [0], "read_p99") == ([None], [30.0])


def test_file_values_per_interval() -> None:
    rows = [
        {"t": 1.0, "read_s": 30.0, "write_s": 10.0, "_read_b": 30.0 * 4096},
        {"t": 2.0, "read_s": 0.0, "write_s": 20.0},
    ]
    classes = ("READ", "WRITE")
    assert file_values(rows, "calls_s", classes) == ([40.0, 20.0], [1.0, 1.0])
    assert file_values(rows, "READ_share", classes) == ([75.0, 0.0], [40.0, 20.0])
    assert file_values(rows, "read_kib", classes) == ([4.0, None], [30.0, 0.0])


def _shape(read: float, write: float, seconds: float) -> Shape:
    return Shape(Window(0.0, seconds, seconds, int(seconds), "test"), read, write, 8.0, 8.0)


#: Just inside and just outside a band's end (relative to the band's larger end): far above
#: a float's rounding, far below any figure.
NUDGE = 1e-9


def _drawn(capture: Shape, replay: Shape, scale: float) -> dict[str, tuple[Check, object]]:
    """Per judged device figure the check that judged it and the band ``dbsim compare``
    draws and prints for it (its figure row's)."""
    found = {c.figure: c for c in fidelity.checks(capture, replay, scale)}
    sides = (_window(capture), _window(replay))
    rows = [figure_row(f, sides, scale, found) for f in FIGURES]
    return {r["check"]: (found[r["check"]], r["band"]) for r in rows if r["check"]}


def _window(shape: Shape) -> AgainstWindow:
    series = {"t": [1.0], "interval_s": [1.0], "read_iops": [shape.read_iops],
              "write_iops": [shape.write_iops], "read_kib": [shape.read_kib],
              "write_kib": [shape.write_kib]}  # fmt: skip
    return AgainstWindow(shape, series, [0])


def _judged_at(figure: str, drawn: object, judge: Callable[[float], Check]) -> None:
    """Just inside either end of the drawn band is ok, just outside is not, and each of those
    judgements carries that same band."""
    assert isinstance(drawn, list) and len(drawn) == 2
    low, high = drawn
    eps = NUDGE * max(abs(low), abs(high))
    for value, ok in (
        (low + eps, True),
        (high - eps, True),
        (low - eps, False),
        (high + eps, False),
    ):
        check = judge(value)
        assert check.figure == figure and check.ok is ok, (value, check, drawn)
        assert check.delivered == pytest.approx(value, rel=1e-12, abs=1e-12)
        assert list(check.band or ()) == drawn


def _check(capture: Shape, replay: Shape, scale: float, figure: str) -> Check:
    (check,) = [c for c in fidelity.checks(capture, replay, scale) if c.figure == figure]
    return check


def test_a_rates_band_is_widened_by_its_counts_poisson_interval() -> None:
    # 1 read/s over the capture's 100 s (100 reads) asked at 2x over the replay's 50 s (100):
    # 1.96 x sqrt(1/100 + 1/100) = 27.7 %, wider than the 5 %.
    capture = _shape(1.0, 100.0, 100.0)
    drawn = _drawn(capture, _shape(2.1, 201.0, 50.0), 2.0)
    check, band = drawn["read IOPS"]
    half = 1.96 * (2 / 100) ** 0.5
    assert check.tolerance == "±28 % Poisson"
    assert band == list(check.band or ()) == pytest.approx([2 * (1 - half), 2 * (1 + half)])
    _judged_at("read IOPS", band, lambda v: _check(capture, _shape(v, 201.0, 50.0), 2.0,
                                                   "read IOPS"))  # fmt: skip
    # 10,000 writes each side: Poisson's 2.8 % is narrower, the ±5 % holds.
    check, band = drawn["write IOPS"]
    assert check.tolerance == "±5 %" and band == pytest.approx([190.0, 210.0])
    _judged_at("write IOPS", band, lambda v: _check(capture, _shape(2.1, v, 50.0), 2.0,
                                                    "write IOPS"))  # fmt: skip


def test_a_share_is_judged_and_drawn_at_its_points() -> None:
    capture = _shape(300.0, 100.0, 100.0)  # 75 % reads
    check, band = _drawn(capture, _shape(300.0, 100.0, 100.0), 1.0)["read share"]
    assert check.tolerance == "±2 points" and band == [73.0, 77.0] == list(check.band or ())
    # The replay's read share is v % of 100 requests a second.
    _judged_at("read share", band, lambda v: _check(capture, _shape(v, 100.0 - v, 100.0), 1.0,
                                                    "read share"))  # fmt: skip


def test_a_size_is_judged_and_drawn_at_its_ten_percent() -> None:
    capture = _shape(300.0, 100.0, 100.0)  # 8 KiB both ways
    check, band = _drawn(capture, _shape(300.0, 100.0, 100.0), 1.0)["read size"]
    assert check.tolerance == "±10 %" and band == pytest.approx([7.2, 8.8])
    assert band == list(check.band or ())
    window = capture.window
    _judged_at("read size", band, lambda v: _check(capture, Shape(window, 300.0, 100.0, v, 8.0),
                                                   1.0, "read size"))  # fmt: skip


def test_a_direction_the_capture_did_not_have_is_drawn_at_its_stray_share() -> None:
    # Up to 1 % of the asked IOPS (101/s x 2) from 0 writes.
    capture = _shape(101.0, 0.0, 100.0)
    check, band = _drawn(capture, _shape(202.0, 0.5, 100.0), 2.0)["write IOPS"]
    assert check.tolerance == "≤ 1 % of asked"
    assert band == list(check.band or ()) == pytest.approx([0.0, 2.02])
    for value, ok in ((0.0, True), (2.02 * (1 - NUDGE), True), (2.02 * (1 + NUDGE), False)):
        judged = _check(capture, _shape(202.0, value, 100.0), 2.0, "write IOPS")
        assert judged.ok is ok and list(judged.band or ()) == band


def test_a_figure_not_judged_has_no_band_drawn() -> None:
    # 0.55 writes/s over 6 s: Poisson's ±153 %, not judged; nor is the mean of those writes.
    drawn = _drawn(_shape(275.0, 0.55, 6.0), _shape(275.0, 0.0, 6.0), 1.0)
    for figure in ("write IOPS", "write size"):
        check, band = drawn[figure]
        assert (check.tolerance, check.band, band) == ("not judged", None, None)
        assert check.as_dict()["band"] is None
    check, band = drawn["read IOPS"]
    assert check.as_dict()["band"] == band == list(check.band or ())


def _file_rows(scale: float, read_kib: float = 8.0, read_s: float = 90.0) -> list[dict[str, float]]:
    """Two ``fileops`` intervals of ``read_s`` reads (``read_kib`` each) and 100 - ``read_s``
    writes (4 KiB) per second, all times ``scale``."""
    reads, writes = read_s * scale, (100.0 - read_s) * scale
    return [
        {"t": t, "read_s": reads, "write_s": writes, "_read_b": reads * read_kib * 1024,
         "_write_b": writes * 4096}
        for t in (1.0, 2.0)
    ]  # fmt: skip


def _file_check(rows: list[dict[str, float]], figure: str) -> Check:
    """``figure``'s check of a replay of ``rows`` against :func:`_file_rows` (1) at 2x."""
    found = fileplan.checks(file_shape(_file_rows(1.0), "c"), file_shape(rows, "r"), 2.0)
    (check,) = [c for c in found if c.figure == figure]
    return check


def test_a_file_replays_calls_shares_and_sizes_are_drawn_as_judged() -> None:
    capture, replay = _file_rows(1.0), _file_rows(2.0)
    found = fileplan.checks(file_shape(capture, "c"), file_shape(replay, "r"), 2.0)
    drawn = {c.figure: file_row(c, capture, replay, 2.0)["band"] for c in found}
    assert drawn == {c.figure: list(c.band or ()) for c in found}
    assert drawn["calls/s"] == pytest.approx([190.0, 210.0])  # 100 calls/s x 2, ±5 %
    assert drawn["READ share"] == pytest.approx([88.0, 92.0])  # 90 %, ±2 points
    assert drawn["read size"] == pytest.approx([7.2, 8.8])  # 8 KiB, ±10 %
    _judged_at("calls/s", drawn["calls/s"], lambda v: _file_check(_file_rows(v / 100.0), "calls/s"))
    _judged_at("READ share", drawn["READ share"],
               lambda v: _file_check(_file_rows(2.0, read_s=v), "READ share"))  # fmt: skip
    _judged_at("read size", drawn["read size"],
               lambda v: _file_check(_file_rows(2.0, read_kib=v), "read size"))  # fmt: skip


def test_a_stored_band_is_compared_and_an_older_replay_json_without_one_is_not() -> None:
    row = {"check": "read IOPS", "ok": True, "tolerance": "±5 %", "asked": 200.0,
           "replay": 201.0, "band": [190.0, 210.0]}  # fmt: skip
    stored = {"figure": "read IOPS", "ok": True, "tolerance": "±5 %", "expected": 200.0,
              "delivered": 201.0}  # fmt: skip
    assert _check_mismatches([row], {"read IOPS": stored}) == []  # written before the band
    assert _check_mismatches([row], {"read IOPS": dict(stored, band=[190.0, 210.0])}) == []
    assert _check_mismatches([row], {"read IOPS": dict(stored, band=[180.0, 220.0])}) == [
        "read IOPS: recomputed band [190.0, 210.0], replay.json [180.0, 220.0]"
    ]
    assert _check_mismatches([row], {"read IOPS": dict(stored, band=None)}) != []
    assert _check_mismatches([row], {"read IOPS": dict(stored, band="x")}) != []


def test_a_recomputed_figure_differs_only_beyond_rounding() -> None:
    assert not differs(100.0, 100.0 * (1 + 1e-9)) and differs(100.0, 100.01)
    assert differs(None, 1.0) and not differs(None, None)
    ours = _shape(10.0, 5.0, 10.0).as_dict()
    stored = dict(ours, write_iops=5.5)
    assert shape_mismatches("replay", ours, ours) == []
    assert shape_mismatches("replay", ours, stored) == [
        "replay write IOPS: recomputed 5, replay.json 5.5"
    ]
    latency = dict(ours, latency_ms={"read_p99": 1.0})
    assert shape_mismatches("capture", latency, ours) == [
        "capture read p99: recomputed 1, replay.json none"
    ]


def test_locate_reads_names_from_where_the_replay_ran(tmp_path: Path) -> None:
    replay = tmp_path / "work" / "replays" / "20261207-1-replay"
    doc = {"directory": "replays/20261207-1-replay"}
    # Under the replay's own directory: there, as it is now (even moved).
    assert locate("replays/20261207-1-replay/1x", doc, replay) == replay / "1x"
    # A relative capture: from the directory the replay ran in (work/), not from here.
    assert locate("captures/c", doc, replay) == tmp_path / "work" / "captures" / "c"
    assert locate("/abs/c", doc, replay) == Path("/abs/c")
    # The replay's directory does not end as replay.json wrote it: read from here.
    assert locate("captures/c", doc, tmp_path / "moved") == Path(os.path.abspath("captures/c"))


def _replay_dir(tmp_path: Path, capture: str) -> Path:
    replay = tmp_path / "replays" / "x-replay"
    replay.mkdir(parents=True)
    doc = {"directory": "replays/x-replay", "capture": {"bundle": capture}, "scales": []}
    (replay / "replay.json").write_text(json.dumps(doc))
    return replay


def test_the_capture_is_told_by_device_and_inode(tmp_path: Path) -> None:
    (tmp_path / "captures" / "c").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    os.symlink(tmp_path / "captures" / "c", tmp_path / "link")
    replay = _replay_dir(tmp_path, str(tmp_path / "captures" / "c"))
    doc = read_replay(replay)
    assert check_identity(tmp_path / "link", doc, replay) == tmp_path / "captures" / "c"
    with pytest.raises(ConfigError, match="is not the capture"):
        check_identity(tmp_path / "other", doc, replay)
    # The same name, another directory: not the capture (the name is not what is compared).
    os.rename(tmp_path / "captures" / "c", tmp_path / "captures" / "old")
    (tmp_path / "captures" / "c").mkdir()
    (tmp_path / "link").unlink()
    os.symlink(tmp_path / "captures" / "old", tmp_path / "link")
    with pytest.raises(ConfigError, match="is not the capture"):
        check_identity(tmp_path / "link", doc, replay)


def test_a_replay_directory_without_a_readable_document_is_bad_input(tmp_path: Path) -> None:
    named = tmp_path / "20261207-000000-replay"
    named.mkdir()
    assert is_replay_dir(named) and not is_replay_dir(tmp_path)
    with pytest.raises(ConfigError, match="replay"):
        read_replay(named)
    (named / "replay.json").write_text("{")
    with pytest.raises(ConfigError, match="JSON"):
        read_replay(named)
    (named / "replay.json").write_text('{"scales": "none"}')
    with pytest.raises(ConfigError, match="not a replay document"):
        read_replay(named)


def test_cli_another_capture_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "captures" / "c").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    replay = _replay_dir(tmp_path, str(tmp_path / "captures" / "c"))
    assert main(["compare", str(tmp_path / "other"), str(replay)]) == 2
    said = capsys.readouterr()
    assert said.out == "" and len(said.err.strip().splitlines()) == 1, said.err
    assert "is not the capture" in said.err and "Traceback" not in said.err
    assert main(["compare", str(tmp_path / "captures" / "c"), str(replay), "--thresholds",
                 str(tmp_path / "t.yaml")]) == 2  # fmt: skip
    assert "thresholds judge runs" in capsys.readouterr().err
