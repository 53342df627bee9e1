"""``target.schema_name`` checked on the server before anything is created in it.

dbsim quotes the schema in ``search_path`` (a mixed-case name keeps its case), so PostgreSQL
does not fold it: ``PUBLIC`` names a schema that does not exist, and every ``CREATE TABLE``
then failed with "no schema has been selected to create in" (exit 3, the driver's line). A
schema that is not there is refused here instead, naming the field (exit 2), with the
schema of the same name in lower case when there is one. System schemas are refused
before connecting (:class:`storage.targets.settings.PostgresSettings`).
"""

from __future__ import annotations

from typing import Any

from sim.errors import ConfigError

#: Schemas of that name, in any case; the exact one is the one asked for.
NAMESAKES = "SELECT nspname FROM pg_catalog.pg_namespace WHERE lower(nspname) = lower($1)"


async def check_schema(conn: Any, schema: str, database: str) -> None:
    """ConfigError naming ``target.schema_name`` unless ``schema`` exists in ``database``."""
    found = [row[0] for row in await conn.fetch(NAMESAKES, schema)]
    if schema in found:
        return
    hint = ""
    if found:
        hint = (
            f" (dbsim quotes the name, so PostgreSQL does not fold its case: "
            f"{', '.join(sorted(found))} exists)"
        )
    raise ConfigError(
        f"target.schema_name: schema {schema} does not exist in database {database}{hint}; "
        "create it (CREATE SCHEMA) or name one that exists"
    )
