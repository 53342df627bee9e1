-- CreateTable binds=-
CREATE TABLE dbsim_registry (
	name VARCHAR2(128 CHAR) NOT NULL, 
	workload VARCHAR2(32 CHAR) NOT NULL, 
	fingerprint VARCHAR2(2000 CHAR) NOT NULL, 
	PRIMARY KEY (name)
);

-- CommentOnTable binds=-
COMMENT ON TABLE dbsim_registry IS 'dbsim:00000000000000000000000000000000';

-- CommentOnTable binds=-
COMMENT ON TABLE user_1 IS 'dbsim:00000000000000000000000000000000';

-- object_identity binds=tname
SELECT LOWER(o.object_type) || '|' || TO_CHAR(o.object_id)
       || '|' || TO_CHAR(o.created, 'YYYYMMDDHH24MISS') || '|' || c.comments
  FROM user_objects o
  LEFT JOIN user_tab_comments c ON c.table_name = o.object_name AND o.object_type = 'TABLE'
 WHERE o.object_name = :tname;

-- registry_delete binds=name
DELETE FROM dbsim_registry WHERE name = :name;

-- registry_get binds=name
SELECT fingerprint FROM dbsim_registry WHERE name = :name;

-- registry_names binds=workload,pattern
SELECT name FROM dbsim_registry WHERE workload = :workload AND name LIKE :pattern;

-- registry_others binds=owner
SELECT COUNT(*) FROM dbsim_registry WHERE workload <> :owner;

-- registry_put binds=name,workload,fingerprint
INSERT INTO dbsim_registry (name, workload, fingerprint) VALUES (:name, :workload, :fingerprint);

-- registry_set binds=fingerprint,name
UPDATE dbsim_registry SET fingerprint = :fingerprint WHERE name = :name;

-- CreateTable binds=-
CREATE TABLE user_1 (
	custid INTEGER NOT NULL, 
	c1 VARCHAR2(370 CHAR), 
	c2 VARCHAR2(370 CHAR), 
	c3 VARCHAR2(370 CHAR), 
	c4 VARCHAR2(370 CHAR), 
	c5 VARCHAR2(370 CHAR), 
	c6 VARCHAR2(370 CHAR), 
	c7 VARCHAR2(370 CHAR), 
	c8 VARCHAR2(370 CHAR), 
	c9 VARCHAR2(370 CHAR), 
	c10 VARCHAR2(370 CHAR), 
	c11 VARCHAR2(370 CHAR), 
	c12 VARCHAR2(370 CHAR), 
	c13 VARCHAR2(370 CHAR), 
	c14 VARCHAR2(370 CHAR), 
	c15 VARCHAR2(370 CHAR), 
	c16 VARCHAR2(370 CHAR), 
	c17 VARCHAR2(370 CHAR), 
	c18 VARCHAR2(370 CHAR), 
	c19 VARCHAR2(370 CHAR), 
	c20 VARCHAR2(370 CHAR)
);

-- CreateIndex binds=-
CREATE UNIQUE INDEX user_1_custid ON user_1 (custid);

-- insert_user_1 binds=custid,c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO user_1 (custid, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (:custid, :c1, :c2, :c3, :c4, :c5, :c6, :c7, :c8, :c9, :c10, :c11, :c12, :c13, :c14, :c15, :c16, :c17, :c18, :c19, :c20);

-- DropTable binds=-
DROP TABLE user_1 PURGE;

-- block_size binds=tname
SELECT block_size FROM user_tablespaces
 WHERE tablespace_name = (SELECT tablespace_name FROM user_tables WHERE table_name = :tname);

-- blocks_used binds=-
SELECT COUNT(*) FROM (
  SELECT 1 FROM user_1
   GROUP BY DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID), DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID)
);

-- count_rows binds=-
SELECT COUNT(*) FROM user_1;

-- max_key binds=-
SELECT MAX(custid) FROM user_1;

-- max_rows_per_block binds=-
SELECT MAX(n) FROM (
  SELECT COUNT(*) AS n FROM user_1
   GROUP BY DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID), DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID)
);

-- read_point binds=s
SELECT COUNT(c1) FROM user_1 WHERE custid = :s;

-- read_range binds=s,e
SELECT COUNT(c1) FROM user_1 WHERE custid BETWEEN :s AND :e;

-- unique_index binds=tname,iname
SELECT COUNT(*) FROM user_indexes
 WHERE table_name = :tname AND index_name = :iname AND uniqueness = 'UNIQUE';

-- update binds=v,s,e
UPDATE user_1 SET c1 = :v WHERE custid BETWEEN :s AND :e;
