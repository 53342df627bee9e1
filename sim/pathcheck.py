"""Paths a user gives, checked for length before anything is created or opened at them.

:func:`path_problems` finds every path of a validated scenario (``output.directory``,
``target.path``, a password file …) that the kernel would refuse for its length (``PATH_MAX``,
``NAME_MAX``), and names its field: a 5,000-character ``-o`` reached ``os.stat`` and ended as
"unexpected OSError" with exit 3 and no field named. :func:`length_problem` checks one path
(a command-line option that is not part of a scenario, a web form's field).
"""

from __future__ import annotations

import os
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel

#: Linux's limits: a path the kernel takes is at most PATH_MAX - 1 bytes (the last is the
#: NUL), a name within it at most NAME_MAX bytes (ext4, xfs, tmpfs, NFS alike).
PATH_MAX = 4096
NAME_MAX = 255


def length_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the kernel would refuse ``path`` for its length (ENAMETOOLONG), or None."""
    raw = os.fsencode(path)
    if len(raw) >= PATH_MAX:
        return f"a path of {len(raw):,} bytes; the system takes at most {PATH_MAX - 1:,}"
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if longest > NAME_MAX:
        return f"holds a name of {longest:,} bytes; the system takes at most {NAME_MAX} per name"
    return None


def _paths(node: Any, where: str) -> list[tuple[str, PurePath]]:
    if isinstance(node, PurePath):
        return [(where, node)]
    if isinstance(node, BaseModel):
        fields = type(node).model_fields
        return [p for name in fields for p in _paths(getattr(node, name), f"{where}.{name}")]
    if isinstance(node, list | tuple):
        return [p for i, item in enumerate(node) for p in _paths(item, f"{where}[{i}]")]
    if isinstance(node, dict):
        return [p for key, item in node.items() for p in _paths(item, f"{where}.{key}")]
    return []


def path_problems(model: BaseModel) -> list[str]:
    """A line per path of ``model`` (a scenario, at any depth) too long for the system,
    naming its field (``output.directory: a path of 5,007 bytes; …``)."""
    problems = []
    for where, path in _paths(model, ""):
        problem = length_problem(path)
        if problem:
            problems.append(f"{where.lstrip('.')}: {problem}")
    return problems


__all__ = ["NAME_MAX", "PATH_MAX", "length_problem", "path_problems"]
