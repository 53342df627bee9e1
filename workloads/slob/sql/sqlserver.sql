-- SQL Server: catalogue in sys.tables (the caller's default schema); page accounting from the
-- heap's allocated pages (sys.dm_db_database_page_allocations, index 0 = the heap) and each
-- page's header (sys.dm_db_page_info, SQL Server 2019+: slot_count = records on the page;
-- page_type 1 = data page). Both need VIEW DATABASE STATE. The table is reached through
-- sys.tables rather than OBJECT_ID(...) passed straight in: a NULL object id would make the
-- allocations function walk every object in the database.
-- (On SQL Server 2017 and older the same counts come from GROUP BY over
-- sys.fn_PhysLocCracker(%%physloc%%); that token does not parse in the contract tests' parser.)
-- Every other statement in default.sql is valid T-SQL as it stands.

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
