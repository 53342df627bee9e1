-- SQLite: catalogue in sqlite_master; page accounting from the dbstat virtual table.

-- name: blocks_used
SELECT COUNT(*) FROM dbstat WHERE name = :tname AND pagetype = 'leaf'

-- name: max_rows_per_block
SELECT MAX(ncell) FROM dbstat WHERE name = :tname AND pagetype = 'leaf'
