-- dbsim's registry of the objects it created (workloads/ownership.py). {registry} is the
-- registry table's name; :name are bind parameters. Per-dialect files override by name.
--
-- object_identity returns one text per catalogue object named :tname in the target's schema,
-- whatever its kind (table, view, materialized view, synonym, index …):
-- "kind|stable id|version|marker", where the marker part holds the object's comment (on
-- SQLite its CREATE text), in which dbsim wrote "dbsim:<token>".

-- name: object_identity
!dialect-specific

-- name: registry_get
SELECT fingerprint FROM {registry} WHERE name = :name

-- name: registry_put
INSERT INTO {registry} (name, workload, fingerprint) VALUES (:name, :workload, :fingerprint)

-- name: registry_set
UPDATE {registry} SET fingerprint = :fingerprint WHERE name = :name

-- name: registry_delete
DELETE FROM {registry} WHERE name = :name

-- name: registry_names
SELECT name FROM {registry} WHERE workload = :workload AND name LIKE :pattern

-- name: registry_others
SELECT COUNT(*) FROM {registry} WHERE workload <> :owner
