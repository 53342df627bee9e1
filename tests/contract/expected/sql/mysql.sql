-- sample binds=rows
SELECT c FROM t WHERE c IS NOT NULL LIMIT %s;

-- sample_in_schema binds=rows
SELECT c FROM s.t WHERE c IS NOT NULL LIMIT %s;

-- read_only_begin_0 binds=-
START TRANSACTION READ ONLY;
