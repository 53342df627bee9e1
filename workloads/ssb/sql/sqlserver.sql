-- SQL Server: catalogue views of the connection's default schema; page accounting from the
-- heap's allocated pages (sys.dm_db_database_page_allocations, index 0 = the heap) and each
-- page's header (sys.dm_db_page_info, SQL Server 2019+: slot_count = records on the page;
-- page_type 1 = data page), as in the SLOB-like workload. Both need VIEW DATABASE STATE. The
-- table is reached through sys.tables: a NULL object id would make the allocations function
-- walk every object in the database. (%%physloc%% with sys.fn_PhysLocCracker would serve
-- 2017 and older, but that token does not parse in the contract tests' parser.) Pages are
-- always 8 KB.

-- name: unique_index
SELECT COUNT(*)
  FROM sys.tables AS t
  JOIN sys.indexes AS i ON i.object_id = t.object_id
 WHERE t.name = :tname AND t.schema_id = SCHEMA_ID() AND i.name = :iname AND i.is_unique = 1

-- name: block_size
SELECT 8192

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
