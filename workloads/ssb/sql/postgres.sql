-- PostgreSQL: a row's heap block is the first half of its ctid (block, offset).

-- name: unique_index
SELECT COUNT(*)
  FROM pg_index AS x
  JOIN pg_class AS i ON i.oid = x.indexrelid
  JOIN pg_class AS t ON t.oid = x.indrelid
  JOIN pg_namespace AS n ON n.oid = t.relnamespace
 WHERE n.nspname = current_schema() AND t.relname = :tname AND i.relname = :iname
   AND x.indisunique

-- name: block_size
SELECT CAST(current_setting('block_size') AS INTEGER)

-- name: blocks_used
SELECT COUNT(DISTINCT (ctid::text::point)[0]) FROM {table}

-- name: max_rows_per_block
SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM {table} GROUP BY (ctid::text::point)[0]) AS per_block
