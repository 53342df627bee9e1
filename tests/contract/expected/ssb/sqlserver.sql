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
CREATE TABLE user_1 (
	custid INTEGER NOT NULL, 
	c1 VARCHAR(370) NULL, 
	c2 VARCHAR(370) NULL, 
	c3 VARCHAR(370) NULL, 
	c4 VARCHAR(370) NULL, 
	c5 VARCHAR(370) NULL, 
	c6 VARCHAR(370) NULL, 
	c7 VARCHAR(370) NULL, 
	c8 VARCHAR(370) NULL, 
	c9 VARCHAR(370) NULL, 
	c10 VARCHAR(370) NULL, 
	c11 VARCHAR(370) NULL, 
	c12 VARCHAR(370) NULL, 
	c13 VARCHAR(370) NULL, 
	c14 VARCHAR(370) NULL, 
	c15 VARCHAR(370) NULL, 
	c16 VARCHAR(370) NULL, 
	c17 VARCHAR(370) NULL, 
	c18 VARCHAR(370) NULL, 
	c19 VARCHAR(370) NULL, 
	c20 VARCHAR(370) NULL
);

-- CreateIndex binds=-
CREATE UNIQUE INDEX user_1_custid ON user_1 (custid);

-- insert_user_1 binds=custid,c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20
INSERT INTO user_1 (custid, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- DropTable binds=-
DROP TABLE user_1;

-- block_size binds=-
SELECT 8192;

-- blocks_used binds=tname
SELECT COUNT(*)
  FROM sys.tables AS t
 CROSS APPLY sys.dm_db_database_page_allocations(DB_ID(), t.object_id, 0, NULL, 'LIMITED') AS pa
 CROSS APPLY sys.dm_db_page_info(DB_ID(), pa.allocated_page_file_id, pa.allocated_page_page_id, 'LIMITED') AS pg
 WHERE t.name = ? AND t.schema_id = SCHEMA_ID()
   AND pa.is_allocated = 1 AND pg.page_type = 1 AND pg.slot_count > 0;

-- count_rows binds=-
SELECT COUNT(*) FROM user_1;

-- max_key binds=-
SELECT MAX(custid) FROM user_1;

-- max_rows_per_block binds=tname
SELECT MAX(pg.slot_count)
  FROM sys.tables AS t
 CROSS APPLY sys.dm_db_database_page_allocations(DB_ID(), t.object_id, 0, NULL, 'LIMITED') AS pa
 CROSS APPLY sys.dm_db_page_info(DB_ID(), pa.allocated_page_file_id, pa.allocated_page_page_id, 'LIMITED') AS pg
 WHERE t.name = ? AND t.schema_id = SCHEMA_ID()
   AND pa.is_allocated = 1 AND pg.page_type = 1;

-- read_point binds=s
SELECT COUNT(c1) FROM user_1 WHERE custid = ?;

-- read_range binds=s,e
SELECT COUNT(c1) FROM user_1 WHERE custid BETWEEN ? AND ?;

-- unique_index binds=tname,iname
SELECT COUNT(*)
  FROM sys.tables AS t
  JOIN sys.indexes AS i ON i.object_id = t.object_id
 WHERE t.name = ? AND t.schema_id = SCHEMA_ID() AND i.name = ? AND i.is_unique = 1;

-- update binds=v,s,e
UPDATE user_1 SET c1 = ? WHERE custid BETWEEN ? AND ?;
