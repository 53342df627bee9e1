-- sample binds=rows
SELECT TOP (?) c FROM t WHERE c IS NOT NULL;

-- sample_in_schema binds=rows
SELECT TOP (?) c FROM s.t WHERE c IS NOT NULL;
