-- sample binds=rows
SELECT c FROM t WHERE c IS NOT NULL FETCH FIRST :rows ROWS ONLY;

-- sample_in_schema binds=rows
SELECT c FROM s.t WHERE c IS NOT NULL FETCH FIRST :rows ROWS ONLY;

-- read_only_begin_0 binds=-
SET TRANSACTION READ ONLY;
