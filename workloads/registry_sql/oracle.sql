-- Oracle: USER_OBJECTS (tables, views, materialized views and their container tables,
-- synonyms, indexes …). Stable id: OBJECT_ID. Version: CREATED (to the second; MINIMIZE
-- RECORDS_PER_BLOCK and other DDL move LAST_DDL_TIME, not CREATED). Marker: the table comment.
-- :tname is the name as the dictionary stores it (unquoted names upper-cased).

-- name: object_identity
SELECT LOWER(o.object_type) || '|' || TO_CHAR(o.object_id)
       || '|' || TO_CHAR(o.created, 'YYYYMMDDHH24MISS') || '|' || c.comments
  FROM user_objects o
  LEFT JOIN user_tab_comments c ON c.table_name = o.object_name AND o.object_type = 'TABLE'
 WHERE o.object_name = :tname
