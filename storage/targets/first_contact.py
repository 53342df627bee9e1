"""What ``dbsim check`` asks each SQL engine on first contact beyond ``sim.connect_check``'s
probe (the round trip, the login and the privileges ``dbsim validate --connect`` checks, which
the check calls first): the privileges only the check's own steps show a need for (the page
counts' views, a registry another login created, the registry's row deletes), how its page
counts are read, and where its physical reads come from.

The command (``sim.check``) holds no engine's SQL: each target module names its record as its
dialect record's ``first_contact`` (sim.dialects), where the check finds it. The page counts themselves are the SLOB workload's own
``blocks_used`` and ``max_rows_per_block`` statements (``workloads/slob/sql/``) and the
physical reads are the ``db`` collector's (the dialect record's ``stats_collectors``), so the
check proves the very statements a run depends on.

A privilege query returns a number: non-zero means held. A query that fails (a view the login
may not read) counts as not held, its error shown beside the GRANT. ``{user}``, ``{schema}`` …
in a GRANT are filled from :attr:`FirstContact.names`, each a one-value query.

The Oracle and SQL Server records have never been run against a server (none runs here):
docs/check.md says so beside them.
"""

from __future__ import annotations

from typing import Any

from sim.dialects import ContactPrivilege as Privilege
from sim.dialects import FirstContact


def _pg_schema(privilege: str) -> str:
    # The first schema of the search path the target set (settings.schema_name); NULL
    # (not held) when the login cannot even see it.
    return (
        f"SELECT COALESCE(has_schema_privilege(s.name, '{privilege}'), false)::int FROM "
        "(SELECT trim(both '\"' from split_part(current_setting('search_path'), ',', 1)) "
        "AS name) AS s"
    )


POSTGRES = FirstContact(
    names={
        "user": "SELECT current_user",
        "schema": "SELECT trim(both '\"' from split_part(current_setting('search_path'), ',', 1))",
        "database": "SELECT current_database()",
    },
    privileges=(
        Privilege(
            "USAGE on schema {schema}",
            "every statement on the workload's tables",
            _pg_schema("USAGE"),
            "GRANT USAGE ON SCHEMA {schema} TO {user};",
        ),
        Privilege(
            "SELECT, INSERT, UPDATE, DELETE on {schema}.dbsim_registry",
            "writing to a dbsim_registry another login created; held when there is none",
            "SELECT CASE WHEN r.id IS NULL THEN 1 ELSE (has_table_privilege(r.id, 'SELECT') "
            "AND has_table_privilege(r.id, 'INSERT') AND has_table_privilege(r.id, 'UPDATE') "
            "AND has_table_privilege(r.id, 'DELETE'))::int END "
            "FROM (SELECT to_regclass('dbsim_registry') AS id) AS r",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.dbsim_registry TO {user};",
        ),
    ),
    page_proof="ctid (block number of every row)",
)

#: MariaDB/MySQL's account as GRANT writes it: 'name'@'host'.
_MY_GRANTEE = (
    "CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', "
    "SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')"
)


def _my_privilege(privilege: str) -> Privilege:
    held = (
        "SELECT COUNT(*) FROM (SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES "
        f"WHERE GRANTEE = {_MY_GRANTEE} UNION ALL SELECT PRIVILEGE_TYPE FROM "
        f"information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = {_MY_GRANTEE} "
        f"AND TABLE_SCHEMA = DATABASE()) AS p WHERE p.PRIVILEGE_TYPE = '{privilege}'"
    )
    return Privilege(
        f"{privilege} on {{database}}",
        "the registry's rows of the tables the drop removes",
        held,
        f"GRANT {privilege} ON `{{database}}`.* TO {{user}};",
    )


MYSQL = FirstContact(
    names={"user": f"SELECT {_MY_GRANTEE}", "database": "SELECT DATABASE()"},
    privileges=(
        _my_privilege("DELETE"),  # the others: sim.connect_check
        Privilege(
            "SELECT on mysql.innodb_index_stats",
            "the page counts that prove SLOB's row per block (verify)",
            "SELECT COUNT(*) + 1 FROM mysql.innodb_index_stats WHERE 1 = 0",
            "GRANT SELECT ON mysql.innodb_index_stats TO {user};",
        ),
    ),
    page_proof="InnoDB page counts (mysql.innodb_index_stats n_leaf_pages after ANALYZE TABLE)",
)


def _sqlite_cache(target: Any) -> int | None:
    kib = getattr(getattr(target, "settings", None), "cache_size_kib", None)
    return int(kib) * 1024 if kib else None


SQLITE = FirstContact(
    names={"user": "SELECT 'file owner'"},
    page_proof="dbstat (cells on every leaf page)",
    process_reads=True,
    own_cache_bytes=_sqlite_cache,
    no_privileges="none: SQLite has no accounts; the file and its directory were opened",
)


def _ora_view(view: str, needed_for: str) -> Privilege:
    return Privilege(
        f"SELECT on {view}",
        needed_for,
        f"SELECT COUNT(*) + 1 FROM {view} WHERE ROWNUM = 1",
        f"GRANT SELECT ON {view.replace('v$', 'v_$')} TO {{user}};  -- as SYS",
        required=False,
    )


ORACLE = FirstContact(
    names={"user": "SELECT USER FROM DUAL"},
    privileges=(
        Privilege(
            "EXECUTE on DBMS_ROWID",
            "the block numbers that prove SLOB's row per block",
            "SELECT COUNT(DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID)) + 1 FROM DUAL",
            "GRANT EXECUTE ON SYS.DBMS_ROWID TO {user};",
        ),
        _ora_view("v$iostat_function", "I/O by function (the db collector)"),
    ),
    page_proof="DBMS_ROWID (file and block number of every row)",
)

#: Every privilege SQL Server's check needs is sim.connect_check's (CREATE TABLE, ALTER on
#: the schema, VIEW DATABASE STATE for dm_db_page_info, VIEW SERVER STATE).
SQLSERVER = FirstContact(
    names={"user": "SELECT USER_NAME()"},
    page_proof="dm_db_page_info (slot count of every data page)",
)

__all__ = ["MYSQL", "ORACLE", "POSTGRES", "SQLITE", "SQLSERVER"]
