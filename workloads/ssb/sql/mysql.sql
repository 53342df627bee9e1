-- MariaDB/MySQL (InnoDB): catalogue in information_schema.STATISTICS; page accounting from
-- InnoDB's persistent statistics, refreshed by ANALYZE TABLE before verify reads them: the
-- leaf pages of the clustered index (the unique index on the NOT NULL custid becomes it) and
-- the rows per leaf page, rounded up (two ≈7.4 KB rows share each 16 KiB page, as they would
-- two 8 KiB pages). Without statistics every row counts as sharing one page, so verify fails.

-- name: unique_index
SELECT COUNT(DISTINCT s.INDEX_NAME)
  FROM information_schema.STATISTICS AS s
 WHERE s.TABLE_SCHEMA = DATABASE() AND s.TABLE_NAME = :tname AND s.INDEX_NAME = :iname
   AND s.NON_UNIQUE = 0

-- name: block_size
SELECT CAST(@@innodb_page_size AS SIGNED)

-- name: blocks_used
SELECT COALESCE(MAX(CAST(s.stat_value AS SIGNED)), 0)
  FROM mysql.innodb_index_stats AS s
 WHERE s.database_name = DATABASE() AND s.table_name = :tname
   AND s.index_name IN ('GEN_CLUST_INDEX', 'PRIMARY', :iname) AND s.stat_name = 'n_leaf_pages'

-- name: max_rows_per_block
SELECT CAST(CEILING(COUNT(*) / COALESCE((
         SELECT MAX(s.stat_value)
           FROM mysql.innodb_index_stats AS s
          WHERE s.database_name = DATABASE() AND s.table_name = :tname
            AND s.index_name IN ('GEN_CLUST_INDEX', 'PRIMARY', :iname) AND s.stat_name = 'n_leaf_pages'), 1)) AS SIGNED)
  FROM {table}
