"""One interval's completed operations (:class:`Interval`), apart from the histogram
arithmetic of :mod:`sim.core.metrics`: a capture writes intervals without operations and
needs no numpy (dbsim capture, issue #25). :mod:`sim.core.metrics` imports it back, so
``from sim.core.metrics import Interval`` still holds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.core.metrics import OpStats


@dataclass
class Interval:
    """The operations completed during one interval of the run."""

    index: int  # sequential number of the interval in the run (0, 1, 2 …)
    t_start: float  # engine clock, seconds since run start
    t_end: float
    phase: str  # "warmup", "measure", or "measure" with a step index
    step: int | None
    ops: dict[str, OpStats]

    @property
    def measured(self) -> bool:
        return self.phase == "measure"

    def rows(self) -> Iterable[dict[str, Any]]:
        seconds = max(self.t_end - self.t_start, 1e-9)
        for name in sorted(self.ops):
            stats = self.ops[name]
            row = {
                "t": round(self.t_end, 3),
                "interval": self.index,
                "phase": self.phase,
                "step": "" if self.step is None else self.step,
                "op": name,
                "ops_s": round(stats.count / seconds, 2),
            }
            row.update(stats.row())
            yield row
