"""EDA rules without running anything: decks, exact mix counts, rates, validity, layout."""

from __future__ import annotations

import errno
import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from sim.errors import ConfigError, OwnershipError
from storage.targets.filetree import FileTreeTarget, mount_of, os_error_message
from storage.targets.settings import FileTreeSettings
from workloads.eda import tree as layout
from workloads.eda.deal import CREATE_FAMILY, deal
from workloads.eda.operations import Deck, count_dealt
from workloads.eda.parameters import BACKEND_MIX, FRONTEND_MIX, EdaParameters
from workloads.eda.workload import (
    EdaWorkload,
    LoadPoint,
    judge,
    overall_response_time,
    score_load_points,
)


def params(**values: object) -> EdaParameters:
    return EdaParameters.model_validate(values)


def workload(**values: object) -> EdaWorkload:
    target = FileTreeTarget(FileTreeSettings(path=Path("/nonexistent/eda")))
    return EdaWorkload(params(**values), target)


# --------------------------------------------------------------------------- decks


@pytest.mark.parametrize("mix", [FRONTEND_MIX, BACKEND_MIX, {"create": 5, "unlink": 3, "stat": 2}])
def test_every_deck_holds_the_mix_exactly_with_creates_before_removals(mix: dict[str, int]) -> None:
    for k in range(200):
        cards = deal(mix, f"seed:{k}")
        assert Counter(cards) == Counter({n: w for n, w in mix.items() if w})
        family = [c for c in cards if c in CREATE_FAMILY]
        creates = family.count("create")
        assert all(c == "create" for c in family[:creates])
        assert "create" not in family[creates:]


def test_decks_are_shuffled_per_deck_and_per_session_yet_reproducible() -> None:
    assert deal(FRONTEND_MIX, "a:0") == deal(FRONTEND_MIX, "a:0")
    assert deal(FRONTEND_MIX, "a:0") != deal(FRONTEND_MIX, "a:1")
    assert deal(FRONTEND_MIX, "a:0") != deal(FRONTEND_MIX, "b:0")


def test_counts_of_any_range_match_a_replay_of_the_deck() -> None:
    rng = random.Random(5)
    for mix in (FRONTEND_MIX, BACKEND_MIX, {"stat": 3, "create": 2, "unlink": 1, "readdir": 1}):
        deck = Deck(mix, "base")
        dealt = [deck.next() for _ in range(2_000)]
        for _ in range(200):
            first = rng.randrange(0, 2_000)
            end = rng.randrange(first, 2_001)
            expected = Counter(dealt[first:end])
            counted = count_dealt(mix, "base", first, end)
            assert {k: v for k, v in counted.items() if v} == dict(expected), (first, end)


def test_any_prefix_of_whole_decks_is_within_one_point_of_the_mix() -> None:
    deck = Deck(FRONTEND_MIX, "x")
    cards = [deck.next() for _ in range(10_000)]
    counts = Counter(cards)
    for name, weight in FRONTEND_MIX.items():
        assert counts[name] == weight * 100


# --------------------------------------------------------------------------- mix and rates


def test_blended_mix_weighs_each_component_by_its_requested_rate() -> None:
    mix = workload().operations()
    assert sum(mix.values()) == pytest.approx(100)
    # 300 of 450 ops/s are front-end: stat is 39 % of two thirds, seq_read 50 % of one third.
    assert mix["stat"] == pytest.approx(26.0)
    assert mix["access"] == pytest.approx(10.0)
    assert mix["seq_read"] == pytest.approx(100 / 6, abs=1e-5)
    assert mix["unlink2"] == pytest.approx(2 / 3, abs=1e-5)
    assert workload(component="EDA_BACKEND").operations() == {"seq_read": 50, "seq_write": 50}


def test_sessions_are_processes_job_set_by_job_set_at_their_requested_rates() -> None:
    eda = workload(job_sets=2)
    assert eda.default_sessions() == 10
    assert eda.session_weights(10) == [100, 100, 100, 75, 75] * 2
    names = [t.name for t in eda.trees[:5]]
    assert names == [
        "EDA_FRONTEND-001-1",
        "EDA_FRONTEND-001-2",
        "EDA_FRONTEND-001-3",
        "EDA_BACKEND-001-1",
        "EDA_BACKEND-001-2",
    ]
    assert layout.job_set_rate_ops_s(eda.p) == 450
    with pytest.raises(ConfigError, match=r"raise workload\.parameters\.job_sets"):
        eda.session_weights(11)


def test_layout_arithmetic_of_the_reference_job_set() -> None:
    trees = layout.plan(EdaParameters())
    front = [t for t in trees if t.component == "EDA_FRONTEND"]
    back = [t for t in trees if t.component == "EDA_BACKEND"]
    assert len(front) == 3 and len(back) == 2
    assert front[0].file_count == 200  # 10 dirs × (10 data + 10 empty)
    assert front[0].data_bytes == 100 * 16 * 1024
    assert back[0].file_count == 50
    assert back[0].data_bytes == 50 * 10 * 2**20
    assert front[0].data_files()[:2] == ["dir_00/file_00", "dir_00/file_01"]
    assert front[0].empty_files()[-1] == "dir_09/empty_09"
    wide = layout.plan(params(frontend={"files_per_dir": 1200, "dirs": 1}))[0]
    assert wide.data_files()[-1] == "dir_00/file_1199"


# --------------------------------------------------------------------------- parameters


