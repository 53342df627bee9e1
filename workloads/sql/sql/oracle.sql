-- name: sample
SELECT {column} FROM {table} WHERE {column} IS NOT NULL FETCH FIRST :rows ROWS ONLY

-- name: sample_in_schema
SELECT {column} FROM {schema}.{table} WHERE {column} IS NOT NULL FETCH FIRST :rows ROWS ONLY
