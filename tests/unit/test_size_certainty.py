"""Issue #30, part 3: one certainty per answer, never above its weakest input, in text and in
JSON, each matching what its page prints: the derived Extreme rate, the EDA 'up to' maxima, the
computed smallest capacity, estimates never called published, the untested interpolation's
caveat, and the A800's starting IOPS as data."""

from __future__ import annotations

import itertools

import pytest

from sim.cli.size import exit_code, render
from storage.envelopes import ENVELOPE_NAMES, Workload, get_envelope, size
from storage.envelopes.certainty import CERTAINTIES, basis_certainty
from storage.envelopes.model import Envelope
from storage.envelopes.scaling import levels
from storage.envelopes.schema import Point
from storage.envelopes.units import parse_capacity
from storage.envelopes.verify import SEEDS_DIR, transcription_problems

needs_seeds = pytest.mark.skipif(
    not SEEDS_DIR.is_dir(), reason=f"the seed documents are not at {SEEDS_DIR}"
)
GCNV_000 = "000_86fde6e6690b0d9c.txt"
GCNV_002 = "002_26a53d12d47323af.txt"
A800_003 = "003_feeaf53e70529773.txt"


def numbers(read: float, write: float, block_kib: float) -> Workload:
    return Workload.from_numbers(read_iops=read, write_iops=write, block_kib=block_kib)


def seed_line(name: str, line: int) -> str:
    return (SEEDS_DIR / name).read_text(encoding="utf-8").splitlines()[line - 1]


# --------------------------------------------------------------------------- derived


def test_the_extreme_rate_is_derived_and_says_how() -> None:
    # 200.000 IOPS at 4 KiB = 781,25 MiB/s on 5 TiB Extreme: 128 x 5 = 640 MiB/s binds. The
    # page gives a 200 TiB pool at 25.600 MiBps, never "128 per TiB": derived, not published.
    answer = size(
        get_envelope("gcnv-extreme-nfsv3"),
        numbers(150_000, 50_000, 4),
        capacity_tib=parse_capacity("5TiB"),
    )
    limit = answer.binding.limit
    assert (limit.basis, answer.certainty, exit_code(answer)) == ("derived", "derived", 1)
    assert limit.value == 640 and limit.label.startswith("derived Extreme throughput at 5 TiB")
    said = "25,600 MiBps / 200 TiB (the page prints 25.600): the page gives this Extreme pool "
    said += f"example (seed {GCNV_002}, line 139), not a rate per TiB"
    assert limit.derivation == f"128 MiBps per TiB = {said}"
    text = render(answer)
    assert f"figure: derived — 128 MiBps per TiB = {said}" in text
    assert "DOES NOT FIT: the throughput limit binds — derived Extreme throughput" in text
    data = answer.to_dict()
    assert (data["certainty"], data["basis"], data["derivation"]) == (
        "derived",
        "derived",
        limit.derivation,
    )
    assert any(c["basis"] == "derived" and c["derivation"] for c in data["limits"])
    assert "(line 139)" in data["source"][0]


def test_premiums_rate_is_stated_so_published() -> None:
    # "um pool Premium de 40 TiB pode atingir ... 2.560 MiBps a 64 MiBps por TiB": stated.
    answer = size(
        get_envelope("gcnv-extreme-nfsv3"),
        numbers(25_600, 0, 4),
        capacity_tib=2.0,
        service_level="Premium",
    )
    limit = answer.binding.limit
    assert limit.scales_with == "capacity" and limit.basis == "published"
    assert answer.certainty == "published" and limit.derivation is None
    assert "64 MiBps per TiB, as stated" in limit.label


@needs_seeds
def test_the_derivation_matches_its_line_of_the_page() -> None:
    line = seed_line(GCNV_002, 139)
    assert "pool Extreme de 200 TiB" in line and "25.600 MiBps" in line
    assert "128" not in line  # the rate itself is not printed: hence derived
    assert "64 MiBps por TiB" in line  # Premium's is


# --------------------------------------------------------------------------- up to


def test_the_eda_maxima_say_what_the_page_leaves_unstated() -> None:
    env = get_envelope("gcnv-large-volume-eda")
    answer = size(env, Workload.from_numbers(read_mibps=10_000, write_mibps=8_000, block_kib=256))
    limit = answer.binding.limit
    assert limit.kind == "throughput" and answer.certainty == "estimate"
    unstated = "the read/write mix, the request size, whether it was reached together with the"
    assert f"not stated: {unstated} 1,350,000 IOPS" in limit.label
    assert "(line 393)" in limit.sources[0]
    text = render(answer)
    assert f'EDA large-volume throughput ("até", up to); not stated: {unstated}' in text
    assert "FITS (on an estimate: see the caveat)" in text and "caveat: " in text
    data = answer.to_dict()
    assert data["certainty"] == "estimate" and data["certainty_caveat"]
    iops = next(c for c in data["limits"] if c["kind"] == "iops")
    assert f"not stated: {unstated} 21.5 GiBps" in iops["label"]
    assert exit_code(answer) == 0


