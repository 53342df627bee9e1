"""What ``dbsim lab down`` could not do, and what it left because it is not the lab's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sim.errors import SimError


@dataclass
class Outcome:
    """``problems``: the lab's own things that could not be undone (``down`` keeps them in
    the state file, exit 3). ``warnings``: things found where the lab's were that are not the
    lab's any more (left alone, named, forgotten)."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def attempt(self, what: str, step: Callable[[], object]) -> None:
        """Run ``step``; a failure becomes a problem naming ``what``."""
        try:
            step()
        except SimError as exc:
            self.problems.append(str(exc).removeprefix("lab: "))
        except OSError as exc:
            self.problems.append(f"{what}: {exc}")

    def fail(self, problem: str) -> None:
        self.problems.append(problem)

    def warn(self, warning: str) -> None:
        self.warnings.append(warning)
