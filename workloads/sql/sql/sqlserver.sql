-- name: sample
SELECT TOP (:rows) {column} FROM {table} WHERE {column} IS NOT NULL

-- name: sample_in_schema
SELECT TOP (:rows) {column} FROM {schema}.{table} WHERE {column} IS NOT NULL
