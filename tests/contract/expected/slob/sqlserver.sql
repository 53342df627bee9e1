-- CreateTable binds=-
CREATE TABLE dbsim_registry (
	name VARCHAR(128) NOT NULL, 
	workload VARCHAR(32) NOT NULL, 
	fingerprint VARCHAR(2000) NOT NULL, 
	PRIMARY KEY (name)
);

-- object_identity binds=tname
SELECT CONCAT(CASE o.type WHEN 'U' THEN 'table' ELSE LOWER(o.type_desc) END,
              '|', o.object_id, '|', CONVERT(VARCHAR(23), o.create_date, 126), '|')
  FROM sys.objects AS o
 WHERE o.name = ? AND o.schema_id = SCHEMA_ID();

-- registry_delete binds=name
DELETE FROM dbsim_registry WHERE name = ?;

-- registry_get binds=name
SELECT fingerprint FROM dbsim_registry WHERE name = ?;

-- registry_names binds=workload,pattern
SELECT name FROM dbsim_registry WHERE workload = ? AND name LIKE ?;

-- registry_others binds=owner
SELECT COUNT(*) FROM dbsim_registry WHERE workload <> ?;

-- registry_put binds=name,workload,fingerprint
INSERT INTO dbsim_registry (name, workload, fingerprint) VALUES (?, ?, ?);

-- registry_set binds=fingerprint,name
UPDATE dbsim_registry SET fingerprint = ? WHERE name = ?;

-- CreateTable binds=-
CREATE TABLE slob_1_cf1 (
	custid INTEGER NOT NULL, 
	c2 VARCHAR(128) NULL, 
	c3 VARCHAR(128) NULL, 
	c4 VARCHAR(128) NULL, 
	c5 VARCHAR(128) NULL, 
	c6 VARCHAR(128) NULL, 
	c7 VARCHAR(128) NULL, 
	c8 VARCHAR(128) NULL, 
	c9 VARCHAR(128) NULL, 
	c10 VARCHAR(128) NULL, 
	c11 VARCHAR(128) NULL, 
	c12 VARCHAR(128) NULL, 
	c13 VARCHAR(128) NULL, 
	c14 VARCHAR(128) NULL, 
	c15 VARCHAR(128) NULL, 
	c16 VARCHAR(128) NULL, 
	c17 VARCHAR(128) NULL, 
	c18 VARCHAR(128) NULL, 
	c19 VARCHAR(128) NULL, 
	c20 VARCHAR(128) NULL, 
	filler CHAR(5000) NOT NULL DEFAULT ''
);

-- CreateIndex binds=-
CREATE INDEX slob_1_cf1_custid ON slob_1_cf1 (custid);

-- insert_slob_1_cf1 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO slob_1_cf1 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- DropTable binds=-
DROP TABLE slob_1_cf1;

-- CreateTable binds=-
CREATE TABLE slob_1_cf2 (
	custid INTEGER NOT NULL, 
	c2 VARCHAR(128) NULL, 
	c3 VARCHAR(128) NULL, 
	c4 VARCHAR(128) NULL, 
	c5 VARCHAR(128) NULL, 
	c6 VARCHAR(128) NULL, 
	c7 VARCHAR(128) NULL, 
	c8 VARCHAR(128) NULL, 
	c9 VARCHAR(128) NULL, 
	c10 VARCHAR(128) NULL, 
	c11 VARCHAR(128) NULL, 
	c12 VARCHAR(128) NULL, 
	c13 VARCHAR(128) NULL, 
	c14 VARCHAR(128) NULL, 
	c15 VARCHAR(128) NULL, 
	c16 VARCHAR(128) NULL, 
	c17 VARCHAR(128) NULL, 
	c18 VARCHAR(128) NULL, 
	c19 VARCHAR(128) NULL, 
	c20 VARCHAR(128) NULL, 
	filler CHAR(5000) NOT NULL DEFAULT ''
);

-- insert_slob_1_cf2 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO slob_1_cf2 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- DropTable binds=-
DROP TABLE slob_1_cf2;

-- CreateTable binds=-
CREATE TABLE slob_1_cf3 (
	custid BIGINT NOT NULL, 
	c2 VARCHAR(128) NULL, 
	c3 VARCHAR(128) NULL, 
	c4 VARCHAR(128) NULL, 
	c5 VARCHAR(128) NULL, 
	c6 VARCHAR(128) NULL, 
	c7 VARCHAR(128) NULL, 
	c8 VARCHAR(128) NULL, 
	c9 VARCHAR(128) NULL, 
	c10 VARCHAR(128) NULL, 
	c11 VARCHAR(128) NULL, 
	c12 VARCHAR(128) NULL, 
	c13 VARCHAR(128) NULL, 
	c14 VARCHAR(128) NULL, 
	c15 VARCHAR(128) NULL, 
	c16 VARCHAR(128) NULL, 
	c17 VARCHAR(128) NULL, 
	c18 VARCHAR(128) NULL, 
	c19 VARCHAR(128) NULL, 
	c20 VARCHAR(128) NULL, 
	filler CHAR(5000) NOT NULL DEFAULT ''
);

-- insert_slob_1_cf3 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO slob_1_cf3 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- DropTable binds=-
DROP TABLE slob_1_cf3;

-- append binds=k,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v
INSERT INTO slob_1_cf3
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
        ?);

-- blocks_used binds=tname
SELECT COUNT(*)
  FROM sys.tables AS t
 CROSS APPLY sys.dm_db_database_page_allocations(DB_ID(), t.object_id, 0, NULL, 'LIMITED') AS pa
 CROSS APPLY sys.dm_db_page_info(DB_ID(), pa.allocated_page_file_id, pa.allocated_page_page_id, 'LIMITED') AS pg
 WHERE t.name = ? AND t.schema_id = SCHEMA_ID()
   AND pa.is_allocated = 1 AND pg.page_type = 1 AND pg.slot_count > 0;

-- count_rows binds=-
SELECT COUNT(*) FROM slob_1_cf1;

-- max_key binds=-
SELECT MAX(custid) FROM slob_1_cf1;

-- max_rows_per_block binds=tname
SELECT MAX(pg.slot_count)
  FROM sys.tables AS t
 CROSS APPLY sys.dm_db_database_page_allocations(DB_ID(), t.object_id, 0, NULL, 'LIMITED') AS pa
 CROSS APPLY sys.dm_db_page_info(DB_ID(), pa.allocated_page_file_id, pa.allocated_page_page_id, 'LIMITED') AS pg
 WHERE t.name = ? AND t.schema_id = SCHEMA_ID()
   AND pa.is_allocated = 1 AND pg.page_type = 1;

-- read binds=lo,hi
SELECT COUNT(c2) FROM slob_1_cf1 WHERE custid > ? AND custid < ?;

-- scan binds=-
SELECT COUNT(c2) FROM slob_1_cf2;

-- update_heavy binds=v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,lo,hi
UPDATE slob_1_cf1
   SET c2 = ?, c3 = ?, c4 = ?, c5 = ?, c6 = ?, c7 = ?, c8 = ?, c9 = ?, c10 = ?,
       c11 = ?, c12 = ?, c13 = ?, c14 = ?, c15 = ?, c16 = ?, c17 = ?, c18 = ?,
       c19 = ?, c20 = ?
 WHERE custid > ? AND custid < ?;

-- update_lite binds=v,v,lo,hi
UPDATE slob_1_cf1 SET c2 = ?, c20 = ? WHERE custid > ? AND custid < ?;

-- update_row binds=v,v,k
UPDATE slob_1_cf1 SET c2 = ?, c20 = ? WHERE custid = ?;
