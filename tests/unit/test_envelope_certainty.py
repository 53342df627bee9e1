"""Three kinds of number: every ceiling says whether it is published, interpolated (with the
leave-one-out band of its rule on that envelope's own tables) or outside the published points,
and the verdict says how far it can be trusted."""

from __future__ import annotations

import itertools

import pytest

from storage.envelopes import ENVELOPE_NAMES, Workload, get_envelope, size
from storage.envelopes.model import Envelope
from storage.envelopes.schema import Table
from storage.envelopes.uncertainty import band, mix_errors, size_errors
from storage.envelopes.units import to_ops

GCNV_TABLES = ("gcnv-flex-custom-nfsv3", "gcnv-extreme-nfsv3", "gcnv-extreme-smb")


def numbers(read: float, write: float, block_kib: float) -> Workload:
    return Workload.from_numbers(read_iops=read, write_iops=write, block_kib=block_kib)


def _totals(table: Table) -> list[tuple[float, float]]:
    """(read share, total ops/s) of every published point, by hand from the data file."""
    return [
        (p.fraction, to_ops(p.sum, table.unit, table.block_size_kib)) for p in table.sorted_points()
    ]


def _by_hand_mix_errors(env: Envelope) -> list[float]:
    # Leave each inner point out and read it from its neighbours: 1/T linear in the share.
    errors = []
    for table in env.spec.tables:
        points = _totals(table)
        for (f0, t0), (f1, t1), (f2, t2) in zip(points, points[1:], points[2:], strict=False):
            share = (f1 - f0) / (f2 - f0)
            estimate = 1 / (1 / t0 + share * (1 / t2 - 1 / t0))
            errors.append(estimate / t1 - 1)
    return errors


@pytest.mark.parametrize("name", ENVELOPE_NAMES)
def test_mix_bands_are_computed_from_the_envelopes_own_tables(name: str) -> None:
    env = get_envelope(name)
    expected = _by_hand_mix_errors(env)
    assert sorted(mix_errors(env)) == pytest.approx(sorted(expected))
    mix = band(env, ("mix",))
    assert mix.tested == bool(expected)
    if expected:
        assert mix.low_pct == pytest.approx(min(expected) * 100)
        assert mix.high_pct == pytest.approx(max(expected) * 100)
        assert mix.overshoots == sum(1 for e in expected if e > 1e-12)
        assert mix.cases == len(expected)


def test_the_interpolation_is_not_conservative_on_the_gcnv_tables() -> None:
    # The harmonic rule lies below the chord, but leaving points out shows it overshoots
    # published figures: it may not be called conservative there.
    for name in (*GCNV_TABLES, "gcnv-flex-unified-iscsi"):
        mix = band(get_envelope(name), ("mix",))
        assert mix.tested and not mix.conservative and mix.high_pct > 0
        assert "overshoot" in mix.describe() and "never overshot" not in mix.describe()


def test_the_size_band_includes_the_bridge_to_the_real_8k_figure() -> None:
    # Leaving the 8 KiB table out, the 4 KiB random → 64 KiB sequential bridge read at 8 KiB
    # (100 % read) against the published 8 KiB figure (265.000): by hand, 1/T linear in size.
    env = get_envelope("gcnv-extreme-nfsv3")
    t4, t64 = 380_000, 5237 * 1024 / 64
    bridged = 1 / (1 / t4 + (8 - 4) / (64 - 4) * (1 / t64 - 1 / t4))
    error = bridged / 265_000 - 1
    assert error > 0.1  # it promises more than the page measured
    assert any(e == pytest.approx(error) for e in size_errors(env))
    assert band(env, ("size",)).high_pct >= error * 100 - 1e-9


@pytest.mark.parametrize("name", ENVELOPE_NAMES)
def test_published_points_are_published_and_in_between_is_interpolated(name: str) -> None:
    env = get_envelope(name)
    for table in env.spec.tables:
        block = table.block_size_kib or 8.0
        kind = "iops" if table.access != "sequential" else "throughput"
        points = table.sorted_points()
        for point in points:
            limit = next(lim for lim in env.table_limits(point.fraction, block) if lim.kind == kind)
            assert limit.basis == "published" and limit.band is None
            assert limit.label.startswith("published ")
        for lo, hi in itertools.pairwise(points):
            middle = (lo.fraction + hi.fraction) / 2
            limit = next(lim for lim in env.table_limits(middle, block) if lim.kind == kind)
            assert limit.basis == "interpolated" and limit.rules == ("mix",)
            assert limit.band is not None and limit.label.startswith("interpolated ")
            assert limit.band.tested == bool(mix_errors(env))


def test_issue_mislabels_are_now_interpolated() -> None:
    env = get_envelope("gcnv-extreme-nfsv3")
    # 90/10 at 4 KiB: between the 100 % and 75 % columns, not a published figure.
    (iops,) = [lim for lim in env.table_limits(0.9, 4) if lim.kind == "iops"]
    assert iops.basis == "interpolated" and iops.label == "interpolated IOPS (4 KiB random)"
    assert iops.band is not None and iops.band.rules == ("mix",)
    # 6 KiB and 128 KiB: between two published sizes.
    six = env.iops_limit(1.0, 6)
    assert six is not None and six.basis == "interpolated" and six.rules == ("size",)
    wide = env.throughput_limit(1.0, 128)
    assert wide is not None and wide.basis == "interpolated"
    # 2 KiB and 1 MiB: outside, held from the nearest size.
    assert (env.iops_limit(0.75, 2) or wide).basis == "outside"
    assert (env.throughput_limit(1.0, 1024) or wide).basis == "outside"


