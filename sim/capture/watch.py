"""What a live capture watches: the paths it was given and, for a database, the server.

:class:`WatchedTarget` is the only target a capture opens. It holds nothing of a workload:
no session is ever connected through it, nothing is loaded, locked or marked. For a file
tree or a SQLite database it is the paths alone (the collectors resolve their devices; no
file is opened, so a missing SQLite file is not created and a tree is not entered). For a
database server it wraps the server's own target (opened read-only: its connections are
what the ``db`` collectors read statistics views through) and adds the paths given.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from sim import registry
from sim.errors import ConfigError, TargetError
from sim.protocols import Connection, EngineContext, Target

#: Target kinds whose data is a local path: a capture watches the path and opens nothing.
PATH_KINDS = frozenset({"filetree", "sqlite"})


def watched_path(kind: str, settings: Any) -> Path:
    """The path a file-tree or SQLite target's data lives under, which must exist (a capture
    creates nothing): the tree's root, the SQLite file's directory."""
    raw = getattr(settings, "path", None)
    if raw is None:
        raise ConfigError(
            f"target.path: a {kind} capture needs the path of the data to watch (a temporary "
            "SQLite database has no production to capture)"
        )
    path = Path(os.path.abspath(raw))
    try:
        os.stat(path)
    except OSError as exc:
        raise ConfigError(
            f"target.path: {path}: {exc.strerror or exc}; a capture creates nothing, so it "
            "watches only what exists"
        ) from None
    return path.parent if kind == "sqlite" else path


def check_watched(paths: list[Path], field: str = "capture.paths") -> list[Path]:
    """Each path made absolute and checked to exist (``stat`` only: nothing is opened)."""
    checked: list[Path] = []
    for raw in paths:
        path = Path(os.path.abspath(raw))
        try:
            os.stat(path)
        except OSError as exc:
            raise ConfigError(f"{field}: {path}: {exc.strerror or exc}") from None
        checked.append(path)
    return list(dict.fromkeys(checked))


class WatchedTarget(Target):
    """Paths to watch, and optionally a database server's target whose statistics are read.

    With a server, the wrapper answers as that target does (kind, dialect, settings,
    connections for the collectors), so the ``db`` collectors find their dialect's
    statistics; its storage paths are the server's data directory (when it is known) and the
    paths given.
    """

    kind: ClassVar[str] = "path"
    dialect: ClassVar[str] = "none"
    paramstyle: ClassVar[str] = "none"

    def __init__(self, paths: list[Path], server: Target | None = None) -> None:
        self.paths = list(paths)
        self.server = server
        if server is not None:
            # The collectors tell a target by its kind and dialect (the instance's, here).
            for name in ("kind", "dialect", "paramstyle"):
                setattr(self, name, getattr(server, name))

    def __getattr__(self, name: str) -> Any:
        server = self.__dict__.get("server")
        if server is None:
            raise AttributeError(name)
        return getattr(server, name)

    async def open(self, context: EngineContext) -> None:
        if self.server is not None:
            await self.server.open(context)

    async def connect(self) -> Connection:
        if self.server is None:
            raise TargetError("capture: watched paths have no connections")
        return await self.server.connect()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    def is_disconnect(self, exc: BaseException) -> bool:
        if self.server is not None:
            return self.server.is_disconnect(exc)
        return super().is_disconnect(exc)

    def storage_paths(self) -> list[Path]:
        found = self.server.storage_paths() if self.server is not None else []
        return list(dict.fromkeys([*found, *self.paths]))

    def describe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"kind": "path"}
        if self.server is not None:
            facts = self.server.describe()
        facts["watched_paths"] = [str(path) for path in self.storage_paths()]
        return facts


#: A server setting that makes every transaction of a connection read-only, for targets whose
#: settings carry server settings per connection (PostgreSQL's ``session_settings``): any
#: write through the capture's connections is refused by the server itself.
READ_ONLY_SETTINGS = {"default_transaction_read_only": "on"}


def watched_target(settings: Any, paths: list[Path]) -> WatchedTarget:
    """The target a capture opens for ``settings`` (a scenario's ``target``, or None) and the
    extra ``paths``: paths alone for a file tree or SQLite, else the server's own target with
    its connections read-only where the driver allows it."""
    paths = check_watched(paths)
    if settings is None:
        return WatchedTarget(paths)
    if settings.kind in PATH_KINDS:
        return WatchedTarget([watched_path(settings.kind, settings), *paths])
    entry = registry.target(settings.kind)
    if entry.factory is None:
        raise ConfigError(f"target.kind: {settings.kind} is not available in this version yet")
    if isinstance(getattr(settings, "session_settings", None), dict):
        settings = settings.model_copy(
            update={"session_settings": {**settings.session_settings, **READ_ONLY_SETTINGS}}
        )
    return WatchedTarget(paths, entry.factory(settings))
