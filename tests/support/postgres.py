"""The PostgreSQL every machine of this project runs (127.0.0.1:5432, trust auth): one probe
for the tests that use it, which skip loudly only where it truly is absent (a user's laptop)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

HOST, PORT, DATABASE = "127.0.0.1", 5432, "test"


def postgres_problem(host: str = HOST, port: int = PORT, database: str = DATABASE) -> str | None:
    """Why the server cannot be reached (None when it can)."""

    async def probe() -> None:
        conn = await asyncpg.connect(host=host, port=port, user="postgres", database=database)
        await conn.close()

    try:
        asyncio.run(probe())
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return str(exc)
    return None


def require_postgres(host: str = HOST, port: int = PORT, database: str = DATABASE) -> None:
    """Skip the calling test (or module fixture), loudly, when the server is not reachable."""
    problem = postgres_problem(host, port, database)
    if problem is not None:
        pytest.skip(f"!!! PostgreSQL on {host}:{port} is not reachable: {problem}")
