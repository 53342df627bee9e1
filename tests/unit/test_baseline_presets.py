"""Every figure a baseline preset carries from a seed is cited, and every citation is found in
its seed: inside its section (from its heading, found after the ``within`` headings in order,
to the next heading of the seed's outline), whitespace folded — the rule the envelope
transcription check applies (storage/envelopes/verify.py). The outline of each seed is the
headings the envelope data lists for it plus every heading a preset cites."""

from __future__ import annotations

import re

import pytest

from sim.baseline.points import Cite, SeedLoad, human_bytes
from sim.baseline.presets import PRESETS
from sim.baseline.strategy import SEARCH_CITES
from storage.envelopes import envelopes
from storage.envelopes.verify import SEEDS_DIR

needs_seeds = pytest.mark.skipif(
    not SEEDS_DIR.is_dir(), reason=f"the seed documents are not at {SEEDS_DIR}"
)

LOADS = [(name, load) for name, preset in PRESETS.items() for load, _points in preset.tables]
CITES: list[Cite] = sorted(
    {c for _, load in LOADS for c in (*load.cites, *(m.cite for m in load.mount))}
    | {c for p in PRESETS.values() if p.curve_cite for c in (p.curve_cite,)}
    | set(SEARCH_CITES),
    key=str,
)
#: How a seed writes each count: Portuguese words, French, or digits beside their noun.
SAID = {
    "jobs": {8: ("oito jobs", "Oito jobs"), 24: ("24 jobs", "24 tarefas"), 128: ("128 threads",),
             64: ("64 threads",), 16: ("16 threads",)},
    "clients": {6: ("seis máquinas virtuais", "6 máquinas virtuais"), 12: ("12 serveurs",),
                1: ("Máquina virtual n2-standard-32", "uma instância bare metal")},
}  # fmt: skip


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _outline(seed: str) -> set[str]:
    headings = {
        h for env in envelopes().values() if seed in env.seeds for h in env.seeds[seed].headings
    }
    return headings | {h for c in CITES if c.seed == seed for h in (*c.within, c.section)}


def section_text(cite: Cite) -> str | None:
    """The cited section's lines, or None when a heading is not found in order."""
    lines = (SEEDS_DIR / cite.seed).read_text(encoding="utf-8").splitlines()
    at = 0
    for heading in (*cite.within, cite.section):
        found = next((i for i in range(at, len(lines)) if lines[i].strip() == heading), None)
        if found is None:
            return None
        at = found + 1
    outline = _outline(cite.seed)
    end = next((i for i in range(at, len(lines)) if lines[i].strip() in outline), len(lines))
    return "\n".join(lines[at:end])


@needs_seeds
@pytest.mark.parametrize("cite", CITES, ids=lambda c: f"{c.seed[:3]}:{c.quote[:40]}")
def test_every_quote_is_in_its_section(cite: Cite) -> None:
    body = section_text(cite)
    assert body is not None, f"headings not found in order: {cite}"
    assert _fold(cite.quote) in _fold(body), f"not in its section: {cite}"


@needs_seeds
def test_a_misplaced_quote_is_caught() -> None:
    """The check is not vacuous: the iSCSI depth sentence is not under the NFS 4 KiB table."""
    iscsi = next(c for c in CITES if "iodepth definido como 4" in c.quote)
    moved = Cite(iscsi.seed, iscsi.section, iscsi.quote,
                 ("Limites de capacidade de processamento de volume para acesso NFSv3",
                  "Nível de serviço extremo"))  # fmt: skip
    body = section_text(moved)
    assert body is not None and _fold(moved.quote) not in _fold(body)


def _stated(load: SeedLoad, what: str, said: tuple[str, ...]) -> bool:
    quotes = " ".join(c.quote for c in load.cites)
    notes = " ".join(load.notes)
    return any(s in quotes for s in said) or (what in notes and "not stated" in notes)


@pytest.mark.parametrize(("preset", "load"), LOADS, ids=[f"{n}:{ld.table}" for n, ld in LOADS])
def test_every_tables_load_and_working_set_is_cited(preset: str, load: SeedLoad) -> None:
    """Jobs, queue depth, clients and working set: each in one of the table's quotes (or, where
    the seed is silent, a note that says so); mount options quote their own value."""
    assert load.cites and load.table
    jobs = SAID["jobs"].get(load.jobs, ())
    assert _stated(load, "jobs", jobs) or "thread" in " ".join(load.notes), load.table
    if load.iodepth is not None and "vdbench" not in load.table:
        assert any(f"iodepth definido como {load.iodepth}" in c.quote for c in load.cites)
    elif load.iodepth is None:
        notes, quotes = " ".join(load.notes), " ".join(c.quote for c in load.cites)
        assert load.search or "iodepth" in notes, load.table
        if load.search:
            assert "máximo" in quotes or "máxima" in quotes, load.table
    assert _stated(load, "clients", SAID["clients"].get(load.clients, ())), load.table
    assert load.working_set is not None, load.table
    shown = human_bytes(load.working_set)
    if shown == "700 GB":  # two LUNs of 350 GB per server
        shown = "2 LUN de 350 Go"
    assert any(shown in c.quote for c in load.cites), (load.table, shown)
    for option in load.mount:
        assert str(option.value) in option.cite.quote, option


def test_every_preset_point_has_a_table() -> None:
    for preset in PRESETS.values():
        for point in preset.points:
            assert preset.load_for(point) in [load for load, _ in preset.tables]
    assert PRESETS["four-corners"].curve_cite is not None
    assert "0-120 %" in PRESETS["four-corners"].curve_cite.quote
