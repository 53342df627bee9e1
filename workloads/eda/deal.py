"""Dealing an EDA session's deck: every operation as often as its weight, shuffled by the
session's seed, creates before removals. Shared by the Python sessions
(:mod:`workloads.eda.operations`) and the native loop's decks (:mod:`workloads.eda.native`)."""

from __future__ import annotations

import random
from collections.abc import Mapping

CREATE_FAMILY = frozenset({"create", "unlink", "unlink2"})


def deal(weights: Mapping[str, int], seed: str) -> list[str]:
    """One deck: every operation ``weight`` times, shuffled; creates before removals."""
    cards = [name for name in sorted(weights) for _ in range(weights[name])]
    random.Random(seed).shuffle(cards)
    slots = [i for i, card in enumerate(cards) if card in CREATE_FAMILY]
    if slots:
        removals = [card for card in (cards[i] for i in slots) if card != "create"]
        creates = len(slots) - len(removals)
        for n, i in enumerate(slots):
            cards[i] = "create" if n < creates else removals[n - creates]
    return cards
