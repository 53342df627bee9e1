-- PostgreSQL: block numbers come from ctid (block, offset).

-- name: blocks_used
SELECT COUNT(DISTINCT (ctid::text::point)[0]) FROM {table}

-- name: max_rows_per_block
SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {table} GROUP BY (ctid::text::point)[0]) AS per_block
