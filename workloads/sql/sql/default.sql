-- The sql workload creates nothing; these read the values of a `sample:` generator, once,
-- before the measured window. The user's own statements come from the scenario.

-- name: sample
SELECT {column} FROM {table} WHERE {column} IS NOT NULL LIMIT :rows

-- name: sample_in_schema
SELECT {column} FROM {schema}.{table} WHERE {column} IS NOT NULL LIMIT :rows
