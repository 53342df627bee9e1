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
COMMENT ON TABLE slob_1_cf1 IS 'dbsim:00000000000000000000000000000000';

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
CREATE TABLE slob_1_cf1 (
	custid INTEGER NOT NULL, 
	c2 VARCHAR2(128 CHAR), 
	c3 VARCHAR2(128 CHAR), 
	c4 VARCHAR2(128 CHAR), 
	c5 VARCHAR2(128 CHAR), 
	c6 VARCHAR2(128 CHAR), 
	c7 VARCHAR2(128 CHAR), 
	c8 VARCHAR2(128 CHAR), 
	c9 VARCHAR2(128 CHAR), 
	c10 VARCHAR2(128 CHAR), 
	c11 VARCHAR2(128 CHAR), 
	c12 VARCHAR2(128 CHAR), 
	c13 VARCHAR2(128 CHAR), 
	c14 VARCHAR2(128 CHAR), 
	c15 VARCHAR2(128 CHAR), 
	c16 VARCHAR2(128 CHAR), 
	c17 VARCHAR2(128 CHAR), 
	c18 VARCHAR2(128 CHAR), 
	c19 VARCHAR2(128 CHAR), 
	c20 VARCHAR2(128 CHAR)
)
 PCTFREE 99;

-- MinimizeRecordsPerBlock binds=-
ALTER TABLE slob_1_cf1 MINIMIZE RECORDS_PER_BLOCK;

-- CreateIndex binds=-
CREATE INDEX slob_1_cf1_custid ON slob_1_cf1 (custid);

-- insert_slob_1_cf1 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO slob_1_cf1 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (:custid, :c2, :c3, :c4, :c5, :c6, :c7, :c8, :c9, :c10, :c11, :c12, :c13, :c14, :c15, :c16, :c17, :c18, :c19, :c20);

-- DropTable binds=-
DROP TABLE slob_1_cf1 PURGE;

-- CreateTable binds=-
CREATE TABLE slob_1_cf2 (
	custid INTEGER NOT NULL, 
	c2 VARCHAR2(128 CHAR), 
	c3 VARCHAR2(128 CHAR), 
	c4 VARCHAR2(128 CHAR), 
	c5 VARCHAR2(128 CHAR), 
	c6 VARCHAR2(128 CHAR), 
	c7 VARCHAR2(128 CHAR), 
	c8 VARCHAR2(128 CHAR), 
	c9 VARCHAR2(128 CHAR), 
	c10 VARCHAR2(128 CHAR), 
	c11 VARCHAR2(128 CHAR), 
	c12 VARCHAR2(128 CHAR), 
	c13 VARCHAR2(128 CHAR), 
	c14 VARCHAR2(128 CHAR), 
	c15 VARCHAR2(128 CHAR), 
	c16 VARCHAR2(128 CHAR), 
	c17 VARCHAR2(128 CHAR), 
	c18 VARCHAR2(128 CHAR), 
	c19 VARCHAR2(128 CHAR), 
	c20 VARCHAR2(128 CHAR)
)
 PCTFREE 99;

-- MinimizeRecordsPerBlock binds=-
ALTER TABLE slob_1_cf2 MINIMIZE RECORDS_PER_BLOCK;

-- insert_slob_1_cf2 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO slob_1_cf2 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (:custid, :c2, :c3, :c4, :c5, :c6, :c7, :c8, :c9, :c10, :c11, :c12, :c13, :c14, :c15, :c16, :c17, :c18, :c19, :c20);

-- DropTable binds=-
DROP TABLE slob_1_cf2 PURGE;

-- CreateTable binds=-
CREATE TABLE slob_1_cf3 (
	custid NUMBER(19) NOT NULL, 
	c2 VARCHAR2(128 CHAR), 
	c3 VARCHAR2(128 CHAR), 
	c4 VARCHAR2(128 CHAR), 
	c5 VARCHAR2(128 CHAR), 
	c6 VARCHAR2(128 CHAR), 
	c7 VARCHAR2(128 CHAR), 
	c8 VARCHAR2(128 CHAR), 
	c9 VARCHAR2(128 CHAR), 
	c10 VARCHAR2(128 CHAR), 
	c11 VARCHAR2(128 CHAR), 
	c12 VARCHAR2(128 CHAR), 
	c13 VARCHAR2(128 CHAR), 
	c14 VARCHAR2(128 CHAR), 
	c15 VARCHAR2(128 CHAR), 
	c16 VARCHAR2(128 CHAR), 
	c17 VARCHAR2(128 CHAR), 
	c18 VARCHAR2(128 CHAR), 
	c19 VARCHAR2(128 CHAR), 
	c20 VARCHAR2(128 CHAR)
)
 PCTFREE 99;

-- insert_slob_1_cf3 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO slob_1_cf3 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (:custid, :c2, :c3, :c4, :c5, :c6, :c7, :c8, :c9, :c10, :c11, :c12, :c13, :c14, :c15, :c16, :c17, :c18, :c19, :c20);

-- DropTable binds=-
DROP TABLE slob_1_cf3 PURGE;

-- append binds=k,v
INSERT INTO slob_1_cf3
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20)
VALUES (:k, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v, :v,
        :v);

-- blocks_used binds=-
SELECT COUNT(*) FROM (
  SELECT DISTINCT DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID) AS fno,
                  DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID) AS blk
    FROM slob_1_cf1);

-- count_rows binds=-
SELECT COUNT(*) FROM slob_1_cf1;

-- max_key binds=-
SELECT MAX(custid) FROM slob_1_cf1;

-- max_rows_per_block binds=-
SELECT MAX(n) FROM (
  SELECT COUNT(*) AS n FROM slob_1_cf1
   GROUP BY DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID), DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID));

-- read binds=lo,hi
SELECT COUNT(c2) FROM slob_1_cf1 WHERE custid > :lo AND custid < :hi;

-- scan binds=-
SELECT COUNT(c2) FROM slob_1_cf2;

-- update_heavy binds=v,lo,hi
UPDATE slob_1_cf1
   SET c2 = :v, c3 = :v, c4 = :v, c5 = :v, c6 = :v, c7 = :v, c8 = :v, c9 = :v, c10 = :v,
       c11 = :v, c12 = :v, c13 = :v, c14 = :v, c15 = :v, c16 = :v, c17 = :v, c18 = :v,
       c19 = :v, c20 = :v
 WHERE custid > :lo AND custid < :hi;

-- update_lite binds=v,lo,hi
UPDATE slob_1_cf1 SET c2 = :v, c20 = :v WHERE custid > :lo AND custid < :hi;

-- update_row binds=v,k
UPDATE slob_1_cf1 SET c2 = :v, c20 = :v WHERE custid = :k;
