-- PostgreSQL: block numbers come from ctid (block, offset); range_read is a TID range scan
-- (PostgreSQL 14+) of the heap blocks lo_block to hi_block - 1, in order.

-- name: blocks_used
SELECT COUNT(DISTINCT (ctid::text::point)[0]) FROM {table}

-- name: max_rows_per_block
SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {table} GROUP BY (ctid::text::point)[0]) AS per_block


-- name: range_read
SELECT COUNT(c2) FROM {table}
 WHERE ctid >= ('(' || :lo_block::integer || ',0)')::tid
   AND ctid < ('(' || :hi_block::integer || ',0)')::tid
