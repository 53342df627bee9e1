-- SSB-like statements. {table} is an identifier (quoted per dialect); :name are bind
-- parameters. Per-dialect files override statements by name; "!dialect-specific" must be.

-- name: read_range
SELECT COUNT(c1) FROM {table} WHERE custid BETWEEN :s AND :e

-- name: read_point
SELECT COUNT(c1) FROM {table} WHERE custid = :s

-- name: update
UPDATE {table} SET c1 = :v WHERE custid BETWEEN :s AND :e

-- name: count_rows
SELECT COUNT(*) FROM {table}

-- name: max_key
SELECT MAX(custid) FROM {table}

-- name: unique_index
!dialect-specific

-- name: block_size
!dialect-specific

-- name: blocks_used
!dialect-specific

-- name: max_rows_per_block
!dialect-specific
