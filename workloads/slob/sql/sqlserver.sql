-- SQL Server: catalogue in sys.tables (the caller's default schema); page accounting from the
-- heap's allocated pages (sys.dm_db_database_page_allocations, index 0 = the heap) and each
-- page's header (sys.dm_db_page_info, SQL Server 2019+: slot_count = records on the page;
-- page_type 1 = data page). Both need VIEW DATABASE STATE. The table is reached through
-- sys.tables rather than OBJECT_ID(...) passed straight in: a NULL object id would make the
-- allocations function walk every object in the database.
-- (On SQL Server 2017 and older the same counts come from GROUP BY over
-- sys.fn_PhysLocCracker(%%physloc%%); that token does not parse in the contract tests' parser.)
-- Every other statement in default.sql is valid T-SQL as it stands.
-- append is default.sql's INSERT, repeated here so T-SQL's form is read here: the filler CHAR(5000) takes its default (''), so the row
-- is ~7.5 KB and alone on its 8 KB page; the key column is BIGINT (8 bytes, 4 more than cf1's
-- INT: still under the 8,060-byte in-row limit with a row-versioning tag). Not run here (no
-- SQL Server in this suite): written from the INSERT reference, parsed by the contract tests.

-- name: blocks_used
SELECT COUNT(*)
  FROM sys.tables AS t
 CROSS APPLY sys.dm_db_database_page_allocations(DB_ID(), t.object_id, 0, NULL, 'LIMITED') AS pa
 CROSS APPLY sys.dm_db_page_info(DB_ID(), pa.allocated_page_file_id, pa.allocated_page_page_id, 'LIMITED') AS pg
 WHERE t.name = :tname AND t.schema_id = SCHEMA_ID()
   AND pa.is_allocated = 1 AND pg.page_type = 1 AND pg.slot_count > 0

-- name: max_rows_per_block
SELECT MAX(pg.slot_count)
  FROM sys.tables AS t
 CROSS APPLY sys.dm_db_database_page_allocations(DB_ID(), t.object_id, 0, NULL, 'LIMITED') AS pa
 CROSS APPLY sys.dm_db_page_info(DB_ID(), pa.allocated_page_file_id, pa.allocated_page_page_id, 'LIMITED') AS pg
 WHERE t.name = :tname AND t.schema_id = SCHEMA_ID()
   AND pa.is_allocated = 1 AND pg.page_type = 1

-- name: append
INSERT INTO {append_table}
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20)
VALUES (:k, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v,
        :v)
