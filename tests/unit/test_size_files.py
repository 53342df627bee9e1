"""Sizing a file-tree (EDA) run in its own units (storage.envelopes.fileload): the NFS client's
calls when the tree was on NFS, else the score's load point, never a block device; and the
percentages and page citations of the answer (storage.envelopes.units, .pages)."""

from __future__ import annotations

from typing import Any

import pytest

from sim import registry
from sim.errors import ConfigError
from storage.envelopes import get_envelope, size
from storage.envelopes.fileload import FILE_OPS, NFS_OPS, file_workload, is_file_run
from storage.envelopes.pages import english_sections, figures, reader_number
from storage.envelopes.units import growth, pct
from workloads.eda.workload import LoadPoint, score_load_points

MIB = 2**20


def _point(step: int | None, job_sets: int, per_second: float, valid: bool) -> LoadPoint:
    """A load point of ``job_sets`` job sets (5 processes each) over 10 s: ``per_second``
    operations a second in all (60 % stat, 40 % write_file), 10 MiB/s; each process at its
    asked rate when ``valid``, at half of it when not."""
    sessions = 5 * job_sets
    asked = [per_second / sessions] * sessions
    done = [r * 10 * (1.0 if valid else 0.5) for r in asked]
    total = sum(done)
    return LoadPoint(
        step=step,
        duration_s=10.0,
        session_ops=[round(n) for n in done],
        requested_ops_s=asked,
        op_counts={"stat": round(total * 0.6), "write_file": round(total * 0.4)},
        op_mean_us={"stat": 30.0, "write_file": 300.0},
        bytes_per_op={"write_file": 100 * MIB / round(total * 0.4)},
    )


def _summary(points: list[LoadPoint]) -> dict[str, Any]:
    return {
        "target": {"kind": "filetree"},
        "operations": {"stat": {"ops_s": 60.0}, "write_file": {"ops_s": 40.0}},
        "storage": {"block": {"vda": {"r_s": 5.0, "w_s": 300.0, "rkB_s": 1.0, "wkB_s": 9.0}}},
        "workload": {"score": score_load_points(points, 5)},
    }


def test_one_load_point_is_sized_by_its_file_operations() -> None:
    summary = _summary([_point(None, 1, 450.0, True)])
    assert is_file_run(summary)
    workload = file_workload(summary, "run1", None)
    assert workload.op_unit == FILE_OPS
    assert workload.total_iops == pytest.approx(450.0)
    assert workload.read_fraction == pytest.approx(0.6)  # stat reads, write_file changes
    assert workload.total_mibps == pytest.approx(10.0)
    assert "1 job set(s), valid" in workload.note and "device" not in workload.origin


def test_a_stepped_run_takes_the_highest_valid_step_or_the_one_asked() -> None:
    points = [_point(0, 1, 450.0, True), _point(1, 2, 900.0, True)]
    workload = file_workload(_summary(points), "run2", None)
    assert workload.total_iops == pytest.approx(900.0)
    assert "step 2 (the highest valid load point)" in workload.origin
    assert "2 job set(s), valid" in workload.note
    first = file_workload(_summary(points), "run2", 1)
    assert first.total_iops == pytest.approx(450.0) and "chosen with --step" in first.origin
    with pytest.raises(ConfigError, match=r"has steps 1\.\.2"):
        file_workload(_summary(points), "run2", 3)
    short = [_point(0, 1, 450.0, False), _point(1, 2, 900.0, False)]
    with pytest.raises(ConfigError, match=r"none is valid: give --step 1\.\.2"):
        file_workload(_summary(short), "run3", None)


def test_an_nfs_tree_is_sized_by_the_nfs_clients_calls() -> None:
    source = registry.collector_with_role(registry.ROLE_NFS)
    assert source is not None
    summary = _summary([_point(None, 1, 450.0, True)])
    summary["storage"][source] = {
        "/mnt/eda": {"ops_s": 900.0, "read_kB_s": 2048.0, "write_kB_s": 1024.0},
        "/mnt/eda:GETATTR": {"ops_s": 600.0},
        "/mnt/eda:WRITE": {"ops_s": 200.0},
        "/mnt/eda:SETATTR": {"ops_s": 100.0},
    }
    workload = file_workload(summary, "run4", None)
    assert workload.op_unit == NFS_OPS and "NFS mount /mnt/eda" in workload.origin
    assert (workload.read_iops, workload.write_iops) == (600.0, 300.0)
    assert workload.total_mibps == pytest.approx(3.0)
    # Against the EDA envelope: the demand is the NFS calls, far under 1,350,000.
    answer = size(get_envelope("gcnv-large-volume-eda"), workload)
    iops = next(c for c in answer.checks if c.limit.kind == "iops")
    assert iops.demand == pytest.approx(900.0) and answer.fits is True


@pytest.mark.parametrize(
    ("utilisation", "text"),
    [(0.872, "can grow 14.7 %"), (0.3, "could carry about 3.3 times its load"),
     (0.0525, "could carry about 19 times its load"),
     (0.00345, "could carry about 290 times its load"),
     (0.0000525, "could carry more than 1,000 times its load")],
)  # fmt: skip
def test_growth_is_bounded_and_rounded(utilisation: float, text: str) -> None:
    assert growth(utilisation) == text


def test_percentages_as_a_person_writes_them() -> None:
    assert [pct(v) for v in (0.0, 0.00525, 87.24, 99.995, 1250.4)] == [
        "0 %", "under 0.1 %", "87.2 %", "over 99.9 %", "1,250 %",
    ]  # fmt: skip


def test_the_pages_figures_and_sections_in_the_readers_words() -> None:
    env = get_envelope("gcnv-large-volume-eda")
    seed = env.seeds["000_86fde6e6690b0d9c.txt"]
    assert reader_number("1.350.000", seed) == "1,350,000"
    assert reader_number("21,5", seed) == "21.5"
    assert reader_number("~140.000", seed) == "~140,000"
    cited = [
        "seed 000_86fde6e6690b0d9c.txt › Benchmarks de carga de trabalho de automação de "
        "projeto eletrônico (line 393): «até 21,5 GiBps e até 1.350.000 IOPS»"
    ]
    assert figures(cited, seed) == ["21.5 GiBps", "1,350,000 IOPS"]
    assert english_sections(cited, seed) == ["Electronic design automation workload benchmarks"]
