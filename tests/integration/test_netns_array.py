"""Issue #32: the array's counters beside the hosts', sampled by one worker host only.

Three netns hosts (tests/support/netns_hosts.py) as in test_netns_hosts.py: the master on h0,
workers on h1 and h2, each with its SQLite data on a loop device of its own. Each worker host
runs its own recorded ONTAP replay (tests/support/ontap_replay.py) on its own loopback, same
port: the scenario's ``collectors.ontap.cluster`` reaches whichever host's replay the worker
sampling it runs on. The master elects its lowest-numbered worker to sample the collectors of
shared scope, so exactly one of the two replays is asked (one reading at the collector's
start and one per interval), the other never. The bundle holds the array's volume once per
interval beside each host's device; the analysis' primary device is the sum across hosts
(HOSTS_SUM), and the array's I/Os per operation sit beside it (``io_per_op.layers``).

Wall time: about 40 s on this 2-CPU machine.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sim import registry
from sim.analysis.series import HOSTS_SUM
from tests.integration.test_netns_hosts import Cluster
from tests.support.netns_hosts import Host, netns_hosts

pytestmark = [pytest.mark.integration, pytest.mark.root, pytest.mark.timing]

REPO = Path(__file__).resolve().parents[2]
PORT = 8811  # each host's own loopback: no other test's port is there
USER, PASSWORD = "monitor", "Repl4y-s3cret!"
#: A replay on a host's loopback, its request log written to a file as it grows.
REPLAY = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import tests.support.ontap_replay as replay

class Fixed(replay._Server):  # the scenario names one port for every host
    def __init__(self, address, handler):
        super().__init__(("127.0.0.1", int(sys.argv[2])), handler)

replay._Server = Fixed
volume = replay.Entity("volume", "svm1", "vol_data", "a1", (500, 250, 50), (200, 400, 100),
                       (8192, 16384, 0))
with replay.OntapReplay([volume], username=sys.argv[4], password=sys.argv[5]) as server:
    while True:
        firsts = [p for p, q in list(server.requests) if "start.uuid" not in q]
        with open(sys.argv[3] + ".tmp", "w") as out:
            json.dump(firsts, out)
        os.replace(sys.argv[3] + ".tmp", sys.argv[3])
        time.sleep(0.2)
"""


def _master_with(host: Host, extra: list[str]) -> None:
    """The master's command (the first ``popen`` on its host) with ``extra`` arguments."""
    started = host.popen

    def popen(argv: Any, **kwargs: Any) -> Any:
        return started([*argv, *extra], **kwargs)

    host.popen = popen  # type: ignore[method-assign]


def test_the_array_is_sampled_by_one_host_beside_each_hosts_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONTAP_T_USER", USER)
    monkeypatch.setenv("ONTAP_T_PASSWORD", PASSWORD)
    ontap = (
        f"collectors.ontap={{cluster: 'http://127.0.0.1:{PORT}', username_env: ONTAP_T_USER, "
        "password_env: ONTAP_T_PASSWORD, svm: svm1, volumes: [vol_data]}"
    )
    with netns_hosts(tmp_path, 3, luns=(1, 2)) as hosts:
        logs = {}
        for host in hosts[1:]:
            logs[host.name] = tmp_path / f"{host.name}-replay.json"
            argv = [sys.executable, "-c", REPLAY, str(REPO), str(PORT), str(logs[host.name]),
                    USER, PASSWORD]  # fmt: skip
            host.popen(argv, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                       stdout=tmp_path / f"{host.name}-replay.out",
                       stderr=tmp_path / f"{host.name}-replay.err")  # fmt: skip
        deadline = time.monotonic() + 30
        while not all(log.exists() for log in logs.values()):
            assert time.monotonic() < deadline, [p.read_text() for p in tmp_path.glob("*.err")]
            time.sleep(0.2)
        _master_with(hosts[0], ["--set", ontap])
        cluster = Cluster(tmp_path, hosts, {})
        cluster.start(users=4, duration_s=10, rate_ops_s=400)
        summary = cluster.summary()
        time.sleep(0.5)  # the replays' last log write
        asked = {name: json.loads(log.read_text()) for name, log in logs.items()}
    assert summary["status"] == "completed", summary.get("error")
    bundle = Path(summary["bundle"])
    workers = summary["distributed"]["workers"]
    intervals = max(int(w["intervals_received"]) for w in workers)

    # One host's replay was asked, once at the start and once per interval; the other never.
    counts = sorted(len([p for p in a if p == "/api/storage/volumes"]) for a in asked.values())
    print(f"array readings per worker host: {counts} for {intervals} intervals (measured)")
    assert counts[0] == 0, asked
    assert intervals <= counts[1] <= intervals + 2, (counts, intervals)

    # In the bundle: the array's volume once per interval beside each host's own device.
    source = registry.collector_with_role(registry.ROLE_ARRAY)
    assert source is not None
    lines = (bundle / "timeseries" / f"{source}.csv").read_text().splitlines()
    entities = [line.split(",")[3] for line in lines[1:]]
    assert set(entities) == {"volume:svm1/vol_data"}
    assert intervals - 1 <= len(entities) <= intervals
    analysis = json.loads((bundle / "analysis.json").read_text())
    assert analysis["primary_device"] == HOSTS_SUM
    devices = set(analysis["series"]["device"])
    assert {f"{h.hostname}/{Path(str(h.device)).name}" for h in hosts[1:]} <= devices
    layers = analysis["io_per_op"]["layers"]
    assert [(layer["source"], layer["entity"]) for layer in layers] == [
        (source, "volume:svm1/vol_data")
    ]
    # The replay's volume does 160 I/Os a second whatever the run does: per operation, that
    # over the run's merged operations (beside the hosts' summed device I/Os per operation).
    ops_s = sum(v["ops_s"] for v in summary["operations"].values())
    assert layers[0]["ios_per_op"] == pytest.approx(160 / ops_s, rel=0.1)
    print(f"I/Os per operation: all hosts' devices {analysis['io_per_op']['device_ios_per_op']}, "
          f"the array's volume {layers[0]['ios_per_op']} (measured)")  # fmt: skip
