"""The lab array's ONTAP REST endpoint (:mod:`storage.lab.ontap_rest`) read by the ONTAP
collector's own client and parser over real TLS on 127.0.0.1: the counters it serves are the
array's, in the shapes the collector reads; a wrong password is refused."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.errors import CollectorError
from storage.collectors.ontap import OntapClient, OntapSettings, rates, reading
from storage.lab import ontap_rest
from storage.lab.arrayfs import Counters


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[tuple[ontap_rest.OntapEndpoint, Counters, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("!!! NOT RUN: openssl missing (it makes the endpoint's certificate)")
    ontap_rest.make_credentials(tmp_path)
    counters = Counters()
    server = ontap_rest.OntapEndpoint("lun", counters.snapshot, tmp_path)
    try:
        yield server, counters, tmp_path
    finally:
        server.close()


def _client(
    port: int, directory: Path, monkeypatch: pytest.MonkeyPatch, password_file: Path | None = None
) -> OntapClient:
    monkeypatch.setenv("LAB_ONTAP_USER", ontap_rest.USER)
    settings = OntapSettings(
        cluster=f"https://127.0.0.1:{port}",
        username_env="LAB_ONTAP_USER",
        password_file=password_file or directory / ontap_rest.PASSWORD_FILE,
        ca_file=directory / ontap_rest.CERT_FILE,
        volumes=["lun"],
    )
    return OntapClient(settings)


def test_volume_and_lun_counters_are_the_arrays(
    endpoint: tuple[ontap_rest.OntapEndpoint, Counters, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, counters, directory = endpoint
    client = _client(server.port, directory, monkeypatch)
    fields = {"fields": "name,svm.name,statistics"}
    first = reading(
        client.get_records("/api/storage/volumes", fields | {"name": "lun"})[0], "statistics"
    )
    for _ in range(10):
        counters.add("read", 4096, 0.002, 0.0015)
    counters.add("write", 8192, 0.004, 0.0)
    luns = client.get_records(
        "/api/storage/luns", fields | {"name": "/vol/lun/*", "svm.name": "lab"}
    )
    assert [r["name"] for r in luns] == ["/vol/lun/lun"]
    after = reading(luns[0], "statistics")
    assert first is not None and after is not None and after.status == "ok"
    assert after.figures["read_iops"] == 10 and after.figures["write_iops"] == 1
    assert after.figures["total_iops"] == 11 and after.figures["other_iops"] == 0
    assert after.figures["read_latency_us"] == 20_000 and after.figures["read_bps"] == 40_960
    assert after.timestamp is not None and first.timestamp is not None
    per = rates(first, after, 1.0)
    assert per["read_latency_us"] == 2000.0 and per["write_latency_us"] == 4000.0
    assert client.get_records("/api/storage/volumes", {"name": "other"}) == []
    assert "statistics" not in client.get_records("/api/storage/volumes", {"fields": "name"})[0]


def test_wrong_password_and_unknown_paths_are_refused(
    endpoint: tuple[ontap_rest.OntapEndpoint, Counters, Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    server, _, directory = endpoint
    wrong = tmp_path / "wrong"
    wrong.write_text("not-it\n")
    with pytest.raises(CollectorError, match="HTTP 401"):
        _client(server.port, directory, monkeypatch, wrong).get_records("/api/storage/volumes", {})
    with pytest.raises(CollectorError, match="HTTP 404"):
        _client(server.port, directory, monkeypatch).get_records("/api/storage/qtrees", {})
    assert server.answer("/api/cluster", server.auth)[1]["name"] == "dbsim-lab-lun"
