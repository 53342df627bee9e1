-- SQLite: catalogue in sqlite_master and the pragma table functions; page accounting from the
-- dbstat virtual table (one row per page: a leaf page per row, no overflow pages).

-- name: unique_index
SELECT COUNT(*) FROM pragma_index_list(:tname) WHERE name = :iname AND "unique" = 1

-- name: block_size
SELECT page_size FROM pragma_page_size()

-- name: blocks_used
SELECT COUNT(*) FROM dbstat WHERE name = :tname AND pagetype = 'leaf'

-- name: max_rows_per_block
SELECT MAX(ncell) FROM dbstat WHERE name = :tname AND pagetype = 'leaf'
