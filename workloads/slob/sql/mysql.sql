-- MariaDB/MySQL (InnoDB): no row address like ctid, so page accounting comes from InnoDB's
-- persistent statistics, refreshed by ANALYZE TABLE before verify reads them: the leaf pages
-- of the clustered index (GEN_CLUST_INDEX: SLOB's tables have no primary key) and the rows
-- per leaf page, rounded up (InnoDB keeps two SLOB rows per 16 KiB page). Without statistics
-- every row counts as sharing one page, so verify fails.

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
