-- MariaDB/MySQL: information_schema.TABLES of the current database (base tables, views,
-- system versioned tables, sequences …). Marker: the table comment (CREATE TABLE … COMMENT =
-- 'dbsim:<token>'), which is also the identity: InnoDB rebuilds a table for DDL dbsim runs
-- itself (SSB's unique index on a NOT NULL key becomes the clustered index), giving it a new
-- TABLE_ID and CREATE_TIME, so no catalogue id survives a load. A table re-created outside
-- dbsim lacks the token and is refused. Names compare as the server stores them
-- (case-sensitive on Linux).

-- name: object_identity
SELECT CONCAT(CASE t.TABLE_TYPE WHEN 'BASE TABLE' THEN 'table' ELSE LOWER(t.TABLE_TYPE) END,
              '|', COALESCE(t.ENGINE, ''), '||', COALESCE(t.TABLE_COMMENT, ''))
  FROM information_schema.TABLES AS t
 WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = :tname
