-- PostgreSQL: every pg_class entry of the current schema (tables, views, materialized views,
-- foreign tables, sequences, indexes …). Stable id: the oid. Version: the xmin of the table's
-- row type in pg_type, i.e. the transaction that created the table: written once by CREATE
-- TABLE, unlike the pg_class row, which dbsim's own CREATE INDEX and any GRANT rewrite.
-- Marker: the table's comment (COMMENT ON TABLE … IS 'dbsim:<token>').

-- name: object_identity
SELECT CASE c.relkind::text
         WHEN 'r' THEN 'table'
         WHEN 'v' THEN 'view'
         WHEN 'm' THEN 'materialized view'
         WHEN 'f' THEN 'foreign table'
         WHEN 'p' THEN 'partitioned table'
         WHEN 'i' THEN 'index'
         WHEN 'I' THEN 'partitioned index'
         WHEN 'S' THEN 'sequence'
         WHEN 'c' THEN 'composite type'
         ELSE 'relation of kind ' || c.relkind::text
       END
       || '|' || c.oid::text
       || '|' || COALESCE(t.xmin::text, '')
       || '|' || COALESCE(obj_description(c.oid, 'pg_class'), '')
  FROM pg_class AS c
  JOIN pg_namespace AS n ON n.oid = c.relnamespace
  LEFT JOIN pg_type AS t ON t.oid = c.reltype
 WHERE n.nspname = current_schema() AND c.relname = :tname
