"""``dbsim profile`` on captures imported from public files nobody here wrote (tests/data:
iostat, sadf, AWR; their READMEs cite each file): the profile's figures against the bundle's
CSV rows, by hand, and what the profile says the data could not tell."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest

from sim import registry
from sim.imports.run import run_import
from sim.profile import build_profile
from sim.profile.words import headline
from tests.support.profile_bundles import DATA, csv_rows


def _import(fmt: str, source: Path, out: Path) -> Path:
    if source.suffix == ".gz":  # stored compressed; the importer reads the report itself
        plain = out / source.stem
        out.mkdir(parents=True, exist_ok=True)
        plain.write_bytes(gzip.decompress(source.read_bytes()))
        source = plain
    return run_import(fmt, [source], out / "bundles", None).path


def _rows_at(bundle: Path, source: str) -> dict[float, list[dict[str, str]]]:
    found: dict[float, list[dict[str, str]]] = {}
    for row in csv_rows(bundle, source):
        found.setdefault(float(row["t"]), []).append(row)
    return found


def test_iostat_log_of_three_disks(tmp_path: Path) -> None:
    """postgres_long_commit.log: vda, vdb and vdc every second (sysstat 10 columns)."""
    bundle = _import("iostat", DATA / "iostat" / "postgres_long_commit.log", tmp_path)
    doc = build_profile(bundle)
    assert doc["devices"]["counted"] == ["vda", "vdb", "vdc"]
    by_t = _rows_at(bundle, "block")
    iops = {t: sum(float(r["r_s"]) + float(r["w_s"]) for r in rows) for t, rows in by_t.items()}
    busiest = max(iops, key=iops.__getitem__)
    peak = doc["peaks"]["busiest_interval"]
    assert peak["end_t"] == busiest
    assert peak["iops"]["value"] == pytest.approx(iops[busiest], rel=1e-5)
    assert peak["iops"]["what"] == "derived"
    rows = by_t[busiest]
    writes = sum(float(r["w_s"]) for r in rows)
    assert peak["figures"]["write_await_ms"]["value"] == pytest.approx(
        sum(float(r["w_await_ms"]) * float(r["w_s"]) for r in rows) / writes, rel=1e-5
    )
    values = sorted(iops.values())
    assert doc["peaks"]["p95_interval"]["value"] == pytest.approx(
        values[math.ceil(0.95 * len(values)) - 1], rel=1e-5
    )
    said = " ".join(item["what"] for item in doc["not_in_data"])
    assert "no request-size distribution" in said


def test_sar_d_without_a_read_write_split(tmp_path: Path) -> None:
    """sysstat's own sa file as sadf -j: sda and its partitions, one 46-s interval."""
    source = DATA / "sadf" / "sysstat_data-11.6.5.sadf-j.json"
    bundle = _import("sadf", source, tmp_path)
    doc = build_profile(bundle)
    assert doc["devices"]["counted"] == ["sda"]
    assert all("partition of sda" in why for why in doc["devices"]["left_out"].values())
    (row,) = [r for r in csv_rows(bundle, "block") if r["entity"] == "sda"]
    summary = doc["devices"]["summary"]
    assert summary["iops"]["mean"]["value"] == pytest.approx(float(row["iops"]))
    assert summary["iops"]["mean"]["what"] == "imported"
    assert summary["io_kib"]["mean"]["value"] == pytest.approx(float(row["areq_sz_kB"]))
    assert summary["await_ms"]["mean"]["value"] == pytest.approx(float(row["await_ms"]))
    assert "read_pct" not in summary and "read_iops" not in summary  # not in the file
    first = headline(doc)[0]
    assert "(reads and writes together)" in first and "% writes" not in first


def test_awr_rac_report_hourly_means(tmp_path: Path) -> None:
    """A 12.2 RAC AWR report: one snapshot interval, the cluster's figures."""
    bundle = _import("awr", DATA / "awr" / "awr_rac_122.html.gz", tmp_path)
    doc = build_profile(bundle)
    assert doc["devices"] is None
    load = doc["peaks"]["load"]
    assert load["key"] == "io_req_s"
    (row,) = [r for r in csv_rows(bundle, "db") if r["entity"].endswith(":cluster")]
    total = sum(float(row[k]) for k in ("phys_read_req_s", "phys_write_req_s", "log_write_req_s"))
    assert doc["peaks"]["mean"]["value"] == pytest.approx(total, rel=1e-5)
    entity = doc["database"]["entities"][row["entity"]]["summary"]
    assert entity["single_block_read_ms"]["mean"]["value"] == pytest.approx(
        float(row["single_block_read_ms"])
    )
    assert entity["commits_s"]["mean"]["what"] == "imported"
    assert doc["peaks"]["busiest_minute"]["unresolved"].endswith("no busiest minute")
    said = [item["what"] for item in doc["not_in_data"]]
    assert any("AWR snapshot" in s for s in said), said  # the importer's means_only
    waits = doc["database"]["waits"]
    sequential = next(w for w in waits.values() if w["event"] == "db file sequential read")
    (wait_row,) = [
        r for r in csv_rows(bundle, "db") if r["entity"].endswith("db file sequential read")
    ]
    assert sequential["shares_pct"]["le_1ms_pct"] == pytest.approx(float(wait_row["le_1ms_pct"]))
    assert headline(doc)[0].startswith(f"Peak: {total:,.0f}\u00a0database I/O requests/s")


def test_mountstats_series_of_an_nfs_mount(tmp_path: Path) -> None:
    """tests/data/mountstats_series/nfsv3_statvers10.series (the recorded pair as one file),
    profiled by the NFS client's figures (the collector declaring the NFS role)."""
    source = DATA / "mountstats_series" / "nfsv3_statvers10.series"
    bundle = _import("mountstats", source, tmp_path)
    assert registry.collector_with_role(registry.ROLE_NFS) == "nfs"
    doc = build_profile(bundle)
    mount = doc["nfs_client"]["mounts"]["/u02/oradata"]
    # tests/data/mountstats/README.md: "READ | 12000 / 12003 / 1 / 140 / 8308 …" over 10 s.
    assert mount["operations"]["READ"]["summary"]["ops_s"]["mean"]["value"] == 1200
    (row,) = [r for r in csv_rows(bundle, "nfs") if r["entity"] == "/u02/oradata"]
    assert doc["peaks"]["mean"]["value"] == pytest.approx(float(row["ops_s"]))
    assert mount["summary"]["read_kB_s"]["mean"]["value"] == pytest.approx(float(row["read_kB_s"]))
    assert "READ 9,600\u00a0kB/s" in headline(doc)[0]  # 12,000 reads of 8 KiB in 10 s
