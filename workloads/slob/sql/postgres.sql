-- PostgreSQL: block numbers come from ctid (block, offset); range_read is a TID range scan
-- (PostgreSQL 14+) of the heap blocks lo_block to hi_block - 1, in order.
-- append: fillfactor 10 holds for INSERT as for the load, so each appended row opens a new
-- heap block; $1 is typed bigint by cf3's key column.

-- name: blocks_used
SELECT COUNT(DISTINCT (ctid::text::point)[0]) FROM {table}

-- name: max_rows_per_block
SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {table} GROUP BY (ctid::text::point)[0]) AS per_block


-- name: range_read
SELECT COUNT(c2) FROM {table}
 WHERE ctid >= ('(' || :lo_block::integer || ',0)')::tid
   AND ctid < ('(' || :hi_block::integer || ',0)')::tid

-- name: append
INSERT INTO {append_table}
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20)
VALUES (:k, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v,
        :v)
