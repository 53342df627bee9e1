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
COMMENT ON TABLE slob_1_cf1 IS 'dbsim:00000000000000000000000000000000';

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
CREATE TABLE slob_1_cf1 (
	custid INTEGER NOT NULL, 
	c2 VARCHAR(128), 
	c3 VARCHAR(128), 
	c4 VARCHAR(128), 
	c5 VARCHAR(128), 
	c6 VARCHAR(128), 
	c7 VARCHAR(128), 
	c8 VARCHAR(128), 
	c9 VARCHAR(128), 
	c10 VARCHAR(128), 
	c11 VARCHAR(128), 
	c12 VARCHAR(128), 
	c13 VARCHAR(128), 
	c14 VARCHAR(128), 
	c15 VARCHAR(128), 
	c16 VARCHAR(128), 
	c17 VARCHAR(128), 
	c18 VARCHAR(128), 
	c19 VARCHAR(128), 
	c20 VARCHAR(128)
)
 WITH (fillfactor = 10, toast_tuple_target = 8160);

-- CreateIndex binds=-
CREATE INDEX slob_1_cf1_custid ON slob_1_cf1 (custid);

-- insert_slob_1_cf1 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO slob_1_cf1 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES ($1::INTEGER, $2::VARCHAR, $3::VARCHAR, $4::VARCHAR, $5::VARCHAR, $6::VARCHAR, $7::VARCHAR, $8::VARCHAR, $9::VARCHAR, $10::VARCHAR, $11::VARCHAR, $12::VARCHAR, $13::VARCHAR, $14::VARCHAR, $15::VARCHAR, $16::VARCHAR, $17::VARCHAR, $18::VARCHAR, $19::VARCHAR, $20::VARCHAR);

-- DropTable binds=-
DROP TABLE slob_1_cf1;

-- CreateTable binds=-
CREATE TABLE slob_1_cf2 (
	custid INTEGER NOT NULL, 
	c2 VARCHAR(128), 
	c3 VARCHAR(128), 
	c4 VARCHAR(128), 
	c5 VARCHAR(128), 
	c6 VARCHAR(128), 
	c7 VARCHAR(128), 
	c8 VARCHAR(128), 
	c9 VARCHAR(128), 
	c10 VARCHAR(128), 
	c11 VARCHAR(128), 
	c12 VARCHAR(128), 
	c13 VARCHAR(128), 
	c14 VARCHAR(128), 
	c15 VARCHAR(128), 
	c16 VARCHAR(128), 
	c17 VARCHAR(128), 
	c18 VARCHAR(128), 
	c19 VARCHAR(128), 
	c20 VARCHAR(128)
)
 WITH (fillfactor = 10, toast_tuple_target = 8160);

-- insert_slob_1_cf2 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO slob_1_cf2 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES ($1::INTEGER, $2::VARCHAR, $3::VARCHAR, $4::VARCHAR, $5::VARCHAR, $6::VARCHAR, $7::VARCHAR, $8::VARCHAR, $9::VARCHAR, $10::VARCHAR, $11::VARCHAR, $12::VARCHAR, $13::VARCHAR, $14::VARCHAR, $15::VARCHAR, $16::VARCHAR, $17::VARCHAR, $18::VARCHAR, $19::VARCHAR, $20::VARCHAR);

-- DropTable binds=-
DROP TABLE slob_1_cf2;

-- CreateTable binds=-
CREATE TABLE slob_1_cf3 (
	custid BIGINT NOT NULL, 
	c2 VARCHAR(128), 
	c3 VARCHAR(128), 
	c4 VARCHAR(128), 
	c5 VARCHAR(128), 
	c6 VARCHAR(128), 
	c7 VARCHAR(128), 
	c8 VARCHAR(128), 
	c9 VARCHAR(128), 
	c10 VARCHAR(128), 
	c11 VARCHAR(128), 
	c12 VARCHAR(128), 
	c13 VARCHAR(128), 
	c14 VARCHAR(128), 
	c15 VARCHAR(128), 
	c16 VARCHAR(128), 
	c17 VARCHAR(128), 
	c18 VARCHAR(128), 
	c19 VARCHAR(128), 
	c20 VARCHAR(128)
)
 WITH (fillfactor = 10, toast_tuple_target = 8160);

-- insert_slob_1_cf3 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO slob_1_cf3 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES ($1::BIGINT, $2::VARCHAR, $3::VARCHAR, $4::VARCHAR, $5::VARCHAR, $6::VARCHAR, $7::VARCHAR, $8::VARCHAR, $9::VARCHAR, $10::VARCHAR, $11::VARCHAR, $12::VARCHAR, $13::VARCHAR, $14::VARCHAR, $15::VARCHAR, $16::VARCHAR, $17::VARCHAR, $18::VARCHAR, $19::VARCHAR, $20::VARCHAR);

-- DropTable binds=-
DROP TABLE slob_1_cf3;

-- append binds=k,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v
INSERT INTO slob_1_cf3
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
        $20);

-- blocks_used binds=-
SELECT COUNT(DISTINCT (ctid::text::point)[0]) FROM slob_1_cf1;

-- count_rows binds=-
SELECT COUNT(*) FROM slob_1_cf1;

-- max_key binds=-
SELECT MAX(custid) FROM slob_1_cf1;

-- max_rows_per_block binds=-
SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM slob_1_cf1 GROUP BY (ctid::text::point)[0]) AS per_block;

-- range_read binds=lo_block,hi_block
SELECT COUNT(c2) FROM slob_1_cf1
 WHERE ctid >= ('(' || $1::integer || ',0)')::tid
   AND ctid < ('(' || $2::integer || ',0)')::tid;

-- read binds=lo,hi
SELECT COUNT(c2) FROM slob_1_cf1 WHERE custid > $1 AND custid < $2;

-- scan binds=-
SELECT COUNT(c2) FROM slob_1_cf2;

-- update_heavy binds=v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,lo,hi
UPDATE slob_1_cf1
   SET c2 = $1, c3 = $2, c4 = $3, c5 = $4, c6 = $5, c7 = $6, c8 = $7, c9 = $8, c10 = $9,
       c11 = $10, c12 = $11, c13 = $12, c14 = $13, c15 = $14, c16 = $15, c17 = $16, c18 = $17,
       c19 = $18, c20 = $19
 WHERE custid > $20 AND custid < $21;

-- update_lite binds=v,v,lo,hi
UPDATE slob_1_cf1 SET c2 = $1, c20 = $2 WHERE custid > $3 AND custid < $4;

-- update_row binds=v,v,k
UPDATE slob_1_cf1 SET c2 = $1, c20 = $2 WHERE custid = $3;
