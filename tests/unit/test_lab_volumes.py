"""The lab's volume specs (``--volume NAME:KEY=VALUE,…``) and a version-1 state read as volumes.

No root needed: parsing, refusals, and how a lab recorded before volumes existed is read and
described (its loop device is long gone here, so the status says so)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.errors import ConfigError
from storage.lab import DEFAULT_VOLUME, Lab, parse_volume
from storage.lab.status import text_lines
from storage.lab.volumes import check_specs, find


def test_a_spec_names_the_volume_its_ceilings_and_size() -> None:
    spec = parse_volume("new:read-iops=2000,write-bps=20M,size=2G")
    assert spec.name == "new"
    assert dict(spec.ceilings) == {"read_iops": 2000, "write_bps": 20 << 20}
    assert spec.size_bytes == 2 << 30
    bare = parse_volume("old")
    assert (bare.name, dict(bare.ceilings), bare.size_bytes) == ("old", {}, None)
    assert dict(parse_volume("x:read-iops=0").ceilings) == {"read_iops": None}  # 0: unlimited


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Old:read-iops=5", "lower-case letters"),
        ("postgres", "not postgres"),
        ("../x", "lower-case letters"),
        ("old:read-iops", "is not key=value"),
        ("old:read-iops=fast", "not a whole number"),
        ("old:read-ops=5", "unknown 'read-ops'"),
        ("old:size=lots", "expected bytes"),
        # Bounded before conversion: 5,000 digits escaped as ValueError / OverflowError.
        ("old:read-iops=" + "9" * 5000, "old: read-iops=9"),
        ("old:read-bps=" + "9" * 5000, "old: read-bps=9"),
        ("old:qos-iops=" + "9" * 5000, "old: qos-iops=9"),
        ("old:read-iops=10000001", "from 0 to 10,000,000"),
        ("old:read-bps=2T", "from 1 B to 1 TiB"),
        ("old:read-iops=5,write-iops=1,read-iops=6", "read-iops is given twice"),
        ("old:size=0", "from 16 MiB to 1 TiB"),
        ("old:size=8M", "from 16 MiB to 1 TiB"),
        ("old:service-us=0", "from 1 to 1,000,000"),
    ],
)
def test_a_bad_spec_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_volume(text)
    assert "\n" not in str(caught.value)
    assert len(str(caught.value)) < 200  # a huge value is not echoed back whole


def test_names_are_unique_and_found() -> None:
    with pytest.raises(ConfigError, match="old given twice"):
        check_specs([parse_volume("old"), parse_volume("old:read-iops=1")])
    records = [{"name": "old"}, {"name": "new"}]
    assert find(records, "new") is records[1]
    with pytest.raises(ConfigError, match="volumes old, new: name one"):
        find(records, None)
    with pytest.raises(ConfigError, match="take the lab down first"):
        find(records, "other", adding=True)
    assert find(records[:1], None) is records[0]


def test_a_version_1_state_reads_as_one_default_volume(tmp_path: Path) -> None:
    v1 = {
        "version": 1,
        "name": "dbsim-lab",
        "created_at": 0.0,
        "size_bytes": 1 << 30,
        "image": str(tmp_path / "gone.img"),
        "loop": "/dev/loop-none",
        "dev": "7:99",
        "mount_point": str(tmp_path / "mnt"),
        "mount_dir_created": True,
        "mounted": True,
        "cgroups": {},
        "memory_limit_bytes": 256 << 20,
        "ceilings": {"read_iops": 500, "write_iops": None, "read_bps": None, "write_bps": None},
        "postgres": None,
    }
    (tmp_path / "state.json").write_text(json.dumps(v1))
    lab = Lab(tmp_path, tmp_path)
    state = lab.load_state()
    assert state is not None and state["version"] == 2
    assert state["root"] == v1["mount_point"] and not state["root_dir_created"]
    (volume,) = state["volumes"]
    assert volume["name"] == DEFAULT_VOLUME
    assert (volume["image"], volume["loop"], volume["mount_dir_created"]) == (
        v1["image"],
        "/dev/loop-none",
        True,
    )
    assert volume["ceilings"]["read_iops"] == 500
    status = lab.status()
    assert not status["up"]
    assert status["device"] == "/dev/loop-none" and status["ceilings"]["read_iops"] == 500
    assert any("is not attached" in p for p in status["problems"]), status["problems"]
    lines = text_lines(status)
    assert lines[0] == "lab dbsim-lab: NOT up" and not any(x.startswith("volume") for x in lines)
