"""Where a PostgreSQL target's data lives: its tablespace, checked when the target opens.

Checked before anything is created or loaded, so a wrong setting costs nothing and is said in
one line (exit 2): a tablespace that must exist and does not, one that exists somewhere else
than the scenario says, or a directory CREATE TABLESPACE would refuse (missing, not a
directory, not empty, not owned by the server's OS user). The directory checks need the server
on this host; for a remote server the server's own CREATE TABLESPACE error says it instead.
dbsim never creates or chowns the directory: it prints the command that would.

Creating, owning and dropping the tablespace is the workloads' (workloads.tablespace), next
to the tables' ownership records.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import ConfigError
from storage.targets.settings import TablespaceSettings

#: The tablespace's location as the server has it ('' for pg_default and pg_global).
LOCATION_SQL = "SELECT pg_tablespace_location(oid) FROM pg_tablespace WHERE spcname = $1"


@dataclass(frozen=True)
class TablespacePlacement:
    """The tablespace the workload's tables and indexes go to, and where it is."""

    name: str
    location: Path | None
    exists: bool
    create: bool

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "location": str(self.location) if self.location else None,
            "existed": self.exists,
            "create": self.create,
        }


def _os_user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def check_directory(location: Path, server_uid: int | None) -> None:
    """ConfigError, in one line with the fix, unless CREATE TABLESPACE can use ``location``."""
    where = f"target.tablespace.location: {location}"
    owner = _os_user(server_uid) if server_uid is not None else "the server's OS user"
    if not location.exists():
        raise ConfigError(
            f"{where} does not exist; create it on the server's host, e.g. "
            f"`mkdir -p {location} && chown {owner} {location}`"
        )
    if not location.is_dir():
        raise ConfigError(f"{where} is not a directory")
    try:
        entries = sorted(os.listdir(location))
    except OSError as exc:
        raise ConfigError(f"{where} cannot be listed: {exc.strerror}") from exc
    # A fresh ext4 file system carries lost+found; PostgreSQL refuses any entry at all.
    if entries:
        shown = ", ".join(entries[:3]) + (" ..." if len(entries) > 3 else "")
        raise ConfigError(
            f"{where} is not empty ({shown}); CREATE TABLESPACE needs an empty directory: "
            f"use a subdirectory, e.g. {location / 'dbsim'}"
        )
    found = location.stat().st_uid
    if server_uid is not None and found != server_uid:
        raise ConfigError(
            f"{where} is owned by {_os_user(found)}, not {owner} (the server's OS user); "
            f"if it is yours to give: `chown {owner} {location}`"
        )


async def tablespace_placement(
    conn: Any, settings: TablespaceSettings, data_directory: Path | None, local: bool
) -> TablespacePlacement:
    """Read the tablespace on ``conn`` (an asyncpg connection) and check it against
    ``settings``; ``data_directory`` (the server's, when known) gives its OS user."""
    found = await conn.fetchval(LOCATION_SQL, settings.name)
    if found is not None:
        location = Path(found) if found else None
        wanted = settings.location
        if wanted is not None and location is not None and wanted != location:
            raise ConfigError(
                f"target.tablespace: {settings.name} exists at {location}, not at {wanted}; "
                f"set location: {location} or choose another name"
            )
        return TablespacePlacement(settings.name, location, True, settings.create)
    if not settings.create:
        raise ConfigError(
            f"target.tablespace: {settings.name} does not exist on the server; create it, or "
            f"set create: true and a location for dbsim to create it"
        )
    assert settings.location is not None  # TablespaceSettings requires it with create
    if local:
        server_uid = None
        if data_directory is not None and data_directory.exists():
            server_uid = data_directory.stat().st_uid
        check_directory(settings.location, server_uid)
    return TablespacePlacement(settings.name, settings.location, False, True)
