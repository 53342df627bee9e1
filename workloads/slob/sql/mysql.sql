-- MariaDB/MySQL (InnoDB): no row address like ctid, so page accounting comes from InnoDB's
-- persistent statistics, refreshed by ANALYZE TABLE before verify reads them: the leaf pages
-- of the clustered index (GEN_CLUST_INDEX: SLOB's tables have no primary key) and the rows
-- per leaf page, rounded up (InnoDB keeps two SLOB rows per 16 KiB page). Without statistics
-- every row counts as sharing one page, so verify fails.
-- append: the padding brings the row to 7/16 of an InnoDB page as the loader's rows (:pad,
-- bound by the session); the clustered index's hidden row id grows with each insert, so the
-- rows fill new pages at the end of it, two a page.

-- name: blocks_used
SELECT COALESCE(MAX(CAST(s.stat_value AS SIGNED)), 0)
  FROM mysql.innodb_index_stats AS s
 WHERE s.database_name = DATABASE() AND s.table_name = :tname
   AND s.index_name IN ('GEN_CLUST_INDEX', 'PRIMARY') AND s.stat_name = 'n_leaf_pages'

-- name: max_rows_per_block
SELECT CAST(CEILING(COUNT(*) / COALESCE((
         SELECT MAX(s.stat_value)
           FROM mysql.innodb_index_stats AS s
          WHERE s.database_name = DATABASE() AND s.table_name = :tname
            AND s.index_name IN ('GEN_CLUST_INDEX', 'PRIMARY') AND s.stat_name = 'n_leaf_pages'), 1)) AS SIGNED)
  FROM {table}

-- name: append
INSERT INTO {append_table}
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20, pad)
VALUES (:k, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v,
        :v, :pad)
