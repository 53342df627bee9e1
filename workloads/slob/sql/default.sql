-- SLOB-like statements. {table}/{scan_table} are identifiers (quoted per dialect);
-- :name are bind parameters. Per-dialect files override statements by name.
-- range_read: the rows of cf1's blocks lo_block to hi_block - 1, read in block order so the
-- kernel's read-ahead merges them into multi-block requests (range_pct). Only an engine that
-- addresses rows by block can say it (a key range of cf1 is scattered blocks): !unsupported
-- where it cannot, and a scenario with range_pct > 0 on it is refused.
-- append (not SLOB's: append_pct): one new row of cf1's shape into {append_table}, cf3, which
-- has no index; :k is a key unique to the session and loop, :v the 128-character value of
-- every text column. The dialect's one-row-per-block mechanism, which applies to inserts too,
-- puts it in a new block: a block written (later, by the engine), none read. A dialect that
-- pads its rows names its padding column here and binds :pad.

-- update_row (not SLOB's: row_update_pct): one row of cf1 by its key, c2 and c20 as a LITE
-- update: an index lookup, one random block read and dirtied. The keys are loaded in a random
-- permutation, so the blocks these dirty are scattered over the table and the write-back
-- writes them one by one (a range of cf1's blocks would be merged into larger requests).

-- name: read
SELECT COUNT(c2) FROM {table} WHERE custid > :lo AND custid < :hi

-- name: update_lite
UPDATE {table} SET c2 = :v, c20 = :v WHERE custid > :lo AND custid < :hi

-- name: update_heavy
UPDATE {table}
   SET c2 = :v, c3 = :v, c4 = :v, c5 = :v, c6 = :v, c7 = :v, c8 = :v, c9 = :v, c10 = :v,
       c11 = :v, c12 = :v, c13 = :v, c14 = :v, c15 = :v, c16 = :v, c17 = :v, c18 = :v,
       c19 = :v, c20 = :v
 WHERE custid > :lo AND custid < :hi

-- name: update_row
UPDATE {table} SET c2 = :v, c20 = :v WHERE custid = :k

-- name: scan
SELECT COUNT(c2) FROM {scan_table}

-- name: count_rows
SELECT COUNT(*) FROM {table}

-- name: max_key
SELECT MAX(custid) FROM {table}

-- name: blocks_used
!dialect-specific

-- name: max_rows_per_block
!dialect-specific


-- name: range_read
!unsupported

-- name: append
INSERT INTO {append_table}
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20)
VALUES (:k, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v,
        :v)
