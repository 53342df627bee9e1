-- SQL Server: sys.objects of the connection's default schema (tables, views, synonyms,
-- constraints …). Stable id: object_id. Version: create_date (to the millisecond). No marker:
-- writing one takes sp_addextendedproperty, which the contract tests' parser cannot read; the
-- identity is recorded in the transaction that creates the table (autocommit is off), so no
-- table of dbsim's is ever left without it.

-- name: object_identity
SELECT CONCAT(CASE o.type WHEN 'U' THEN 'table' ELSE LOWER(o.type_desc) END,
              '|', o.object_id, '|', CONVERT(VARCHAR(23), o.create_date, 126), '|')
  FROM sys.objects AS o
 WHERE o.name = :tname AND o.schema_id = SCHEMA_ID()
