-- SQLite: catalogue in sqlite_master; page accounting from the dbstat virtual table.
-- append: the padding makes two rows overflow a page, as the loader's rows (:pad, bound by
-- the session; empty for a page that one row fills past its half already).

-- name: blocks_used
SELECT COUNT(*) FROM dbstat WHERE name = :tname AND pagetype = 'leaf'

-- name: max_rows_per_block
SELECT MAX(ncell) FROM dbstat WHERE name = :tname AND pagetype = 'leaf'

-- name: append
INSERT INTO {append_table}
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20, pad)
VALUES (:k, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v,
        :v, :pad)
