"""Published envelopes: the data files validate, every figure is found again in its seed, and
the model returns published figures exactly, interpolates monotonically and flags what lies
outside the published points."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from sim.errors import ConfigError
from storage.envelopes import ENVELOPE_NAMES, envelopes, get_envelope
from storage.envelopes.model import DATA_DIR, Envelope, load_file
from storage.envelopes.schema import (
    EnvelopeSpec,
    Point,
    ProfileFile,
    Source,
    Table,
    iter_sources,
)
from storage.envelopes.units import parse_block_size, parse_capacity, to_mibps, to_ops
from storage.envelopes.verify import SEEDS_DIR, transcription_problems

needs_seeds = pytest.mark.skipif(
    not SEEDS_DIR.is_dir(), reason=f"the seed documents are not at {SEEDS_DIR}"
)


def seed_text(name: str) -> str:
    return (SEEDS_DIR / name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- data files


def test_every_data_file_validates_and_names_are_listed() -> None:
    files = sorted(DATA_DIR.glob("*.yaml"))
    assert [f.name for f in files] == ["aff_a800.yaml", "anf.yaml", "gcnv.yaml", "oci.yaml"]
    names = [env.name for path in files for env in load_file(path)]
    assert sorted(names) == sorted(ENVELOPE_NAMES)
    assert list(envelopes()) == list(ENVELOPE_NAMES)


def test_every_table_cites_a_seed_section() -> None:
    for env in envelopes().values():
        sources = iter_sources(env.spec)
        assert sources, env.name
        for table in env.spec.tables:
            assert table.source.section and table.source.seed in env.seeds
            assert table.source.rows or table.source.quotes
        assert "seed " in env.spec.tables[0].source.cite() if env.spec.tables else True


@needs_seeds
@pytest.mark.parametrize("name", ENVELOPE_NAMES)
def test_every_figure_is_found_in_its_seed(name: str) -> None:
    assert transcription_problems(get_envelope(name)) == []


@needs_seeds
def test_a_transcription_error_is_caught() -> None:
    env = get_envelope("gcnv-extreme-nfsv3")
    table = next(t for t in env.spec.tables if t.id == "nfs-4k-random")
    wrong = [
        p.model_copy(update={"write": 57_400}) if p.read_pct == 75 else p for p in table.points
    ]
    tables = [t.model_copy(update={"points": wrong}) if t is table else t for t in env.spec.tables]
    mutated = Envelope(
        env.spec.model_copy(update={"tables": tables}), env.vendor, env.file, env.seeds
    )
    problems = transcription_problems(mutated)
    assert any("75 % read write is 57400" in p for p in problems), problems


@needs_seeds
@pytest.mark.parametrize(
    ("seed", "section", "printed"),
    [
        # The issue's row: 4 KiB random, 75 % read, Extreme, NFSv3 (not SMB, not iSCSI).
        ("000_86fde6e6690b0d9c.txt", "Nível de serviço extremo", "Ler IOPS 380.000 172.000"),
        ("000_86fde6e6690b0d9c.txt", "Nível de serviço extremo", "Gravar IOPS 0 57.300 79.800"),
        ("000_86fde6e6690b0d9c.txt", "Oracle Database", "~157.000 0,40 ms"),
        ("000_86fde6e6690b0d9c.txt", "Microsoft SQL Server", "~100.000 <1 ms"),
        ("001_ec11900240184765.txt", "IOPS de carga de trabalho do Linux", "~460.000"),
        ("004_2edda23bd904e66d.txt", "Volume em Blocos de 1 TB", "320 MBS"),
        ("003_feeaf53e70529773.txt", "Performance", "403K IOPS ou 25 Go/s"),
        ("002_26a53d12d47323af.txt", "QoS manual", "25.600 MiBps"),
    ],
)
def test_spot_checks_in_the_seed_text(seed: str, section: str, printed: str) -> None:
    text = seed_text(seed)
    assert section in text
    assert printed in text[text.index(section) :]


def test_spot_checks_in_the_data() -> None:
    extreme = get_envelope("gcnv-extreme-nfsv3")
    t4 = next(t for t in extreme.spec.tables if t.id == "nfs-4k-random")
    assert next(p for p in t4.points if p.read_pct == 75).model_dump(include={"read", "write"}) == {
        "read": 172_000,
        "write": 57_300,
    }
    assert "NFS 4 KiB Random" in (t4.source.caption or "")
    smb = get_envelope("gcnv-extreme-smb")
    s4 = next(t for t in smb.spec.tables if t.id == "smb-4k-random")
    assert next(p for p in s4.points if p.read_pct == 75).read == 164_700
    slob = get_envelope("gcnv-iscsi-slob").spec.tables[0]
    assert [(p.read_pct, p.total, p.latency_ms) for p in slob.sorted_points()] == [
        (90, 145_000, 0.38),
        (100, 157_000, 0.40),
    ]
    oci = get_envelope("oci-bv-balanced").spec.capacity.points
    assert [(p.capacity.value, p.capacity.unit, p.iops) for p in oci] == [
        (50, "GB", 3000),
        (1, "TB", 25_000),
    ]


# --------------------------------------------------------------------------- schema


def _spec_dict() -> dict[str, object]:
    raw = yaml.safe_load((DATA_DIR / "anf.yaml").read_text(encoding="utf-8"))
    assert isinstance(raw, dict)
    return raw


def test_schema_rejects_unknown_keys_and_incoherent_points() -> None:
    raw = _spec_dict()
    raw["envelopes"][0]["colour"] = "blue"  # type: ignore[index]
    with pytest.raises(ValidationError):
        ProfileFile.model_validate(raw)
    with pytest.raises(ValidationError, match="either read and write, or total"):
        Point(read_pct=50, read=1, write=1, total=2)
    with pytest.raises(ValidationError, match="cannot have writes"):
        Point(read_pct=100, read=1, write=1)
    with pytest.raises(ValidationError, match="rows or a quote"):
        Source(seed="000_86fde6e6690b0d9c.txt", section="x")
    with pytest.raises(ValidationError):
        Source(seed="somewhere.txt", section="x", quotes=["y"])


def test_schema_rejects_a_seed_not_listed(tmp_path: Path) -> None:
    raw = _spec_dict()
    raw["seeds"][0]["file"] = "009_0000000000000000.txt"  # type: ignore[index]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: .*not listed in seeds"):
        load_file(path)


def test_unknown_envelope_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown envelope 'gcnv-ultra'.*gcnv-extreme-nfsv3"):
        get_envelope("gcnv-ultra")


# --------------------------------------------------------------------------- interpolation


def _ops(table: Table, value: float) -> float:
    return to_ops(value, table.unit, table.block_size_kib)


@pytest.mark.parametrize("name", ENVELOPE_NAMES)
def test_published_points_come_back_exactly(name: str) -> None:
    env = get_envelope(name)
    for table in env.spec.tables:
        for point in table.points:
            rate = env.rate(table, point.fraction)
            assert rate.published and not rate.flags
            if point.total is None:
                assert rate.read == _ops(table, point.read or 0)
                assert rate.write == _ops(table, point.write or 0)
            else:
                assert rate.total == pytest.approx(_ops(table, point.total), rel=1e-12)
            if table.block_size_kib is None:
                continue
            # And the limit read at the table's own size shows the table's own unit.
            limits = env.table_limits(point.fraction, table.block_size_kib)
            kind = "iops" if table.access == "random" else "throughput"
            limit = next(lim for lim in limits if lim.kind == kind)
            # In the limit's unit: IOPS for random tables, MiB/s for sequential ones.
            scale = 1.0 if kind == "iops" else table.block_size_kib / 1024
            assert limit.value == pytest.approx(_ops(table, point.sum) * scale, rel=1e-12)
            if table.unit in ("IOPS", "MiB/s") and (kind == "iops") == (table.unit == "IOPS"):
                assert limit.value == point.sum  # exactly the printed figure
                assert limit.read == point.read


def test_the_issue_row_is_returned_as_published() -> None:
    env = get_envelope("gcnv-extreme-nfsv3")
    (iops, _bandwidth) = env.table_limits(0.75, 4)
    assert (iops.kind, iops.value, iops.read, iops.write) == ("iops", 229_300, 172_000, 57_300)


@pytest.mark.parametrize("name", ENVELOPE_NAMES)
def test_between_published_mixes_totals_stay_between_and_below_the_chord(name: str) -> None:
    env = get_envelope(name)
    for table in env.spec.tables:
        points = table.sorted_points()
        for lo, hi in itertools.pairwise(points):
            t_lo, t_hi = _ops(table, lo.sum), _ops(table, hi.sum)
            previous_read, previous_write = env.rate(table, lo.fraction), None
            for step in range(1, 10):
                f = lo.fraction + (hi.fraction - lo.fraction) * step / 10
                rate = env.rate(table, f)
                assert min(t_lo, t_hi) - 1e-6 <= rate.total <= max(t_lo, t_hi) + 1e-6
                chord = t_lo + (t_hi - t_lo) * step / 10
                assert rate.total <= chord + 1e-6  # harmonic lies below the linear chord
                assert rate.read >= previous_read.read - 1e-6  # more reads as f grows
                if previous_write is not None:
                    assert rate.write <= previous_write.write + 1e-6
                previous_read, previous_write = rate, rate


def test_harmonic_mix_interpolation_by_hand() -> None:
    # 62.5 % read lies halfway between 50 % (79.800 + 79.800) and 75 % (172.000 + 57.300):
    # 1/T = (1/159.600 + 1/229.300) / 2, T = 2 x 159.600 x 229.300 / 388.900 = 188.204,06.
    env = get_envelope("gcnv-extreme-nfsv3")
    table = next(t for t in env.spec.tables if t.id == "nfs-4k-random")
    rate = env.rate(table, 0.625)
    assert rate.total == pytest.approx(2 * 159_600 * 229_300 / 388_900)
    assert rate.read == pytest.approx(0.625 * rate.total)


def test_block_size_interpolation_is_monotonic_and_by_service_time() -> None:
    env = get_envelope("gcnv-extreme-nfsv3")
    # 6 KiB, 100 % read: halfway between 380.000 (4 KiB) and 265.000 (8 KiB) in service
    # time: T = 2 x 380.000 x 265.000 / 645.000 = 312.248,06.
    iops = env.iops_limit(1.0, 6)
    assert iops is not None and iops.value == pytest.approx(2 * 380_000 * 265_000 / 645_000)
    assert not iops.flags
    for f in (0.0, 0.25, 0.5, 0.75, 1.0):
        values = [env.iops_limit(f, b) for b in (4, 5, 6, 7, 8, 16, 32, 48, 63)]
        totals = [v.value for v in values if v is not None]
        assert totals == sorted(totals, reverse=True)  # bigger requests, fewer IOPS
        bandwidths = [env.throughput_limit(f, b) for b in (64, 96, 128, 192, 256)]
        mibps = [b.value for b in bandwidths if b is not None]
        ends = sorted((mibps[0], mibps[-1]))
        assert all(ends[0] - 1e-6 <= m <= ends[1] + 1e-6 for m in mibps)
    # The 8 → 64 KiB bridge is an estimate; at 64 KiB the bandwidth table governs alone.
    bridge = env.iops_limit(1.0, 16)
    assert bridge is not None and any(f.kind == "estimate" for f in bridge.flags)
    assert env.iops_limit(1.0, 64) is None


# --------------------------------------------------------------------------- out of range


def _kinds(limit: object) -> set[str]:
    return {f.kind for f in getattr(limit, "flags", ())}


def test_out_of_range_mix_is_flagged_not_extrapolated() -> None:
    env = get_envelope("gcnv-iscsi-slob")
    (limit,) = env.table_limits(0.7, 8)
    assert "out_of_range" in _kinds(limit)
    assert limit.value == 145_000  # the nearest published total, not an extrapolation


def test_out_of_range_block_sizes_are_flagged() -> None:
    env = get_envelope("gcnv-extreme-nfsv3")
    small = env.iops_limit(0.75, 2)
    assert small is not None and "out_of_range" in _kinds(small) and small.value == 229_300
    big = env.throughput_limit(1.0, 1024)
    assert big is not None and "out_of_range" in _kinds(big) and big.value == 4928
    inside = env.table_limits(0.6, 6)
    assert all("out_of_range" not in _kinds(lim) for lim in inside)


def test_endpoint_only_seeds_flag_their_interpolation() -> None:
    env = get_envelope("anf-linux-volume")
    (iops, _) = env.table_limits(0.5, 4)
    assert "estimate" in _kinds(iops)
    assert iops.value == pytest.approx(2 * 460_000 * 130_000 / 590_000)


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("text", "tib"),
    [
        ("10TiB", 10),
        ("512 GiB", 0.5),
        ("1PiB", 1024),
        ("1TB", 1e12 / 2**40),
        ("50GB", 5e10 / 2**40),
    ],
)
def test_capacities_parse(text: str, tib: float) -> None:
    assert parse_capacity(text) == pytest.approx(tib)


@pytest.mark.parametrize(
    ("text", "kib"), [("8KiB", 8), ("8k", 8), ("64kB", 64), ("1MiB", 1024), ("512B", 0.5)]
)
def test_block_sizes_parse(text: str, kib: float) -> None:
    assert parse_block_size(text) == pytest.approx(kib)


@pytest.mark.parametrize("text", ["10", "10 furlongs", "-1TiB", "0TiB", "10MiB", "TiB"])
def test_bad_capacities_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="capacity"):
        parse_capacity(text)


@pytest.mark.parametrize("text", ["8", "8XB", "0KiB", "8 TiB"])
def test_bad_block_sizes_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="block size"):
        parse_block_size(text)


def test_bandwidth_units() -> None:
    assert to_mibps(21.5, "GiB/s") == 22_016
    assert to_mibps(320, "MB/s") == pytest.approx(305.17578125)
    assert to_mibps(24_000, "KB/s") == pytest.approx(22.88818359375)


def test_envelope_spec_requires_figures() -> None:
    with pytest.raises(ValidationError, match="no published figures"):
        EnvelopeSpec.model_validate(
            {
                "name": "empty",
                "title": "t",
                "protocol": "p",
                "service_level": "s",
                "scope": "s",
                "conditions": {"clients": "none"},
                "capacity": {"kind": "none"},
            }
        )


# --------------------------------------------------------------------------- citations


def _cited(env: Envelope, fraction: float, block_kib: float, kind: str) -> tuple[str, ...]:
    limit = next(lim for lim in env.table_limits(fraction, block_kib) if lim.kind == kind)
    return limit.sources


@pytest.mark.parametrize("name", ENVELOPE_NAMES)
def test_every_published_point_cites_its_own_row(name: str) -> None:
    # Read at a published point's own mix (and size), the limit cites that point alone: its
    # column of a table, or the quote that prints its figures, under the point's own source.
    env = get_envelope(name)
    for table in env.spec.tables:
        block = table.block_size_kib or 8.0
        kind = "iops" if table.access != "sequential" else "throughput"
        for point in table.points:
            (cited,) = _cited(env, point.fraction, block, kind)
            source = point.source or table.source
            assert source.path() in cited
            if source.rows:
                assert source.columns is not None
                assert f"column «{source.columns.label(point.read_pct)}»" in cited
            for shown in point.printed.values():
                assert shown in cited


@pytest.mark.parametrize(
    ("name", "fraction", "block", "kind", "quoted"),
    [
        # The issue's mis-citations: each answer cites the row that bound it.
        ("gcnv-iscsi-slob", 0.9, 8, "iops", "90% leem e 10% escrevem ~145.000 0,38 ms"),
        ("gcnv-iscsi-ssb", 0.8, 8, "iops", "80% leem e 20% escrevem ~100.000 <1 ms"),
        ("anf-nfsv3-single-client", 0.0, 64, "throughput", "1.500 MiB/s é aproximadamente"),
        ("aff-a800-nvmeof", 0.0, 64, "throughput", "a atteint un pic à 120,314 7.52 IOPS"),
        ("aff-a800-nvmeof-sql", 0.8, 8, "iops", "un pic de 1,108,068 658 XNUMX IOPS"),
    ],
)
def test_the_binding_row_is_cited(
    name: str, fraction: float, block: float, kind: str, quoted: str
) -> None:
    (cited,) = _cited(get_envelope(name), fraction, block, kind)
    assert quoted in cited


def test_oci_figures_cite_the_section_they_sit_in() -> None:
    from storage.envelopes import Workload, size

    env = get_envelope("oci-bv-balanced")
    w = Workload.from_numbers(read_iops=1000, block_kib=4)
    limits = {
        c.limit.kind: c.limit for c in size(env, w, capacity_tib=parse_capacity("1TB")).checks
    }
    methodology = "Testando a Metodologia e o Desempenho da Opção de Desempenho Elástico Balanceado"
    assert limits["iops"].sources == (
        f"seed 004_2edda23bd904e66d.txt › {methodology} (line 11): «Volume de 1 TB - 25.000 IOPS @ 4K»",
    )
    (bandwidth,) = limits["throughput"].sources
    assert "› Volume em Blocos de 1 TB (line 23):" in bandwidth and "320 MBS" in bandwidth
    # 50 GB: only the 50 GB point is cited (not the 1 TB one).
    small = size(env, w, capacity_tib=parse_capacity("50GB")).checks
    assert all("1 TB" not in s for c in small for s in c.limit.sources)


@pytest.mark.parametrize(("block", "table"), [(8, "8 KiB random"), (256, "256 KiB sequential")])
def test_at_a_published_size_only_that_table_is_named(block: float, table: str) -> None:
    env = get_envelope("gcnv-extreme-nfsv3")
    # Exactly at 8 KiB (or 256 KiB) the 8 KiB (256 KiB) table alone is used, so it alone is
    # named and cited, not its neighbour too.
    limits = env.table_limits(0.75, block)
    (named,) = [lim for lim in limits if table in lim.label]
    assert named.label.endswith(f"({table})")
    (cited,) = named.sources
    assert f"Tamanho do bloco de {block} KiB" in cited and "column «75% leem" in cited


@needs_seeds
def test_a_quote_under_the_wrong_section_is_caught() -> None:
    # Before the fix the OCI 1 TB IOPS quote was cited under "Volume em Blocos de 1 TB"; it
    # sits in the list under the methodology heading. Moving it back must be reported.
    env = get_envelope("oci-bv-balanced")
    rule = env.spec.capacity
    moved = [
        p.model_copy(
            update={"source": p.source.model_copy(update={"section": "Volume em Blocos de 1 TB"})}
        )
        if p.capacity.unit == "TB"
        else p
        for p in rule.points
    ]
    spec = env.spec.model_copy(update={"capacity": rule.model_copy(update={"points": moved})})
    problems = transcription_problems(Envelope(spec, env.vendor, env.file, env.seeds))
    assert any("not under 'Volume em Blocos de 1 TB'" in p and "25.000" in p for p in problems)


# --------------------------------------------------------------------------- A800, decoded

# Each scrambled sentence's numbers, in the order printed, and what they decode to when read
# into the sentence's slots in order: (start IOPS, start latency µs, peak IOPS, peak latency).
A800_SENTENCES = {
    "four-corners-4k-random/100": ("217,460 196.8", "2,184,220", "1.22", "ms"),
    "four-corners-4k-random/0": ("48,987 196", "465,445", "2.44", "ms"),
    "four-corners-64k-seq/0": ("110K", "120,314", "1.48", "ms"),
    "sql/90": ("139,989", "1,389,645", "539.6", "µs"),
    "sql/80": ("", "1,108,068", "658", "µs"),
    "oracle/90": ("118,586", "1,140,178", "397.6", "µs"),
    "oracle/80": ("104,206", "1,003,577", "468.8", "µs"),
}
THREADS = {  # the page's profiles: 128, 64, 16 and 8 threads
    "four-corners-4k-random/100": 128,
    "four-corners-4k-random/0": 64,
    "four-corners-64k-seq/100": 16,
    "four-corners-64k-seq/0": 8,
}
LUNS = 24


def _a800_points() -> dict[str, tuple[Table, Point]]:
    found = {}
    for name in ("aff-a800-nvmeof", "aff-a800-nvmeof-sql", "aff-a800-nvmeof-oracle"):
        for table in get_envelope(name).spec.tables:
            for point in table.points:
                found[f"{table.id}/{point.read_pct:g}"] = (table, point)
    return found


@needs_seeds
def test_a800_decoded_figures_read_in_order_from_their_sentence() -> None:
    points = _a800_points()
    for key, (start, peak, latency, unit) in A800_SENTENCES.items():
        _table, point = points[key]
        assert point.source is not None, key
        (quote,) = point.source.quotes
        # The peak and its latency follow the start in the sentence, in that order.
        at = [quote.index(part) for part in (start, peak, latency) if part]
        assert at == sorted(at), key
        assert point.sum == float(peak.replace(",", "")), key
        ms = float(latency) / (1000 if unit == "µs" else 1)
        assert point.latency_ms == pytest.approx(ms), key


def test_a800_decoding_agrees_with_the_conclusion_and_with_itself() -> None:
    points = _a800_points()
    mib = {k: p.sum * 64 / 1024 for k, (t, p) in points.items() if t.block_size_kib == 64}
    # The page's "GB/s" at 64 KiB is thousands of MiB/s: 403K -> "25", 120,314 -> "7.52".
    assert round(mib["four-corners-64k-seq/100"] / 1000) == 25
    assert round(mib["four-corners-64k-seq/0"] / 1000, 2) == 7.52
    # The conclusion read with its numbers shifted back by one slot: 4K 2.2 M read and 465K
    # write; SQL 1.4 / 1.1 M and Oracle 1.14 / 1 M IOPS at 90-10 / 80-20.
    conclusion = {
        "four-corners-4k-random/100": (2.2e6, 0.05e6),
        "four-corners-4k-random/0": (465e3, 1e3),
        "sql/90": (1.4e6, 0.05e6),
        "sql/80": (1.1e6, 0.05e6),
        "oracle/90": (1.14e6, 0.005e6),
        "oracle/80": (1.0e6, 0.05e6),
    }
    for key, (said, rounding) in conclusion.items():
        assert abs(points[key][1].sum - said) <= rounding, key
    # Little's law: IOPS x latency (requests in flight) lies within the profile's threads x
    # LUNs, and above half of it (a peak keeps most threads busy).
    for key, threads in THREADS.items():
        point = points[key][1]
        assert point.latency_ms is not None
        in_flight = point.sum * point.latency_ms / 1000
        assert threads * LUNS / 2 < in_flight <= threads * LUNS, key
    # The page says every SQL and Oracle profile stayed below 1 ms: so do the decoded peaks.
    for key in ("sql/90", "sql/80", "oracle/90", "oracle/80"):
        assert (points[key][1].latency_ms or 1.0) < 1.0, key
    # Each peak is above its start, as "culminé" / "pic" says (read by the words next to
    # them instead, the 4K read would "peak" at 1.22 IOPS after starting at 217,460).
    # The starts are data (start_iops), checked against the page like any printed figure.
    starts = {k: p.start_iops for k, (_t, p) in points.items() if p.start_iops is not None}
    assert set(starts) == set(A800_SENTENCES) - {"four-corners-64k-seq/0", "sql/80"}
    assert all(points[key][1].sum > start for key, start in starts.items())
    for key, start in starts.items():
        assert A800_SENTENCES[key][0].split()[0] == f"{start:,.0f}", key


# --------------------------------------------------------------------------- line numbers


@needs_seeds
def test_the_line_index_is_current_and_complete() -> None:
    import json

    from storage.envelopes.provenance import LINES_FILE, line_key
    from storage.envelopes.verify import line_index

    envs = list(envelopes().values())
    stored = json.loads(LINES_FILE.read_text(encoding="utf-8"))
    assert line_index(envs) == stored, (
        "regenerate: python -m storage.envelopes.verify --write-lines"
    )
    for env in envs:
        page = [c.source for c in env.caveats() if c.source is not None]
        for source in [*iter_sources(env.spec), *page]:
            path = " › ".join([*source.within, source.section])
            for text in [*source.quotes, *source.rows]:
                line = stored[line_key(source.seed, path, text)]
                printed = seed_text(source.seed).splitlines()[line - 1]
                assert " ".join(text.split())[:30] in " ".join(printed.split()), (line, text)


def test_citations_name_their_line() -> None:
    slob = get_envelope("gcnv-iscsi-slob")
    (limit,) = slob.table_limits(0.9, 8)
    assert "Oracle Database (line 371):" in limit.sources[0]
    extreme = get_envelope("gcnv-extreme-nfsv3")
    (iops, _) = extreme.table_limits(0.75, 4)
    assert "(E/S aleatória) (lines 143–144):" in iops.sources[0]
