"""The baseline's pieces that need no fio run: presets, scaling, job files, reading fio's
report (a real fio 3.33 ``json,normal`` output recorded in tests/data/fio/) and the envelope
comparison against the seeds' printed figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.baseline import fio
from sim.baseline.envelope import compare, published_at
from sim.baseline.matrix import (
    MIXES,
    PRESETS,
    SeedLoad,
    parse_curve,
    parse_depth,
    parse_filter,
    plan,
    scale,
)
from sim.errors import ConfigError
from storage.envelopes import get_envelope

DATA = Path(__file__).resolve().parents[1] / "data" / "fio"


def test_seed_000_matrix_is_the_published_one() -> None:
    ids = [p.id for p in PRESETS["seed-000"].points]
    assert len(ids) == 20
    for kind, size in (("rand", 4), ("rand", 8), ("seq", 64), ("seq", 256)):
        assert [f"{kind}-{size}k-r{m}" for m in MIXES] == [
            i for i in ids if i.startswith(f"{kind}-{size}k-")
        ]
    corners = PRESETS["four-corners"]
    assert [corners.load_for(p).jobs for p in corners.points] == [128, 64, 16, 8]
    assert len(PRESETS["block-sweep"].points) == 45


def test_rw_names_follow_fio() -> None:
    rw = {p.read_pct: p.rw for p in PRESETS["random-4k"].points}
    assert rw == {100: "randread", 75: "randrw", 50: "randrw", 25: "randrw", 0: "randwrite"}
    assert {p.rw for p in PRESETS["seq-64k"].points} == {"read", "rw", "write"}


def test_iscsi_carries_each_tables_load() -> None:
    """Seed 000's iSCSI section: 24 jobs per VM at iodepth 4 for the 4 and 8 KiB random tables,
    iodepth 1 for the 64 and 256 KiB sequential ones; 720 GiB per VM; all four tables."""
    iscsi = PRESETS["iscsi"]
    assert len(iscsi.points) == 20
    loads = {(p.access, p.block_kib): iscsi.load_for(p) for p in iscsi.points}
    assert set(loads) == {("random", 4), ("random", 8), ("sequential", 64), ("sequential", 256)}
    for (access, _), load in loads.items():
        assert (load.jobs, load.iodepth, load.clients) == (24, 4 if access == "random" else 1, 6)
        assert load.working_set == 720 << 30 and not load.search
    planned = {p.point.id: p for p in plan(["iscsi"], cpus=2)}
    assert (planned["rand-8k-r50"].numjobs, planned["rand-8k-r50"].iodepth) == (2, 48)
    assert (planned["seq-256k-r50"].numjobs, planned["seq-256k-r50"].iodepth) == (2, 12)
    assert planned["rand-4k-r0"].numjobs * planned["rand-4k-r0"].iodepth == 96
    assert not any(p.search for p in planned.values())


def test_scaling_keeps_the_seed_clients_ios_in_flight() -> None:
    seed = SeedLoad(24, 1, 6)
    assert scale(seed, cpus=2, numjobs=None, iodepth=None) == (2, 12)
    assert scale(SeedLoad(8, None, 6), cpus=16, numjobs=None, iodepth=None) == (8, 1)
    assert scale(SeedLoad(128, None, 12), cpus=2, numjobs=None, iodepth=None) == (2, 64)
    assert scale(seed, cpus=2, numjobs=4, iodepth=3) == (4, 3)  # explicit values win


def test_filters_and_bad_input() -> None:
    assert parse_filter("rand-4k-r75") == ("random", 4, 75)
    assert parse_filter("seq") == ("sequential", None, None)
    chosen = plan(["seed-000"], only=["r100", "seq-256k"], cpus=2)
    assert [p.point.id for p in chosen][:2] == ["rand-4k-r100", "rand-8k-r100"]
    assert "seq-256k-r0" in {p.point.id for p in chosen}
    for bad in (
        lambda: plan(["nope"]),
        lambda: plan(["random-4k"], only=["banana"]),
        lambda: plan(["random-4k"], only=["seq"]),
        lambda: plan(["random-4k"], iodepth=0),
        lambda: plan(["random-4k"], numjobs=0),
        lambda: parse_depth("deep"),
        lambda: parse_curve("0,50"),
        lambda: parse_curve("ten"),
    ):
        with pytest.raises(ConfigError):
            bad()


def test_device_sequential_jobs_stream_their_own_regions() -> None:
    (planned,) = plan(["seq-64k"], only=["r100"], numjobs=4, iodepth=2)
    target = fio.FioTarget("device", Path("/dev/loop9"), 1 << 30)
    text = fio.job_file(planned, target, runtime_s=10, ramp_s=2)
    assert "filename=/dev/loop9" in text
    assert f"size={(1 << 30) // 4}" in text and f"offset_increment={(1 << 30) // 4}" in text
    assert "rw=read" in text and "rwmixread" not in text and "direct=1" in text


def test_files_target_uses_one_file_per_job_clone() -> None:
    (planned,) = plan(["random-4k"], only=["r75"], numjobs=2, iodepth=4)
    target = fio.FioTarget("files", Path("/data/dbsim-baseline"), 64 << 20)
    text = fio.job_file(planned, target, runtime_s=3, ramp_s=1)
    assert "filename_format=dbsim-fio.$jobnum" in text and "rwmixread=75" in text
    assert "directory=/data/dbsim-baseline" in text
    layout = fio.layout_job(target, 2)
    assert "fallocate=none" in layout and "direct=1" in layout  # really written, not allocated


def test_report_is_read_as_fio_printed_it() -> None:
    text = (DATA / "rand-4k-r75.out").read_text()
    document, json_text, rest = fio.split_output(text)
    assert json.loads(json_text) == document
    assert "IOPS=" in rest and '"jobs"' not in rest
    parsed = fio.parse_report(document, rest)
    job = document["jobs"][0]
    assert parsed["read"]["iops"] == job["read"]["iops"]
    assert parsed["write"]["iops"] == job["write"]["iops"]
    assert (
        parsed["read"]["p99_us"] == float(job["read"]["clat_ns"]["percentile"]["99.000000"]) / 1000
    )
    assert parsed["iops"] == job["read"]["iops"] + job["write"]["iops"]
    assert parsed["printed"]["read"].startswith("IOPS=15.7k")
    assert parsed["printed"]["write"].startswith("IOPS=5255")
    with pytest.raises(Exception, match="no JSON"):
        fio.split_output("fio: no such file\n")


def test_missing_fio_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fio.FIO_ENV, "/nonexistent/fio")
    with pytest.raises(ConfigError, match="apt-get install fio"):
        fio.find_fio()


def test_envelope_figure_is_the_seed_row() -> None:
    envelope = get_envelope("gcnv-extreme-nfsv3")
    # Seed 000, NFSv3 4 KiB random: "Ler IOPS 380.000 172.000 …", "Gravar IOPS 0 57.300 …"
    at75 = published_at(envelope, 75, 4)
    assert at75 is not None and at75["iops"] == pytest.approx(172_000 + 57_300)
    assert not at75["flags"]
    result = compare(envelope, [{"id": "rand-4k-r75", "read_pct": 75, "block_kib": 4,
                                 "iops": 22_930.0, "mib_s": 89.6}])  # fmt: skip
    (row,) = result["rows"]
    assert row["ratio"] == pytest.approx(0.1)
    assert "6 client(s)" in result["caveat"]
