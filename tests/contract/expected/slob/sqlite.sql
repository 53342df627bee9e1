-- CreateTable binds=-
CREATE TABLE dbsim_registry (/* dbsim:00000000000000000000000000000000 */
	name VARCHAR(128) NOT NULL, 
	workload VARCHAR(32) NOT NULL, 
	fingerprint TEXT NOT NULL, 
	PRIMARY KEY (name)
);

-- object_identity binds=tname
SELECT type || '|' || COALESCE(rootpage, '') || '||' || COALESCE(sql, '')
  FROM sqlite_master
 WHERE name = ? COLLATE NOCASE;

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
	c20 VARCHAR(128), 
	pad TEXT
);

-- CreateIndex binds=-
CREATE INDEX slob_1_cf1_custid ON slob_1_cf1 (custid);

-- insert_slob_1_cf1 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20,pad
INSERT INTO slob_1_cf1 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, pad) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

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
	c20 VARCHAR(128), 
	pad TEXT
);

-- insert_slob_1_cf2 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20,pad
INSERT INTO slob_1_cf2 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, pad) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

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
	c20 VARCHAR(128), 
	pad TEXT
);

-- insert_slob_1_cf3 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20,pad
INSERT INTO slob_1_cf3 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, pad) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- DropTable binds=-
DROP TABLE slob_1_cf3;

-- append binds=k,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,pad
INSERT INTO slob_1_cf3
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20, pad)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
        ?, ?);

-- blocks_used binds=tname
SELECT COUNT(*) FROM dbstat WHERE name = ? AND pagetype = 'leaf';

-- count_rows binds=-
SELECT COUNT(*) FROM slob_1_cf1;

-- max_key binds=-
SELECT MAX(custid) FROM slob_1_cf1;

-- max_rows_per_block binds=tname
SELECT MAX(ncell) FROM dbstat WHERE name = ? AND pagetype = 'leaf';

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