def test_parameters_take_sizes_and_refuse_bad_mixes() -> None:
    p = params(backend={"file_size_bytes": "1M"}, transfer_size_bytes="128K")
    assert p.backend.file_size_bytes == 2**20 and p.transfer_size_bytes == 131072
    with pytest.raises(ValidationError, match="unknown frontend operation"):
        params(frontend={"mix": {"stat": 50, "seq_read": 50}})
    with pytest.raises(ValidationError, match="must not exceed create"):
        params(frontend={"mix": {"stat": 98, "unlink": 2}})
    with pytest.raises(ValidationError, match="direct_io needs multiples of 4096"):
        EdaParameters(direct_io=True, block_size_bytes=512)
    custom = params(frontend={"mix": {"stat": 90, "append": 5, "readdir": 5}})
    assert custom.frontend.mix == {"stat": 90, "append": 5, "readdir": 5}


# --------------------------------------------------------------------------- validity


def test_validity_needs_every_process_at_75_and_the_total_at_95_percent() -> None:
    requested = [100.0, 100.0, 100.0, 75.0, 75.0]
    assert judge(requested, requested)["valid"]
    # One process at exactly 75 %, the others a little over: the total reaches 96.7 %.
    assert judge(requested, [75.0, 105, 105, 75, 75])["valid"]
    one_slow = judge(requested, [74.9, 100, 100, 75, 75])
    assert not one_slow["valid"] and one_slow["processes_below_75pct"] == 1
    # Every process above 75 % but the total at 90 %: invalid.
    assert not judge(requested, [90.0, 90, 90, 67.5, 67.5])["valid"]


def test_overall_response_time_is_the_area_under_the_curve_over_the_peak() -> None:
    assert overall_response_time([(450.0, 2.0)]) == pytest.approx(2.0)
    # Flat at 1 ms up to 100 ops/s, then a trapezoid to 3 ms at 200 ops/s: (100 + 200) / 200.
    assert overall_response_time([(200.0, 3.0), (100.0, 1.0)]) == pytest.approx(1.5)
    assert overall_response_time([]) is None


def test_score_reports_the_highest_valid_load_point_with_its_mb_s() -> None:
    def point(step: int, job_sets: int, achieved_fraction: float) -> LoadPoint:
        requested = [100.0, 100, 100, 75, 75] * job_sets
        ops = [round(r * achieved_fraction * 10) for r in requested]
        return LoadPoint(
            step=step,
            duration_s=10.0,
            session_ops=ops,
            requested_ops_s=requested,
            op_counts={"stat": sum(ops) // 2, "seq_read": sum(ops) - sum(ops) // 2},
            op_mean_us={"stat": 200.0, "seq_read": 1000.0},
            bytes_per_op={"stat": 0.0, "seq_read": 65536.0},
        )

    scored = score_load_points([point(0, 1, 1.0), point(1, 2, 0.99), point(2, 3, 0.7)], 5)
    rows = scored["load_points"]
    assert [r["valid"] for r in rows] == [True, True, False]
    best = scored["highest_valid"]
    assert best["step"] == 1 and best["job_sets"] == 2
    assert best["achieved_ops_s"] == pytest.approx(891, abs=0.5)
    assert rows[0]["mb_s"] == pytest.approx(225 * 65536 / 1e6, rel=1e-3)
    assert rows[0]["mean_latency_ms"] == pytest.approx(0.6)
    assert scored["overall_response_time_ms"] == pytest.approx(0.6)


# --------------------------------------------------------------------------- target and tree


def test_os_errors_become_one_line_naming_errno_and_path() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    assert (
        os_error_message(full, "write", "/mnt/t/f")
        == "filetree: write /mnt/t/f: ENOSPC (No space left on device)"
    )
    denied = PermissionError(errno.EACCES, "Permission denied")
    assert (
        os_error_message(denied, "create", "/x")
        == "filetree: create /x: EACCES (Permission denied)"
    )


def test_mount_of_finds_the_longest_mount_prefix(tmp_path: Path) -> None:
    nfs = tmp_path / "nfs"
    (nfs / "eda").mkdir(parents=True)
    (tmp_path / "nfsother").mkdir()
    mounts = tmp_path / "mounts"
    mounts.write_text(
        f"/dev/vda / ext4 rw 0 0\nsrv:/export {nfs} nfs4 rw,vers=4.1,nconnect=8 0 0\n"
    )
    found = mount_of(nfs / "eda" / "not-yet", mounts)
    assert found["fstype"] == "nfs4" and "nconnect=8" in found["mount_options"]
    assert mount_of(tmp_path / "nfsother", mounts)["fstype"] == "ext4"


def test_claim_refuses_a_non_empty_directory_without_marker(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("mine")
    trees = layout.plan(EdaParameters())
    with pytest.raises(
        OwnershipError, match=re.escape(f"{tmp_path} is not empty and has no .dbsim-tree")
    ):
        layout.claim(tmp_path, trees)
    fresh = layout.claim(tmp_path / "new", trees)
    assert fresh["created_root"] is True and fresh["trees"] == {}


def test_a_marker_naming_paths_outside_the_root_is_refused(tmp_path: Path) -> None:
    root = [tmp_path.stat().st_dev, tmp_path.stat().st_ino]
    marker = {"owner": "dbsim", "version": layout.MARKER_VERSION, "id": "ab" * 16, "root": root}
    (tmp_path / layout.MARKER).write_text(json.dumps({**marker, "trees": {"../../etc": {}}}))
    with pytest.raises(OwnershipError, match="lists unexpected tree names"):
        layout.drop_all(tmp_path)
    # Without the id (written by hand) it is refused before its names are even read.
    (tmp_path / layout.MARKER).write_text('{"owner": "dbsim", "trees": {"../../etc": {}}}')
    with pytest.raises(OwnershipError, match="carries no dbsim tree id"):
        layout.drop_all(tmp_path)