@needs_seeds
def test_the_eda_line_states_no_mix_no_size_and_says_up_to() -> None:
    line = seed_line(GCNV_000, 393)
    assert "até 21,5 GiBps" in line and "até 1.350.000 IOPS" in line
    assert "%" not in line and "KiB" not in line  # no mix, no request size on the page


# --------------------------------------------------------------------------- computed


def test_the_smallest_capacity_is_computed_and_says_from_what() -> None:
    # 781,25 MiB/s / 128 MiBps per TiB = 6,1035 TiB = 6.250 GiB: computed from a derived rate.
    answer = size(
        get_envelope("gcnv-extreme-nfsv3"),
        numbers(150_000, 50_000, 4),
        capacity_tib=parse_capacity("5TiB"),
    )
    assert answer.smallest_capacity_basis == "computed"
    assert answer.smallest_capacity == (
        "6,250 GiB (6.10 TiB) at Extreme — computed: 781.2 MiB/s ÷ 128 MiBps per TiB "
        "(derived: 25,600 MiBps / 200 TiB (the page prints 25.600)), rounded up to a whole GiB"
    )
    assert f"smallest capacity that fits: {answer.smallest_capacity}" in render(answer)
    data = answer.to_dict()
    assert (data["smallest_capacity_basis"], data["smallest_capacity_tib"]) == (
        "computed",
        pytest.approx(6250 / 1024),
    )
    # OCI: between the published sizes, computed and an estimate.
    oci = size(
        get_envelope("oci-bv-balanced"),
        numbers(15_000, 5_000, 4),
        capacity_tib=parse_capacity("500GB"),
    )
    assert oci.smallest_capacity.startswith("785 GB")
    assert "estimate: linear between published sizes" in oci.smallest_capacity
    assert "— computed: " in oci.smallest_capacity and oci.smallest_capacity_basis == "computed"
    # No capacity computed: no basis.
    slob = size(get_envelope("gcnv-iscsi-slob"), numbers(90_000, 10_000, 8))
    assert slob.smallest_capacity_tib is None and slob.smallest_capacity_basis is None


# --------------------------------------------------------------------------- weakest input

SIZES = (2, 4, 8, 16, 128, 1024)  # below, at, at, bridged, between, above the tables
MIXES = (0.0, 0.5, 0.8, 0.9, 1.0)  # published on some page, or between


def _answers() -> list[tuple[str, float, float, str | None, float | None]]:
    cases: list[tuple[str, float, float, str | None, float | None]] = []
    for name in ENVELOPE_NAMES:
        known: list[str | None] = [lv.level for lv in levels(get_envelope(name))] or [None]
        capacities = [None, 1.0] if known != [None] else [None]  # 1 TiB: the rate binds
        for mix, block, level, tib in itertools.product(MIXES, SIZES, known, capacities):
            cases.append((name, mix, float(block), level, tib))
    return cases


def test_certainty_is_never_above_its_weakest_input() -> None:
    seen: set[str] = set()
    for name, mix, block, level, capacity in _answers():
        env = get_envelope(name)
        total = 20_000.0
        answer = size(
            env,
            numbers(total * mix, total * (1 - mix), block),
            service_level=level,
            capacity_tib=capacity,
        )
        limit = answer.binding.limit
        rank = CERTAINTIES.index(answer.certainty)
        assert rank >= CERTAINTIES.index(basis_certainty(limit, answer.binding.demand))
        estimated = any(f.kind == "estimate" for f in limit.flags)
        if answer.certainty == "published":
            assert limit.basis == "published" and not estimated, (name, mix, block, level)
            # How the workload was read (its size) is an input of any figure a table sets;
            # a rate per TiB or a provisioned pool does not depend on it.
            if limit.scales_with == "none":
                assert not any(f.kind == "estimate" for f in answer.flags)
        if estimated:
            assert rank >= CERTAINTIES.index("estimate"), (name, mix, block, level)
        if level is not None and level != env.spec.service_level and limit.scales_with == "none":
            assert answer.certainty != "published"  # Premium read against Extreme tables
        data = answer.to_dict()
        assert data["certainty"] == answer.certainty  # one certainty, the same in JSON
        assert (data["certainty_caveat"] is not None) == (
            answer.certainty in ("estimate", "untested") and answer.fits is not None
        )
        seen.add(answer.certainty)
    assert seen >= {"published", "derived", "interpolated", "estimate", "untested", "outside"}


@pytest.mark.parametrize(
    ("name", "read", "write", "block"),
    [
        ("gcnv-iscsi-slob", 90_000, 10_000, 8),  # SLOB at 90/10: no request size stated
        ("gcnv-iscsi-ssb", 80_000, 20_000, 8),
        ("aff-a800-nvmeof-sql", 900_000, 100_000, 8),
        ("aff-a800-nvmeof-oracle", 800_000, 200_000, 8),
        ("oci-bv-balanced", 10_000, 0, 4),  # no mix stated for OCI's figures
        ("gcnv-large-volume-eda", 100_000, 0, 8),  # an 'up to' of one mixed run
        ("gcnv-extreme-nfsv3", 100_000, 0, 16),  # 8 → 64 KiB bridge of random to sequential
    ],
)
def test_a_published_figure_under_an_estimate_is_not_published(
    name: str, read: float, write: float, block: float
) -> None:
    answer = size(get_envelope(name), numbers(read, write, block))
    assert any(f.kind == "estimate" for f in answer.binding.limit.flags)
    assert answer.fits and answer.certainty == "estimate" and exit_code(answer) == 0
    text = render(answer)
    assert "(on an estimate: see the caveat)" in text
    assert "caveat: this verdict rests on an assumption the page does not state" in text
    assert "figure: published (a stored point" not in text
    data = answer.to_dict()
    assert data["certainty"] == "estimate" and "exit 0" in data["certainty_caveat"]


