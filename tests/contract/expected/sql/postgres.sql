-- sample binds=rows
SELECT c FROM t WHERE c IS NOT NULL LIMIT $1;

-- sample_in_schema binds=rows
SELECT c FROM s.t WHERE c IS NOT NULL LIMIT $1;

-- read_only_begin_0 binds=-
SET TRANSACTION READ ONLY;
