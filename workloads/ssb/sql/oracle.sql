-- Oracle: the data dictionary's USER_ views (names as stored: unquoted names upper-cased);
-- a row's block is (relative file number, block number) of its ROWID.

-- name: unique_index
SELECT COUNT(*) FROM user_indexes
 WHERE table_name = :tname AND index_name = :iname AND uniqueness = 'UNIQUE'

-- name: block_size
SELECT block_size FROM user_tablespaces
 WHERE tablespace_name = (SELECT tablespace_name FROM user_tables WHERE table_name = :tname)

-- name: blocks_used
SELECT COUNT(*) FROM (
  SELECT 1 FROM {table}
   GROUP BY DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID), DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID)
)

-- name: max_rows_per_block
SELECT MAX(n) FROM (
  SELECT COUNT(*) AS n FROM {table}
   GROUP BY DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID), DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID)
)
