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
);

-- CreateIndex binds=-
CREATE UNIQUE INDEX user_1_custid ON user_1 (custid);

-- insert_user_1 binds=custid,c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO user_1 (custid, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- DropTable binds=-
DROP TABLE user_1;

-- block_size binds=-
SELECT page_size FROM pragma_page_size();

-- blocks_used binds=tname
SELECT COUNT(*) FROM dbstat WHERE name = ? AND pagetype = 'leaf';

-- count_rows binds=-
SELECT COUNT(*) FROM user_1;

-- max_key binds=-
SELECT MAX(custid) FROM user_1;

-- max_rows_per_block binds=tname
SELECT MAX(ncell) FROM dbstat WHERE name = ? AND pagetype = 'leaf';

-- read_point binds=s
SELECT COUNT(c1) FROM user_1 WHERE custid = ?;

-- read_range binds=s,e
SELECT COUNT(c1) FROM user_1 WHERE custid BETWEEN ? AND ?;

-- unique_index binds=tname,iname
SELECT COUNT(*) FROM pragma_index_list(?) WHERE name = ? AND "unique" = 1;

-- update binds=v,s,e
UPDATE user_1 SET c1 = ? WHERE custid BETWEEN ? AND ?;
