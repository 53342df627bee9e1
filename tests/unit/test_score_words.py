"""The EDA score said in words: the console line and the report's table, from the workload's
own scoring of hand-made load points (workloads/eda/workload.py's score_load_points)."""

from __future__ import annotations

from sim.judge.score import SCORE_HEADERS, score_line, score_rows
from workloads.eda.workload import LoadPoint, score_load_points


def point(step: int, requested: float, achieved_ops: int, latency_us: float) -> LoadPoint:
    # Two sessions over 10 s, half the rate each; 1 MB per op.
    return LoadPoint(
        step=step,
        duration_s=10.0,
        session_ops=[achieved_ops // 2, achieved_ops - achieved_ops // 2],
        requested_ops_s=[requested / 2, requested / 2],
        op_counts={"read": achieved_ops},
        op_mean_us={"read": latency_us},
        bytes_per_op={"read": 1e6},
    )


def test_the_line_names_the_highest_valid_point_and_the_overall_response_time() -> None:
    # 100 ops/s asked, 100 done (valid); 200 asked, 196 done (98 %: valid); 400 asked, 300
    # done (75 % overall: not valid).
    score = score_load_points(
        [point(0, 100, 1000, 2000), point(1, 200, 1960, 4000), point(2, 400, 3000, 9000)], 2
    )
    line = score_line(score)
    assert line is not None
    assert line.startswith("score: highest valid load point step 2: 196.0 ops/s, 196.0 MB/s")
    assert "mean latency 4.000 ms" in line and "3 load points judged" in line
    # Overall response time: flat at 2 ms to 100 ops/s, then linear to 4 ms at 196 ops/s:
    # (100 * 2 + 96 * 3) / 196 = 2.490 ms.
    assert "overall response time 2.490 ms" in line
    assert "rule: valid when every process >= 75 %" in line
    rows = score_rows(score)
    assert [r[5] for r in rows] == ["valid", "valid", "NOT valid"]
    assert rows[2][:5] == ["3", "1.00", "400.0", "300.0", "75.0 %"]
    assert len(SCORE_HEADERS) == len(rows[0])


def test_closed_loop_points_are_not_judged_and_the_line_says_why() -> None:
    closed = LoadPoint(None, 10.0, [50, 50], None, {"read": 100}, {"read": 1000.0}, {})
    line = score_line(score_load_points([closed], 2))
    assert line is not None and "none at a requested rate: validity needs mode: open" in line
    assert score_line(None) is None and score_line({"other": 1}) is None


def test_no_valid_point_is_said_so() -> None:
    line = score_line(score_load_points([point(0, 400, 1000, 9000)], 2))
    assert line is not None and line.startswith("score: no valid load point (1 judged)")
