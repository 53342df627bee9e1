"""Oracle's dialect record (the facts storage.targets.oracle's target and the registry carry:
names, how a SLOB row stays alone in its block, the buffer cache and the way past it, the
statistics views), kept apart from the driver module so the registry knows it without importing
python-oracledb: every dbsim start that validates or runs a scenario reads the records of all
kinds, and the driver is ~0.1 CPU-s to import."""

from __future__ import annotations

from sim.dialects import PageFit, ServerCache, SqlDialect
from storage.collectors.oracle_stats import oracle_stats_collectors
from storage.targets.first_contact import ORACLE as FIRST_CONTACT

# A block takes new rows only while less than (100 - PCTFREE) % of it is used, so with 99 the
# first ~2.5 KB row closes the block to inserts: one row per block during the load.
ORACLE_PCTFREE = 99


def oracle_page_fit(row_bytes: int, page_bytes: int) -> PageFit:
    """PCTFREE 99 for the load, then MINIMIZE RECORDS_PER_BLOCK: it records the highest
    rows-per-block now in the table (1) as a hard limit, so no later insert can put two rows
    in a block even where PCTFREE alone would let it. It scans the loaded blocks to find that
    number, hence it runs after the data."""
    return PageFit(
        create_suffix=f"\n PCTFREE {ORACLE_PCTFREE}",
        after_load=(("MinimizeRecordsPerBlock", "ALTER TABLE {table} MINIMIZE RECORDS_PER_BLOCK"),),
    )


#: Oracle takes 30-byte names before 12.2 (and on a database whose COMPATIBLE is below 12.2),
#: 128 from 12.2 on; dbsim keeps to 30 so one scenario runs on every version. Unquoted names
#: are stored upper-cased; DROP TABLE adds PURGE, so the space is freed now rather than parked
#: in the recycle bin.
ORACLE_DIALECT = SqlDialect(
    name="oracle",
    sqlalchemy_module="sqlalchemy.dialects.oracle",
    sqlglot="oracle",
    max_identifier_chars=30,
    folds_unquoted="upper",
    drop_suffix="PURGE",
    one_row_per_page=oracle_page_fit,
    # The buffer cache as the SGA holds it now (ASMM resizes it; db_cache_size is a floor).
    cache=ServerCache(
        "the SGA's buffer cache",
        "SELECT current_size FROM v$sga_dynamic_components WHERE component = 'DEFAULT buffer cache'",
        direct_query=(
            "SELECT CASE WHEN upper(value) IN ('SETALL', 'DIRECTIO') THEN 1 ELSE 0 END "
            "FROM v$parameter WHERE name = 'filesystemio_options'"
        ),
    ),
    cache_recipe=(
        "db_cache_size = {cap_mb}M with a fixed SGA (sga_target = 0, so automatic memory "
        "management cannot grow the buffer cache) and filesystemio_options = setall "
        "(direct, asynchronous I/O past the host's page cache)"
    ),
    first_contact=FIRST_CONTACT,
    stats_collectors=oracle_stats_collectors,
)

__all__ = ["ORACLE_DIALECT", "ORACLE_PCTFREE", "oracle_page_fit"]
