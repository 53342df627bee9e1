-- CreateTable binds=-
CREATE TABLE dbsim_registry (
	name VARCHAR(128) NOT NULL, 
	workload VARCHAR(32) NOT NULL, 
	fingerprint TEXT NOT NULL, 
	PRIMARY KEY (name)
) COMMENT = 'dbsim:00000000000000000000000000000000';

-- object_identity binds=tname
SELECT CONCAT(CASE t.TABLE_TYPE WHEN 'BASE TABLE' THEN 'table' ELSE LOWER(t.TABLE_TYPE) END,
              '|', COALESCE(t.ENGINE, ''), '||', COALESCE(t.TABLE_COMMENT, ''))
  FROM information_schema.TABLES AS t
 WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = %s;

-- registry_delete binds=name
DELETE FROM dbsim_registry WHERE name = %s;

-- registry_get binds=name
SELECT fingerprint FROM dbsim_registry WHERE name = %s;

-- registry_names binds=workload,pattern
SELECT name FROM dbsim_registry WHERE workload = %s AND name LIKE %s;

-- registry_others binds=owner
SELECT COUNT(*) FROM dbsim_registry WHERE workload <> %s;

-- registry_put binds=name,workload,fingerprint
INSERT INTO dbsim_registry (name, workload, fingerprint) VALUES (%s, %s, %s);

-- registry_set binds=fingerprint,name
UPDATE dbsim_registry SET fingerprint = %s WHERE name = %s;

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
INSERT INTO user_1 (custid, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- DropTable binds=-
DROP TABLE user_1;

-- block_size binds=-
SELECT CAST(@@innodb_page_size AS SIGNED);

-- blocks_used binds=tname,iname
SELECT COALESCE(MAX(CAST(s.stat_value AS SIGNED)), 0)
  FROM mysql.innodb_index_stats AS s
 WHERE s.database_name = DATABASE() AND s.table_name = %s
   AND s.index_name IN ('GEN_CLUST_INDEX', 'PRIMARY', %s) AND s.stat_name = 'n_leaf_pages';

-- count_rows binds=-
SELECT COUNT(*) FROM user_1;

-- max_key binds=-
SELECT MAX(custid) FROM user_1;

-- max_rows_per_block binds=tname,iname
SELECT CAST(CEILING(COUNT(*) / COALESCE((
         SELECT MAX(s.stat_value)
           FROM mysql.innodb_index_stats AS s
          WHERE s.database_name = DATABASE() AND s.table_name = %s
            AND s.index_name IN ('GEN_CLUST_INDEX', 'PRIMARY', %s) AND s.stat_name = 'n_leaf_pages'), 1)) AS SIGNED)
  FROM user_1;

-- read_point binds=s
SELECT COUNT(c1) FROM user_1 WHERE custid = %s;

-- read_range binds=s,e
SELECT COUNT(c1) FROM user_1 WHERE custid BETWEEN %s AND %s;

-- unique_index binds=tname,iname
SELECT COUNT(DISTINCT s.INDEX_NAME)
  FROM information_schema.STATISTICS AS s
 WHERE s.TABLE_SCHEMA = DATABASE() AND s.TABLE_NAME = %s AND s.INDEX_NAME = %s
   AND s.NON_UNIQUE = 0;

-- update binds=v,s,e
UPDATE user_1 SET c1 = %s WHERE custid BETWEEN %s AND %s;
