-- SQLite: sqlite_master (tables, views, indexes, triggers), names compared as SQLite resolves
-- them (case-insensitively). Stable id: the root page. Marker: the CREATE text, which keeps the
-- comment dbsim writes inside its parentheses. A root page freed by DROP TABLE is often the
-- very page the next CREATE TABLE gets, so the marker is what tells a re-creation apart.

-- name: object_identity
SELECT type || '|' || COALESCE(rootpage, '') || '||' || COALESCE(sql, '')
  FROM sqlite_master
 WHERE name = :tname COLLATE NOCASE
