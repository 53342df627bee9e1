-- CreateTable binds=-
CREATE TABLE dbsim_registry (
	name VARCHAR(128) NOT NULL, 
	workload VARCHAR(32) NOT NULL, 
	fingerprint TEXT NOT NULL, 
	PRIMARY KEY (name)
);

-- CommentOnTable binds=-
COMMENT ON TABLE dbsim_registry IS 'dbsim:00000000000000000000000000000000';

-- CommentOnTable binds=-
COMMENT ON TABLE user_1 IS 'dbsim:00000000000000000000000000000000';

-- object_identity binds=tname
SELECT CASE c.relkind::text
         WHEN 'r' THEN 'table'
         WHEN 'v' THEN 'view'
         WHEN 'm' THEN 'materialized view'
         WHEN 'f' THEN 'foreign table'
         WHEN 'p' THEN 'partitioned table'
         WHEN 'i' THEN 'index'
         WHEN 'I' THEN 'partitioned index'
         WHEN 'S' THEN 'sequence'
         WHEN 'c' THEN 'composite type'
         ELSE 'relation of kind ' || c.relkind::text
       END
       || '|' || c.oid::text
       || '|' || COALESCE(t.xmin::text, '')
       || '|' || COALESCE(obj_description(c.oid, 'pg_class'), '')
  FROM pg_class AS c
  JOIN pg_namespace AS n ON n.oid = c.relnamespace
  LEFT JOIN pg_type AS t ON t.oid = c.reltype
 WHERE n.nspname = current_schema() AND c.relname = $1;

-- registry_delete binds=name
DELETE FROM dbsim_registry WHERE name = $1;

-- registry_get binds=name
SELECT fingerprint FROM dbsim_registry WHERE name = $1;

-- registry_names binds=workload,pattern
SELECT name FROM dbsim_registry WHERE workload = $1 AND name LIKE $2;

-- registry_others binds=owner
SELECT COUNT(*) FROM dbsim_registry WHERE workload <> $1;

-- registry_put binds=name,workload,fingerprint
INSERT INTO dbsim_registry (name, workload, fingerprint) VALUES ($1, $2, $3);

-- registry_set binds=fingerprint,name
UPDATE dbsim_registry SET fingerprint = $1 WHERE name = $2;

-- CreateTable binds=-
CREATE TABLE user_1 (
	custid INTEGER NOT NULL, 
	c1 VARCHAR(370), 
	c2 VARCHAR(370), 
	c3 VARCHAR(370), 
	c4 VARCHAR(370), 
	c5 VARCHAR(370), 
	c6 VARCHAR(370), 
	c7 VARCHAR(370), 
	c8 VARCHAR(370), 
	c9 VARCHAR(370), 
	c10 VARCHAR(370), 
	c11 VARCHAR(370), 
	c12 VARCHAR(370), 
	c13 VARCHAR(370), 
	c14 VARCHAR(370), 
	c15 VARCHAR(370), 
	c16 VARCHAR(370), 
	c17 VARCHAR(370), 
	c18 VARCHAR(370), 
	c19 VARCHAR(370), 
	c20 VARCHAR(370)
)
 WITH (toast_tuple_target = 8160);

-- CreateIndex binds=-
CREATE UNIQUE INDEX user_1_custid ON user_1 (custid);

-- insert_user_1 binds=custid,c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO user_1 (custid, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES ($1::INTEGER, $2::VARCHAR, $3::VARCHAR, $4::VARCHAR, $5::VARCHAR, $6::VARCHAR, $7::VARCHAR, $8::VARCHAR, $9::VARCHAR, $10::VARCHAR, $11::VARCHAR, $12::VARCHAR, $13::VARCHAR, $14::VARCHAR, $15::VARCHAR, $16::VARCHAR, $17::VARCHAR, $18::VARCHAR, $19::VARCHAR, $20::VARCHAR, $21::VARCHAR);

-- DropTable binds=-
DROP TABLE user_1;

-- block_size binds=-
SELECT CAST(current_setting('block_size') AS INTEGER);

-- blocks_used binds=-
SELECT COUNT(DISTINCT (ctid::text::point)[0]) FROM user_1;

-- count_rows binds=-
SELECT COUNT(*) FROM user_1;

-- max_key binds=-
SELECT MAX(custid) FROM user_1;

-- max_rows_per_block binds=-
SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM user_1 GROUP BY (ctid::text::point)[0]) AS per_block;

-- read_point binds=s
SELECT COUNT(c1) FROM user_1 WHERE custid = $1;

-- read_range binds=s,e
SELECT COUNT(c1) FROM user_1 WHERE custid BETWEEN $1 AND $2;

-- unique_index binds=tname,iname
SELECT COUNT(*)
  FROM pg_index AS x
  JOIN pg_class AS i ON i.oid = x.indexrelid
  JOIN pg_class AS t ON t.oid = x.indrelid
  JOIN pg_namespace AS n ON n.oid = t.relnamespace
 WHERE n.nspname = current_schema() AND t.relname = $1 AND i.relname = $2
   AND x.indisunique;

-- update binds=v,s,e
UPDATE user_1 SET c1 = $1 WHERE custid BETWEEN $2 AND $3;
