-- Oracle: catalogue in USER_TABLES; block accounting from ROWIDs.
-- A block is the pair (relative file number, block number) decoded by DBMS_ROWID. Decoding a
-- bigfile tablespace's ROWID as smallfile (the default) splits its 32-bit block number into
-- these two parts, so the pair still names exactly one block in either kind of tablespace.
-- Unquoted names (all lower case here) are stored upper case; mixed-case names are quoted.
-- Every other statement in default.sql is valid Oracle SQL as it stands (no AS before a
-- table alias, no LIMIT, no boolean literals), so only these two are overridden.
-- append is default.sql's INSERT, repeated here so Oracle's form is read where Oracle's SQL
-- is: named binds, :v bound once by name for its 19 places. cf3 is created with PCTFREE 99
-- like cf1, so a block takes no second row after its first ~2.5 KB one; MINIMIZE
-- RECORDS_PER_BLOCK is not run on it (it derives its limit from the rows a table holds, and
-- cf3 is created empty). Not run here (no Oracle server in this suite): written from Oracle's
-- INSERT and PCTFREE reference, parsed by the contract tests.

-- name: blocks_used
SELECT COUNT(*) FROM (
  SELECT DISTINCT DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID) AS fno,
                  DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID) AS blk
    FROM {table})

-- name: max_rows_per_block
SELECT MAX(n) FROM (
  SELECT COUNT(*) AS n FROM {table}
   GROUP BY DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID), DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID))

-- name: append
INSERT INTO {append_table}
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20)
VALUES (:k, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v,
        :v)
