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
)ENGINE=InnoDB CHARSET=latin1;

-- CreateIndex binds=-
CREATE INDEX slob_1_cf1_custid ON slob_1_cf1 (custid);

-- insert_slob_1_cf1 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20,pad
INSERT INTO slob_1_cf1 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, pad) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

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
)ENGINE=InnoDB CHARSET=latin1;

-- insert_slob_1_cf2 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20,pad
INSERT INTO slob_1_cf2 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, pad) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

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
)ENGINE=InnoDB CHARSET=latin1;

-- insert_slob_1_cf3 binds=custid,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20,pad
INSERT INTO slob_1_cf3 (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, pad) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s);

-- DropTable binds=-
DROP TABLE slob_1_cf3;

-- append binds=k,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,pad
INSERT INTO slob_1_cf3
       (custid, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17,
        c18, c19, c20, pad)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
        %s, %s);

-- blocks_used binds=tname
SELECT COALESCE(MAX(CAST(s.stat_value AS SIGNED)), 0)
  FROM mysql.innodb_index_stats AS s
 WHERE s.database_name = DATABASE() AND s.table_name = %s
   AND s.index_name IN ('GEN_CLUST_INDEX', 'PRIMARY') AND s.stat_name = 'n_leaf_pages';

-- count_rows binds=-
SELECT COUNT(*) FROM slob_1_cf1;

-- max_key binds=-
SELECT MAX(custid) FROM slob_1_cf1;

-- max_rows_per_block binds=tname
SELECT CAST(CEILING(COUNT(*) / COALESCE((
         SELECT MAX(s.stat_value)
           FROM mysql.innodb_index_stats AS s
          WHERE s.database_name = DATABASE() AND s.table_name = %s
            AND s.index_name IN ('GEN_CLUST_INDEX', 'PRIMARY') AND s.stat_name = 'n_leaf_pages'), 1)) AS SIGNED)
  FROM slob_1_cf1;

-- read binds=lo,hi
SELECT COUNT(c2) FROM slob_1_cf1 WHERE custid > %s AND custid < %s;

-- scan binds=-
SELECT COUNT(c2) FROM slob_1_cf2;

-- update_heavy binds=v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,v,lo,hi
UPDATE slob_1_cf1
   SET c2 = %s, c3 = %s, c4 = %s, c5 = %s, c6 = %s, c7 = %s, c8 = %s, c9 = %s, c10 = %s,
       c11 = %s, c12 = %s, c13 = %s, c14 = %s, c15 = %s, c16 = %s, c17 = %s, c18 = %s,
       c19 = %s, c20 = %s
 WHERE custid > %s AND custid < %s;

-- update_lite binds=v,v,lo,hi
UPDATE slob_1_cf1 SET c2 = %s, c20 = %s WHERE custid > %s AND custid < %s;

-- update_row binds=v,v,k
UPDATE slob_1_cf1 SET c2 = %s, c20 = %s WHERE custid = %s;