def test_a_workload_read_at_an_assumed_size_is_an_estimate() -> None:
    # 100.000 IOPS and 1.000 MiB/s imply 10,24 KiB requests; --block-size 4KiB reads the
    # 4 KiB table at 100 % read (380.000 IOPS, published, 26.3 % used; the bandwidth, 19.1 %
    # of 5.237 MiB/s, does not bind): its figure is published, reading the workload there is
    # not.
    answer = size(
        get_envelope("gcnv-extreme-nfsv3"),
        Workload.from_numbers(read_iops=100_000, read_mibps=1_000, block_kib=4),
    )
    assert answer.binding.limit.basis == "published" and answer.certainty == "estimate"
    assert "differs from the 10.2 KiB implied" in render(answer).split("figure: ")[1]


# --------------------------------------------------------------------------- untested


def test_an_untested_fit_exits_0_with_its_caveat_line() -> None:
    # ANF prints pure read and pure write only: 50/50 is interpolated with nothing to test
    # the rule against. FITS, exit 0 (docs/sizing.md), with the caveat line and the JSON word.
    env = get_envelope("anf-linux-volume")
    fits = size(env, numbers(50_000, 50_000, 4))
    assert (fits.certainty, fits.fits, exit_code(fits)) == ("untested", True, 0)
    text = render(fits)
    assert "FITS (on an interpolation its page cannot test): " in text
    caveat = (
        "caveat: this verdict rests on an interpolation that no published point of the page "
        "can test (its error is unknown), not on a published figure; exit 0, as any fit "
        "(JSON: certainty 'untested')"
    )
    assert caveat in text
    data = fits.to_dict()
    assert (data["certainty"], data["certainty_caveat"]) == ("untested", caveat[len("caveat: ") :])
    over = size(env, numbers(150_000, 150_000, 4))
    assert (over.certainty, over.fits, exit_code(over)) == ("untested", False, 1)
    assert "exit 1, as any misfit" in render(over)


# --------------------------------------------------------------------------- A800 starts

A800_STARTS = {  # (envelope, table, read %): (start IOPS as printed, line of seed 003)
    ("aff-a800-nvmeof-sql", "sql", 90): ("139,989", 22),
    ("aff-a800-nvmeof-oracle", "oracle", 90): ("118,586", 25),
    ("aff-a800-nvmeof-oracle", "oracle", 80): ("104,206", 26),
    ("aff-a800-nvmeof", "four-corners-4k-random", 100): ("217,460", 17),
    ("aff-a800-nvmeof", "four-corners-4k-random", 0): ("48,987", 18),
}


def _point(name: str, table_id: str, pct: float) -> Point:
    (table,) = [t for t in get_envelope(name).spec.tables if t.id == table_id]
    (point,) = [p for p in table.points if p.read_pct == pct]
    return point


def test_the_a800_starting_iops_are_data_and_shown() -> None:
    for (name, table_id, pct), (printed, _line) in A800_STARTS.items():
        point = _point(name, table_id, pct)
        assert point.start_iops == float(printed.replace(",", ""))
        assert point.printed["start_iops"] == printed
        assert point.start_iops < point.sum
    answer = size(get_envelope("aff-a800-nvmeof-sql"), numbers(900_000, 100_000, 8))
    said = "90 % read: 0.5396 ms at the peak (the curve started at 139,989 IOPS)"
    assert f"latency published at that figure: {said}" in render(answer)
    assert answer.to_dict()["binding_latency"] == [said]
    four = size(get_envelope("aff-a800-nvmeof"), numbers(2_000_000, 0, 4))
    assert four.to_dict()["binding_latency"] == [
        "100 % read: 1.22 ms at the peak (the curve started at 217,460 IOPS at 196.8 µs)"
    ]


@needs_seeds
def test_the_a800_starts_are_on_their_lines_and_checked_like_any_figure() -> None:
    for (name, table_id, pct), (printed, line) in A800_STARTS.items():
        assert printed in seed_line(A800_003, line), (name, table_id, pct)
    # A start that is not what the page prints is a transcription problem.
    env = get_envelope("aff-a800-nvmeof-oracle")
    (table,) = env.spec.tables
    moved = [p.model_copy(update={"start_iops": 118_587.0}) for p in table.points]
    spec = env.spec.model_copy(update={"tables": [table.model_copy(update={"points": moved})]})
    problems = transcription_problems(Envelope(spec, env.vendor, env.file, env.seeds))
    assert any("start_iops = 118587.0" in p and "118,586" in p for p in problems), problems
