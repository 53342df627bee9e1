-- Oracle: catalogue in USER_TABLES; block accounting from ROWIDs.
-- A block is the pair (relative file number, block number) decoded by DBMS_ROWID. Decoding a
-- bigfile tablespace's ROWID as smallfile (the default) splits its 32-bit block number into
-- these two parts, so the pair still names exactly one block in either kind of tablespace.
-- Unquoted names (all lower case here) are stored upper case; mixed-case names are quoted.
-- Every other statement in default.sql is valid Oracle SQL as it stands (no AS before a
-- table alias, no LIMIT, no boolean literals), so only these two are overridden.

-- name: blocks_used
SELECT COUNT(*) FROM (
  SELECT DISTINCT DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID) AS fno,
                  DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID) AS blk
    FROM {table})

-- name: max_rows_per_block
SELECT MAX(n) FROM (
  SELECT COUNT(*) AS n FROM {table}
   GROUP BY DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID), DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID))
