-- SQLite: catalogue in sqlite_master; page accounting from the dbstat virtual table.

-- name: table_exists
SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = :tname

-- name: blocks_used
SELECT COUNT(*) FROM dbstat WHERE name = :tname AND pagetype = 'leaf'

-- name: max_rows_per_block
SELECT MAX(ncell) FROM dbstat WHERE name = :tname AND pagetype = 'leaf'

