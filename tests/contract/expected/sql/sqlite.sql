-- sample binds=rows
SELECT c FROM t WHERE c IS NOT NULL LIMIT ?;

-- sample_in_schema binds=rows
SELECT c FROM s.t WHERE c IS NOT NULL LIMIT ?;

-- read_only_begin_0 binds=-
PRAGMA query_only = 1;

-- read_only_end_0 binds=-
PRAGMA query_only = 0;
