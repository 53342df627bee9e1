"""Check the transcription: every figure of an envelope is found again in its seed's text.

Used by the tests (``tests/unit/test_profiles.py``) and by whoever edits a data file::

    from storage.envelopes import get_envelope
    from storage.envelopes.verify import transcription_problems
    transcription_problems(get_envelope("gcnv-extreme-nfsv3"))  # [] when all is well

Headings must appear as whole lines in the order ``within`` then ``section``; every quote,
caption and row must sit *inside* that section (from its heading to the next of the seed's
``headings``), not merely somewhere in the file; a table's rows must follow its caption and
column header; the figures in the rows are parsed with the seed's number format and compared
with the points; every ``printed`` figure must be in the quoted text of the source that
figure cites and parse to the transcribed value.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from storage.envelopes.model import Envelope
from storage.envelopes.provenance import LINES_FILE, line_key
from storage.envelopes.schema import SeedInfo, Source, Table, iter_sources, row_label


def _seeds_dir() -> Path:
    """The seed documents: ``$DBSIM_SEEDS_DIR``, else ``../shared/seeds`` beside the checkout
    (for a git worktree, beside the main checkout it belongs to)."""
    if os.environ.get("DBSIM_SEEDS_DIR"):
        return Path(os.environ["DBSIM_SEEDS_DIR"])
    checkout = Path(__file__).resolve().parents[2]
    found = checkout.parent / "shared" / "seeds"
    dot_git = checkout / ".git"
    if not found.is_dir() and dot_git.is_file():
        # "gitdir: /main/.git/worktrees/<name>": the main checkout is three levels up.
        text = dot_git.read_text(encoding="utf-8").strip()
        if text.startswith("gitdir:"):
            main = Path(text.removeprefix("gitdir:").strip()).parents[2]
            found = main.parent / "shared" / "seeds"
    return found


SEEDS_DIR = _seeds_dir()
ROW_WINDOW = 400  # the rows of a table follow its caption and column header within this
READ_LABELS = ("leitura", "ler")
WRITE_LABELS = ("escreva", "gravar")
Reader = Callable[[str], str]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def parse_printed(text: str, seed: SeedInfo) -> float:
    """A figure as the seed prints it ('~157.000', '0,40', '2.2 millions', '403K', '21,5')."""
    body = text.strip().lstrip("~<").strip()
    scale = 1.0
    for suffix, factor in ((" millions", 1e6), (" million", 1e6), ("K", 1e3)):
        if body.endswith(suffix):
            body, scale = body[: -len(suffix)], factor
            break
    body = body.replace(seed.thousands, "").replace(seed.decimal, ".")
    return float(body) * scale


def _line_index(lines: list[str], heading: str, start: int) -> int:
    for index in range(start, len(lines)):
        if lines[index].strip() == heading:
            return index
    return -1


def transcription_problems(env: Envelope, seeds_dir: Path = SEEDS_DIR) -> list[str]:
    """Everything in ``env`` that cannot be found in its seed (read from ``seeds_dir``)
    exactly as transcribed: headings in order, captions, rows under their caption with the
    same figures, quotes, and every ``printed`` figure with the same value."""

    def seed_text(name: str) -> str:
        return (seeds_dir / name).read_text(encoding="utf-8")

    problems: list[str] = []
    page = [c.source for c in env.caveats() if c.source is not None]
    sources = iter_sources(env.spec)
    for source in [*sources, *(s for s in page if s not in sources)]:
        problems += _source_problems(env, source, seed_text)
    for table in env.spec.tables:
        problems += _table_problems(env, table, seed_text)
    rule = env.spec.capacity
    holders: list[tuple[object, Source, dict[str, str]]] = [
        (level, level.source, level.printed) for level in rule.levels
    ]
    holders += [
        (point, point.source_of(field), {field: shown})
        for point in rule.points
        for field, shown in point.printed.items()
    ]
    holders += [(cap, cap.source, cap.printed) for cap in env.spec.caps]
    if rule.max_source is not None:
        holders.append((rule, rule.max_source, rule.printed))
    for holder, source, printed in holders:
        problems += _printed_problems(env, holder, source, printed)
    return problems


def section_span(env: Envelope, source: Source, lines: list[str]) -> tuple[int, int] | None:
    """The lines ``[start, end)`` of ``source``'s section: after its heading (found after the
    ``within`` headings, in order) up to the next heading of the seed's outline (the seed's
    ``headings`` and every heading the envelope cites). None when a heading is not found."""
    at = 0
    for heading in [*source.within, source.section]:
        found = _line_index(lines, heading, at)
        if found < 0:
            return None
        at = found + 1
    outline = set(env.seeds[source.seed].headings)
    outline.update(h for s in iter_sources(env.spec) for h in [*s.within, s.section])
    end = next((i for i in range(at, len(lines)) if lines[i].strip() in outline), len(lines))
    return at, end


def quote_line(lines: list[str], span: tuple[int, int], quote: str) -> int | None:
    """The 1-based line of the seed on which ``quote`` starts, within ``span``."""
    wanted = _norm(quote)
    for index in range(*span):
        if wanted[:40] in _norm(lines[index]) and wanted in _norm(" ".join(lines[index : span[1]])):
            return index + 1
    return None


def line_index(envs: list[Envelope], seeds_dir: Path = SEEDS_DIR) -> dict[str, int]:
    """Every cited quote and row of ``envs`` → the seed line it starts on (see
    :mod:`storage.envelopes.provenance`)."""
    found: dict[str, int] = {}
    for env in envs:
        page = [c.source for c in env.caveats() if c.source is not None]
        for source in [*iter_sources(env.spec), *page]:
            lines = (seeds_dir / source.seed).read_text(encoding="utf-8").splitlines()
            span = section_span(env, source, lines)
            path = " › ".join([*source.within, source.section])
            for text in [*source.quotes, *source.rows]:
                line = quote_line(lines, span, text) if span else None
                if line is not None:
                    found[line_key(source.seed, path, text)] = line
    return dict(sorted(found.items()))


def main(argv: list[str] | None = None) -> int:
    """``python -m storage.envelopes.verify [--write-lines]``: print every transcription
    problem (exit 1 if any); with ``--write-lines``, regenerate ``data/lines.json``."""
    from storage.envelopes.model import load_all

    envs = list(load_all().values())
    problems = [p for env in envs for p in transcription_problems(env)]
    for problem in problems:
        print(problem)
    if "--write-lines" in (argv if argv is not None else sys.argv[1:]):
        text = json.dumps(line_index(envs), indent=1, ensure_ascii=False) + "\n"
        LINES_FILE.write_text(text, encoding="utf-8")
    return 1 if problems else 0


def _source_problems(env: Envelope, source: Source, seed_text: Reader) -> list[str]:
    lines = seed_text(source.seed).splitlines()
    span = section_span(env, source, lines)
    if span is None:
        return [
            f"{env.name}: headings {[*source.within, source.section]!r} not found in order in "
            f"{source.seed}"
        ]
    inside = _norm("\n".join(lines[span[0] : span[1]]))
    flat = _norm("\n".join(lines))
    problems: list[str] = []
    for quote in source.quotes:
        if _norm(quote) not in flat:
            problems.append(f"{env.name}: quote not in {source.seed}: {quote!r}")
        elif _norm(quote) not in inside:
            problems.append(f"{env.name}: quote not under {source.section!r}: {quote!r}")
    if source.caption is not None and _norm(source.caption) not in inside:
        problems.append(f"{env.name}: caption {source.caption!r} not under {source.section}")
    for row in source.rows:
        if _norm(row) not in inside:
            problems.append(f"{env.name}: row {row!r} not under {source.section!r}")
    return problems


def _table_problems(env: Envelope, table: Table, seed_text: Reader) -> list[str]:
    source = table.source
    seed = env.seeds[source.seed]
    problems: list[str] = []
    for point in table.points:
        problems += _printed_problems(env, point, point.source or source, point.printed)
    if not source.rows:
        return problems
    assert source.columns is not None and source.caption is not None
    lines = seed_text(source.seed).splitlines()
    at = 0
    for heading in [*source.within, source.section]:
        at = _line_index(lines, heading, at) + 1
    flat = _norm("\n".join(lines[at:]))
    caption_at = flat.find(_norm(source.caption))
    window = flat[caption_at + len(_norm(source.caption)) :][:ROW_WINDOW]
    if _norm(source.columns.header) not in window:
        problems.append(f"{env.name}/{table.id}: column header not after the caption")
    by_pct = {p.read_pct: p for p in table.points}
    for row in source.rows:
        if _norm(row) not in window:
            problems.append(f"{env.name}/{table.id}: row {row!r} does not follow the caption")
        label = row_label(row).lower()
        figures = [parse_printed(word, seed) for word in row.split()[len(label.split()) :]]
        if any(w in label for w in READ_LABELS):
            field = "read"
        elif any(w in label for w in WRITE_LABELS):
            field = "write"
        else:
            problems.append(f"{env.name}/{table.id}: row label {label!r} is neither read nor write")
            continue
        if len(figures) != len(source.columns.read_pct):
            problems.append(f"{env.name}/{table.id}: row {row!r} has {len(figures)} figures")
            continue
        for pct, figure in zip(source.columns.read_pct, figures, strict=True):
            published = by_pct.get(pct)
            value = None if published is None else getattr(published, field)
            if value != figure:
                problems.append(
                    f"{env.name}/{table.id}: {pct:g} % read {field} is {value}, the seed says "
                    f"{figure:g}"
                )
    return problems


def _printed_problems(
    env: Envelope, holder: object, source: Source, printed: dict[str, str]
) -> list[str]:
    seed = env.seeds[source.seed]
    problems: list[str] = []
    quotes = _norm(" ".join(source.quotes))
    for field, shown in printed.items():
        if _norm(shown) not in quotes:
            problems.append(f"{env.name}: {shown!r} is not in the quoted text of {source.section}")
        value = getattr(holder, field, None)
        if value is None:
            continue  # a figure that only supports a derivation (e.g. '200' TiB)
        if hasattr(value, "value"):
            value = value.value
        if abs(parse_printed(shown, seed) - float(value)) > 1e-9 * max(1.0, abs(float(value))):
            problems.append(f"{env.name}: {field} = {value} but the seed prints {shown!r}")
    return problems


if __name__ == "__main__":
    raise SystemExit(main())
