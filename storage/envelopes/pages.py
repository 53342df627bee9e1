"""The vendor pages behind an answer, named so a reader can find them, and the cited figures
written with the reader's separators.

The seeds are stored copies of vendor pages, several in Portuguese or French, which print
``1.350.000`` for 1,350,000 and ``21,5`` for 21.5. A citation quotes the seed verbatim (so the
quote can be searched for in that copy), and :func:`page_lines` adds, per page cited, its
English title, its publisher and address where known and its original title, the cited
sections' headings in English (``seeds[].headings_en`` of the data file), then the quoted
figures in the page's own units with English separators (``21,5 GiBps`` → ``21.5 GiBps``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from storage.envelopes.model import Envelope
from storage.envelopes.schema import SeedInfo

LANGUAGES = {"pt": "Portuguese", "fr": "French", "en": "English", "es": "Spanish", "de": "German"}
_SEED = re.compile(r"seed (\d{3}_[0-9a-f]{16}\.txt)")
_QUOTED = re.compile(r"«([^»]*)»")
# A figure with a unit after it: digits with group and decimal marks, then a word.
_FIGURE = re.compile(r"(?<![\w.,])([~<]?\d[\d.,]*\d|\d)\s?([A-Za-z%][\w/%]*)")


def cited_seeds(sources: Iterable[str]) -> list[str]:
    """The seed files the citations name, in order of first mention."""
    found: dict[str, None] = {}
    for source in sources:
        for match in _SEED.finditer(source):
            found.setdefault(match.group(1), None)
    return list(found)


def reader_number(text: str, seed: SeedInfo) -> str:
    """``1.350.000`` → ``1,350,000`` and ``21,5`` → ``21.5`` for a page with decimal commas;
    unchanged for a page that already writes numbers the English way."""
    prefix = text[0] if text[0] in "~<" else ""
    digits = text[len(prefix) :]
    if seed.decimal == ".":
        return text
    whole, _, fraction = digits.partition(seed.decimal)
    groups = whole.split(seed.thousands)
    if len(groups) > 1 and not all(len(g) == 3 for g in groups[1:]):
        return text  # not a grouped number as this page writes them: leave it as printed
    value = ",".join(groups)
    return prefix + value + (f".{fraction}" if fraction else "")


def figures(sources: Iterable[str], seed: SeedInfo) -> list[str]:
    """The figures the quotes of ``sources`` print (with their units), as the reader writes
    them: ``21.5 GiBps``, ``1,350,000 IOPS``; empty for a page with English separators."""
    if seed.decimal == ".":
        return []
    out: dict[str, None] = {}
    for source in sources:
        if seed.file not in source:
            continue
        for quote in _QUOTED.findall(source):
            for number, unit in _FIGURE.findall(quote):
                if any(mark in number for mark in ".,"):
                    out.setdefault(f"{reader_number(number, seed)} {unit}", None)
    return list(out)


def english_sections(sources: Iterable[str], seed: SeedInfo) -> list[str]:
    """The cited sections of ``seed`` with their headings in English (``Volume throughput
    limits for NFSv3 access › Extreme service level``), each once; a path with a heading the
    data file does not translate, or one already in English, is left out."""
    pattern = re.compile(
        rf"seed {re.escape(seed.file)} › (.*?)(?: \(lines? \d|: «|$)", flags=re.MULTILINE
    )
    out: dict[str, None] = {}
    for source in sources:
        for match in pattern.finditer(source):
            parts = match.group(1).split(" › ")
            english = [seed.headings_en.get(part) for part in parts]
            if all(english) and english != parts:
                out.setdefault(" › ".join(e for e in english if e), None)
    return list(out)


def describe_page(seed: SeedInfo) -> str:
    """``"Performance benchmarks", Google Cloud NetApp Volumes documentation, https://…
    (stored in Portuguese as «Comparativos de mercado de desempenho», seed 000_….txt)``."""
    where = f", {seed.url}" if seed.url else " (no address stored: search for the title)"
    language = LANGUAGES.get(seed.language, seed.language)
    return (
        f'"{seed.title_en}", {seed.publisher}{where}; stored in {language} as '
        f"«{seed.title}» (seed {seed.file})"
    )


def page_lines(env: Envelope, sources: Iterable[str]) -> list[str]:
    """One ``page:`` line per vendor page the citations name, then its figures with the
    reader's separators (``  figures: 21.5 GiBps, 1,350,000 IOPS``)."""
    listed = list(sources)
    lines = []
    for name in cited_seeds(listed):
        seed = env.seeds.get(name)
        if seed is None:
            continue
        lines.append(f"page: {describe_page(seed)}")
        lines.extend(f'  section in English: "{path}"' for path in english_sections(listed, seed))
        shown = figures(listed, seed)
        if shown:
            lines.append(
                f"  its figures with English separators (the page writes "
                f"{seed.thousands!r} for thousands, {seed.decimal!r} for decimals): "
                + ", ".join(shown)
            )
    return lines


def pages_json(env: Envelope, sources: Iterable[str]) -> list[dict[str, Any]]:
    """The pages the citations name, JSON-ready, with the figures as the reader writes them."""
    listed = list(sources)
    out = []
    for name in cited_seeds(listed):
        seed = env.seeds.get(name)
        if seed is None:
            continue
        out.append(
            {
                "seed": seed.file,
                "title_en": seed.title_en,
                "title": seed.title,
                "language": seed.language,
                "publisher": seed.publisher,
                "url": seed.url,
                "figures": figures(listed, seed),
                "sections_en": english_sections(listed, seed),
            }
        )
    return out
