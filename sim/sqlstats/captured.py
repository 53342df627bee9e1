"""What a statistics source says of its statements, before anything is made of it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CapturedStatement:
    """One statement as the source counted it.

    ``key``: the source's own identity (``queryid``, the digest, the SQL id); ``text``: its
    normalized text as the source shows it; ``calls``: executions counted; ``mean_ms``: mean
    time per execution in ms (None when the source has none); ``reads``: the source's read
    figure summed over the calls (what it counts is :attr:`Captured.reads_what`), or None."""

    key: str
    text: str
    calls: int
    mean_ms: float | None = None
    reads: float | None = None

    @property
    def reads_per_call(self) -> float | None:
        if self.reads is None or self.calls <= 0:
            return None
        return self.reads / self.calls


@dataclass(frozen=True)
class Captured:
    """A source's statements, most called first, and what its figures are.

    ``source``: where the figures come from, as the skeleton's header says it (``postgres
    pg_stat_statements at 127.0.0.1:5432, database test``); ``window_s``: the seconds the
    counts cover (calls/s = calls / window_s), None when the source does not tell;
    ``window_what``: how that window was found; ``reads_what``: what ``reads`` counts;
    ``style``: the parameter marks of the text (``dollar``: ``$1``; ``qmark``: ``?``;
    ``colon``: Oracle's ``:1``/``:B1``/``:name``); ``ranked_by``: the order of the list."""

    source: str
    statements: list[CapturedStatement]
    style: str
    reads_what: str
    window_s: float | None = None
    window_what: str = ""
    ranked_by: str = "calls"
    notes: list[str] = field(default_factory=list)
