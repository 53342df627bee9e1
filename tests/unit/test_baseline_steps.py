"""The baseline's rules that need no fio run: the iodepth search's stopping rule, the iorate
curve's rates and job files, the working-set scaling, the mount options read from recorded
``/proc/self/mountstats`` text, and the OCI envelope's figures per volume size.

The search and curve orchestration run here against a stub of one fio run (fio is not what
is under test); tests/e2e/test_baseline_steps.py runs both with the real fio."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from sim.baseline import annotate, fio, mounts, planning, stepped, workset
from sim.baseline.envelope import compare, published_at
from sim.baseline.matrix import PlannedPoint, plan, search_steps
from sim.baseline.points import GIB, TIB, SeedLoad
from sim.baseline.presets import PRESETS
from sim.baseline.strategy import SEARCH_DEPTHS, SearchStep, curve_rate, search_verdict
from storage.collectors.mountstats import parse_mountstats
from storage.devices import ResolvedStorage
from storage.envelopes import get_envelope

MOUNTSTATS = Path(__file__).resolve().parents[1] / "data" / "mountstats"
GCNV = SeedLoad(8, None, 6, search=True, working_set=TIB, client_ram=128 * GIB)


# --------------------------------------------------------------------------- the search rule


def _verdict(iops: list[float | None], jobs: int = 2, seed: SeedLoad = GCNV) -> Any:
    planned = list(search_steps(seed, jobs))
    steps = [SearchStep(s, h, v) for (s, h), v in zip(planned, iops, strict=False)]
    return search_verdict(steps, planned)


def test_search_depths_are_the_seeds_scaled() -> None:
    assert SEARCH_DEPTHS == (1, 6, 11, 16, 21, 26, 31, 36, 41)  # +5 a run, nine runs (seed 002)
    assert [h for _, h in search_steps(GCNV, jobs=2)][:3] == [4, 24, 44]  # ceil(8 × d / 2)
    assert [h for _, h in search_steps(GCNV, jobs=8)][:3] == [1, 6, 11]


@pytest.mark.parametrize(
    ("iops", "done", "settled", "why"),
    [
        ([100.0], False, None, ""),
        ([100.0, 200.0], False, None, ""),
        ([100.0, 105.0], False, None, ""),  # +5 % is still a rise
        ([100.0, 200.0, 209.0], True, 2, "stopped rising"),  # +4.5 %: plateau, best is the last
        ([100.0, 200.0, 150.0], True, 1, "stopped rising"),  # a fall: the best before it
        ([100.0, 200.0, 300.0, 180.0], True, 2, "-40.0%"),
        ([100.0, None], True, 0, "did not complete"),
        ([None], True, None, "did not complete"),
        ([100.0 * 2**k for k in range(9)], True, 8, "the bound"),
    ],
)
def test_search_stops_when_throughput_stops_rising(
    iops: list[float | None], done: bool, settled: int | None, why: str
) -> None:
    verdict = _verdict(iops)
    assert (verdict.done, verdict.settled) == (done, settled)
    assert why in verdict.why


def test_search_stops_at_the_depth_cap() -> None:
    """128 seed jobs on one job here: 128 × 6 is past the cap of 256, and so is every later
    depth — the search stops instead of running the same depth again."""
    seed = SeedLoad(128, None, 12, search=True)
    assert [h for _, h in search_steps(seed, 1)][:3] == [128, 256, 256]
    verdict = _verdict([100.0, 300.0], jobs=1, seed=seed)
    assert verdict.done and verdict.settled == 1 and "cannot grow" in verdict.why


def _stub(iops_at: dict[int, float], calls: list[tuple[str, int, int | None]]) -> stepped.RunOnce:
    async def run_once(
        p: PlannedPoint, stem: str, rate: int | None, pct: int | None
    ) -> dict[str, Any]:
        calls.append((stem, p.iodepth, rate))
        iops = iops_at.get(p.iodepth, 0.0) if rate is None else min(rate * p.numjobs, 1000.0)
        empty = {"ios": 0}
        read = {"ios": 1, "p50_us": 100.0 + (rate or 0), "p99_us": 200.0 + (rate or 0)}
        return {"id": p.point.id, "iodepth": p.iodepth, "status": "completed", "iops": iops,
                "mib_s": iops / 256, "read": read, "write": empty}  # fmt: skip

    return run_once


def test_searched_point_settles_on_the_best_run_and_adopts_its_files() -> None:
    (planned,) = plan(["random-4k"], only=["r100"], cpus=2)
    assert [h for _, h in planned.search][:3] == [4, 24, 44]
    calls: list[tuple[str, int, int | None]] = []
    adopted: list[str] = []
    run_once = _stub({4: 1000.0, 24: 3000.0, 44: 3100.0}, calls)
    result = asyncio.run(stepped.searched(planned, run_once, adopted.append, lambda s: None))
    assert [c[0] for c in calls] == ["rand-4k-r100.qd4", "rand-4k-r100.qd24", "rand-4k-r100.qd44"]
    assert adopted == ["rand-4k-r100.qd44"] and result["iodepth"] == 44
    search = result["search"]
    assert (search["settled_iodepth"], search["settled_seed_iodepth"]) == (44, 11)
    assert [s["iops"] for s in search["steps"]] == [1000.0, 3000.0, 3100.0]
    assert "stopped rising" in search["why"] and "seed 002" in search["rule"]


# --------------------------------------------------------------------------- the iorate curve


def test_curve_rates_are_per_job() -> None:
    assert curve_rate(10_000.0, 50, numjobs=2) == 2500  # fio caps each job: half each
    assert curve_rate(10_000.0, 120, numjobs=4) == 3000
    assert curve_rate(3.0, 10, numjobs=8) == 1  # never 0 (fio would not cap at all)


def test_curve_job_files_ask_each_share_of_the_uncapped_run() -> None:
    (planned,) = plan(["four-corners"], only=["rand-4k-r100"], cpus=2)
    assert planned.curve == PRESETS["four-corners"].curve and planned.numjobs == 2
    target = fio.FioTarget("files", Path("/data/dbsim-baseline"), 64 << 20)
    notes = annotate.comments(planned, rate=curve_rate(800.0, 50, 2), pct=50)
    text = fio.job_file(planned, target, 5, 1, rate_iops=200, comments=notes)
    assert "\nrate_iops=200\n" in text and "\nrate_process=poisson\n" in text
    assert "# iorate curve step: rate_iops=200 per job x 2 jobs = 400 IOPS (50 %" in text
    assert "rate_iops" not in fio.job_file(planned, target, 5, 1)
    calls: list[tuple[str, int, int | None]] = []
    top = {"id": planned.point.id, "status": "completed", "iops": 800.0}
    result = asyncio.run(stepped.curved(planned, top, _stub({}, calls), lambda s: None))
    assert [c[2] for c in calls] == [round(800 * p / 100 / 2) for p in planned.curve]
    steps = result["curve"]["steps"]
    assert [s["pct"] for s in steps] == list(range(10, 130, 10))
    assert steps[0]["target_iops"] == 80 and steps[0]["read_p99_us"] == 240.0


# --------------------------------------------------------------------------- working sets


@pytest.mark.parametrize(
    ("ram", "room", "expected", "said"),
    [
        (32 * GIB, None, 256 * GIB, "8× it"),  # 1 TiB on 128 GiB: 8 × 32 GiB
        (512 * GIB, None, TIB, "held at the seed's 1 TiB"),  # never more than the page
        (32 * GIB, 100 * GIB, 100 * GIB, "bounded by"),
    ],
)
def test_working_set_keeps_the_seeds_ratio_to_memory(
    ram: int, room: int | None, expected: int, said: str
) -> None:
    host = workset.HostFacts(2, ram, room, "50 % of 125 GiB available on /data")
    work = workset.working_set(GCNV, host)
    assert work.bytes == expected and work.published == TIB
    assert said in work.rule


def test_working_set_without_the_clients_memory_or_a_stated_size() -> None:
    host = workset.HostFacts(2, 32 * GIB, None)
    oci = PRESETS["block-sweep"].load
    assert workset.working_set(oci, host).bytes == 10 * 10**9 // (1 << 20) * (1 << 20)
    assert workset.working_set(SeedLoad(1, None, 1), host).bytes == workset.DEFAULT_SIZE
    assert workset.working_set(GCNV, host, override=64 << 20).rule == "--size 64 MiB"


def test_files_are_laid_out_once_for_every_point(tmp_path: Path) -> None:
    points = plan(
        ["iscsi", "block-sweep"], only=["rand-4k-r100", "rand-8k-r100", "rand-16k-r100"], cpus=2
    )
    host = workset.HostFacts(2, 32 * GIB, 20 * GIB, "test room")
    prepared = planning.size_points(points, host, None, tmp_path, device=False)
    by_id = {p.point.id: p for p in prepared.points}
    assert prepared.files == 2 and prepared.target.size_bytes <= 10 * GIB  # 2 files within 20 GiB
    assert by_id["rand-4k-r100"].job_bytes == prepared.target.size_bytes  # iSCSI: room-bound
    assert by_id["rand-16k-r100"].job_bytes == (10 * 10**9) // (1 << 20) * (1 << 20)  # OCI: 1 job
    assert "bounded by test room" in by_id["rand-4k-r100"].work.rule  # type: ignore[union-attr]


# --------------------------------------------------------------------------- mount options


def _facts(name: str, mount_point: str) -> mounts.MountFacts:
    reading = parse_mountstats((MOUNTSTATS / name).read_text(), long_bits=64)
    return mounts.facts_from_stats(reading[mount_point])


def test_mount_options_beside_the_pages() -> None:
    flex = PRESETS["flex-custom"].load
    facts = _facts("nfsv3_nconnect8.before", "/mnt/netapp")  # nconnect=8, rsize=wsize=1 MiB
    checks = {c["option"]: c for c in mounts.compare(facts, flex.mount)}
    assert (checks["nconnect"]["here"], checks["nconnect"]["page"]) == (8, 16)
    assert (checks["rsize"]["here"], checks["rsize"]["page"]) == (1048576, 65536)
    assert not any(c["matches"] for c in checks.values())
    said = mounts.sentences(facts, flex.table, list(checks.values()))
    assert len(said) == 1 and "nconnect=8 (page 16)" in said[0] and "not a refusal" in said[0]
    old = _facts("nfsv3_statvers10.before", "/u02/oradata")  # no nconnect: one connection
    (check,) = mounts.compare(old, PRESETS["random-4k"].load.mount)
    assert (check["here"], check["matches"]) == (1, False)
    matching = mounts.MountFacts("/mnt/v", "nfs", "srv:/v", {"nconnect": 16, "rsize": 65536})
    (said_ok,) = mounts.sentences(
        matching, "t", mounts.compare(matching, PRESETS["nconnect"].load.mount)
    )
    assert "nconnect=16, as the page" in said_ok


def test_mount_read_for_a_target_from_recorded_mountstats(tmp_path: Path) -> None:
    class Resolver:
        def resolve(self, path: Path) -> ResolvedStorage:
            return ResolvedStorage(
                Path(path), "nfs", (), "/mnt/netapp", "nfs", "10.1.0.20:/eda_vol"
            )

    recorded = MOUNTSTATS / "nfsv3_nconnect8.after"
    facts = mounts.read_facts(tmp_path / "t", Resolver(), recorded)  # type: ignore[arg-type]
    assert facts.is_nfs and facts.options and facts.options["nconnect"] == 8
    report = mounts.report(facts, planning.mount_tables(plan(["nconnect"], cpus=2)))
    (table,) = report["tables"]
    assert table["checks"][0]["here"] == 8 and table["checks"][0]["page"] == 16
    local = mounts.report(
        mounts.MountFacts("/", "ext4", "/dev/vda"), {"t": PRESETS["nconnect"].load.mount}
    )
    assert "not NFS" in local["tables"][0]["said"][0]
    (how,) = planning.advice(["nconnect", "random-4k"])
    assert "five times" in how and "mount the same export twice" in how


# --------------------------------------------------------------------------- OCI envelope


def test_oci_figures_appear_where_the_seed_states_them() -> None:
    env = get_envelope("oci-bv-balanced")
    at4 = published_at(env, 100, 4)
    assert at4 is not None and at4["iops"] == 25_000 and at4["basis"] == "published"
    assert [(s["capacity"], s["iops"]) for s in at4["by_size"]] == [
        ("50 GB", 3000.0),
        ("1 TB", 25000.0),
    ]
    assert "25.000 IOPS @ 4K" in at4["sources"][0]
    at256 = published_at(env, 50, 256)
    assert at256 is not None and at256["mib_s"] == pytest.approx(320e6 / (1 << 20))
    assert published_at(env, 50, 8) is None  # neither figure is published at 8 KiB
    rows = compare(env, [{"id": "rand-4k-r100", "read_pct": 100, "block_kib": 4, "iops": 1500.0,
                          "mib_s": 5.9}], capacity_tib=50e9 / (1 << 40))  # fmt: skip
    assert rows["rows"][0]["ratio"] == pytest.approx(0.5) and rows["volume"] == "50 GB"