def test_a_fit_inside_the_band_says_so() -> None:
    # 90/10 at 4 KiB: interpolated 300.898 IOPS; the mix rule overshot by up to +20.6 % on
    # this envelope, so the ceiling may be as low as 300.898 / 1,206: 300.000 fits only within
    # the interpolation's uncertainty; 200.000 fits even at the worst overshoot.
    env = get_envelope("gcnv-extreme-nfsv3")
    close = size(env, numbers(270_000, 30_000, 4))
    assert close.fits and close.certainty == "within_uncertainty"
    assert close.verdict_text() == "FITS, within the interpolation's uncertainty"
    data = close.to_dict()
    assert (data["verdict"], data["certainty"], data["basis"]) == (
        "fits",
        "within_uncertainty",
        "interpolated",
    )
    assert data["band"]["cases"] == 12 and data["band"]["tested"] is True
    assert close.binding.limit.band is not None
    lowest = close.binding.limit.band.lowest_ceiling(close.binding.limit.value)
    assert lowest < 300_000 <= close.binding.limit.value
    clear = size(env, numbers(180_000, 20_000, 4))
    assert clear.fits and clear.certainty == "interpolated"
    assert clear.verdict_text() == "FITS"
    # And over the interpolated ceiling but under its undershoot bound: does not fit, within.
    over = size(env, numbers(279_000, 31_000, 4))
    assert over.fits is False and over.certainty == "within_uncertainty"


@pytest.mark.parametrize(
    ("name", "read", "write"),
    [
        ("gcnv-iscsi-ssb", 60_000, 40_000),  # SSB at 60/40: published 100 % and 80 % only
        ("gcnv-iscsi-slob", 0, 50_000),  # a 0 %-read SLOB load against the 90/10 figure
    ],
)
def test_outside_the_published_mixes_there_is_no_fits(name: str, read: float, write: float) -> None:
    env = get_envelope(name)
    answer = size(env, numbers(read, write, 8))
    assert answer.fits is None and answer.verdict == "no_verdict"
    assert answer.certainty == "outside" and answer.binding.limit.basis == "outside"
    assert answer.verdict_text().startswith("NO VERDICT")
    assert answer.to_dict()["fits"] is None
    allowed = size(env, numbers(read, write, 8), allow_extrapolation=True)
    assert allowed.fits is True and allowed.extrapolated
    assert "extrapolated" in allowed.verdict_text()


def test_endpoint_only_pages_say_their_rule_is_untested() -> None:
    # ANF publishes pure read and pure write only: 50/50 is interpolated with no case on its
    # page to test the rule against; the verdict says so.
    env = get_envelope("anf-linux-volume")
    answer = size(env, numbers(50_000, 50_000, 4))
    assert answer.fits and answer.certainty == "untested"
    assert answer.binding.limit.band is not None and not answer.binding.limit.band.tested
    assert "cannot test" in answer.verdict_text()


def test_oci_at_an_unpublished_request_size_is_outside() -> None:
    # OCI states its IOPS at 4 KiB only: 8 KiB requests have no published point. At 4 KiB
    # the figure is the page's, but the page states no read/write mix for it (an estimate
    # flag on the binding limit): the answer is never "published" above that.
    env = get_envelope("oci-bv-balanced")
    at_4k = size(env, numbers(10_000, 0, 4), capacity_tib=1e12 / 2**40)
    assert at_4k.fits and at_4k.binding.limit.basis == "published"
    assert at_4k.certainty == "estimate"
    at_8k = size(env, numbers(10_000, 0, 8), capacity_tib=1e12 / 2**40)
    assert at_8k.fits is None and at_8k.binding.limit.basis == "outside"


# --------------------------------------------------------------------------- conditions, caveats


@pytest.mark.parametrize(
    ("name", "read", "write", "block", "said"),
    [
        # Latency at the published point beside the IOPS.
        (
            "gcnv-iscsi-slob",
            90_000,
            10_000,
            8,
            "latency published at that figure: 90 % read: 0.38 ms",
        ),
        ("gcnv-iscsi-ssb", 80_000, 20_000, 8, "latency published at that figure: 80 % read: <1 ms"),
        # The page's own caveats, its set-up and its units.
        ("gcnv-extreme-nfsv3", 100_000, 0, 4, "the page calls its IOPS results merely informative"),
        ("gcnv-extreme-nfsv3", 100_000, 0, 4, "subject to per-project limits"),
        (
            "gcnv-flex-unified-iscsi",
            100_000,
            0,
            8,
            "a pool of six 1 TiB volumes, each driven by its own host",
        ),
        ("gcnv-large-volume-eda", 100_000, 0, 64, "does not show them reached together"),
        ("oci-bv-balanced", 10_000, 0, 4, "are read as decimal"),
        ("anf-nfsv3-single-client", 0, 1000, 64, "bounded by the D32s_v4 instance's egress"),
        ("aff-a800-nvmeof", 100_000, 0, 4, "not one LUN or one host"),
    ],
)
def test_every_answer_carries_its_conditions_and_caveats(
    name: str, read: float, write: float, block: float, said: str
) -> None:
    from sim.cli.size import render

    env = get_envelope(name)
    answer = size(env, numbers(read, write, block), allow_extrapolation=True)
    text = render(answer)
    assert said in text
    data = answer.to_dict()
    shown = " ".join([*(c["text"] for c in data["caveats"]), *data["binding_latency"]])
    assert said.split(": ")[-1] in shown or said in " ".join(c["text"] for c in data["caveats"])
    assert data["conditions"]["clients"] == env.spec.conditions.clients
    # Every caveat that quotes its page cites where (its source is checked by the
    # transcription test like any figure's).
    for caveat, given in zip(env.caveats(), data["caveats"], strict=True):
        assert (given["source"] is None) == (caveat.source is None)
