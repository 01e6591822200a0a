"""Values at their edges: every type, charset, sql_mode and time zone."""

from __future__ import annotations

from tests.integration.corpus.model import Case, crud

VALUES = [
    Case("int-edges", "values", ("ints",), (
        "CREATE TABLE {s}.ints (id INT PRIMARY KEY, ti TINYINT, tiu TINYINT UNSIGNED, "
        "si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, "
        "iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, z INT(6) UNSIGNED ZEROFILL, b BOOL)",),
        crud("ints", [
            "(1,-128,0,-32768,0,-8388608,0,-2147483648,0,-9223372036854775808,0,0,0)",
            "(2,127,255,32767,65535,8388607,16777215,2147483647,4294967295,"
            "9223372036854775807,18446744073709551615,999999,1)",
            "(3,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL)",
            "(4,-1,1,-1,1,-1,1,-1,1,-1,1,42,-1)"],
            "bi = -9223372036854775807, biu = 18446744073709551614, ti = NULL")),
    Case("decimal-float", "values", ("nums",), (
        "CREATE TABLE {s}.nums (id INT PRIMARY KEY, d65 DECIMAL(65,30), d65i DECIMAL(65,0), "
        "d10 DECIMAL(10,10), du DECIMAL(5,2) UNSIGNED ZEROFILL, f FLOAT, d DOUBLE, "
        "f73 FLOAT(7,3), d2 DOUBLE(30,10))",),
        crud("nums", [
            "(1,'99999999999999999999999999999999999.999999999999999999999999999999',"
            "'99999999999999999999999999999999999999999999999999999999999999999',"
            "0.9999999999,999.99,3.40282e38,1.7976931348623157e308,9999.999,"
            "99999999999999999999.9999999999)",
            "(2,'-99999999999999999999999999999999999.999999999999999999999999999999',"
            "'-99999999999999999999999999999999999999999999999999999999999999999',"
            "-0.9999999999,0,-3.40282e38,-1.7976931348623157e308,-9999.999,-0.0000000001)",
            "(3,'0.000000000000000000000000000001',1,0.0000000001,0.01,1.17549e-38,"
            "2.2250738585072014e-308,0.001,1e-10)",
            "(4,0,0,0,0,1.401298e-45,4.9e-324,-0.0,-0.0)"],
            "f = f / 3, d = d / 3, d65 = d65 / 7")),
    Case("bits", "values", ("bits",), (
        "CREATE TABLE {s}.bits (id INT PRIMARY KEY, b1 BIT(1), b7 BIT(7), b8 BIT(8), "
        "b63 BIT(63), b64 BIT(64))",),
        crud("bits", ["(1,b'0',b'0',b'0',b'0',b'0')", "(2,b'1',b'1111111',b'11111111',"
                      f"b'{'1' * 63}',b'{'1' * 64}')", "(3,b'1',b'1010101',b'10000000',"
                      f"b'1{'0' * 62}',b'1{'0' * 63}')", "(4,NULL,NULL,NULL,NULL,NULL)"],
             "b64 = b64 >> 1, b7 = b'0101010'")),
    Case("time-edges", "values", ("times",), (
        "CREATE TABLE {s}.times (id INT PRIMARY KEY, t0 TIME, t6 TIME(6))",),
        crud("times", ["(1,'838:59:59','838:59:59.999999')", "(2,'-838:59:59','-838:59:59')",
                       "(3,'00:00:00','00:00:00.000000')", "(4,'-00:00:01','12:34:56.789012')",
                       "(5,'-12:34:56','-00:00:01.000000')"],
             "t0 = '-01:00:00', t6 = '23:59:59.5'")),
    Case("time-negative-fraction", "values", ("ntimes",), (
        "CREATE TABLE {s}.ntimes (id INT PRIMARY KEY, t1 TIME(1), t3 TIME(3), t6 TIME(6))",),
        crud("ntimes", ["(1,'-23:45:56.7','-733:00:00.001','-838:59:58.999999')",
                        "(2,'-00:00:00.5','-00:00:00.001','-00:00:00.000001')",
                        "(3,'-838:59:58.9','-12:00:00.999','-1:02:03.456789')",
                        "(4,'-1:00:00.1','-0:59:59.999','-00:00:59.5')"],
             "t6 = '-00:00:00.123456', t1 = '-100:00:00.5'")),
    Case("time-key", "values", ("tkeys",), (
        "CREATE TABLE {s}.tkeys (t TIME(3) PRIMARY KEY, v INT)",), (
        "INSERT INTO {s}.tkeys VALUES ('-00:00:01.500', 1), ('-10:00:00.250', 2), "
        "('10:00:00.250', 3)",
        "UPDATE {s}.tkeys SET v = 10 WHERE t = '-00:00:01.500'",
        "UPDATE {s}.tkeys SET t = '-20:00:00.750' WHERE t = '-10:00:00.250'",
        "DELETE FROM {s}.tkeys WHERE t = '10:00:00.250'")),
    Case("date-edges", "values", ("dates",), (
        "CREATE TABLE {s}.dates (id INT PRIMARY KEY, d DATE, dt DATETIME, dt6 DATETIME(6), "
        "y YEAR, ts TIMESTAMP(6) NULL)",),
        ("SET time_zone = '+00:00'", *crud("dates", [
            "(1,'1000-01-01','1000-01-01 00:00:00','1000-01-01 00:00:00.000000',1901,"
            "'1970-01-01 00:00:01.000000')",
            "(2,'9999-12-31','9999-12-31 23:59:59','9999-12-31 23:59:59.999999',2155,"
            "'2038-01-19 03:14:07.999999')",
            "(3,'0000-00-00','0000-00-00 00:00:00','0000-00-00 00:00:00.000000',0,"
            "'0000-00-00 00:00:00')",
            "(4,NULL,NULL,NULL,NULL,NULL)"],
            "d = '2024-02-29', dt6 = '2024-02-29 12:00:00.000001', y = 2000"))),
    Case("zero-in-date", "values", ("zdates",), (
        "CREATE TABLE {s}.zdates (id INT PRIMARY KEY, d DATE, dt DATETIME, dt3 DATETIME(3))",),
        crud("zdates", ["(1,'0001-00-00','0000-00-00 14:02:10','2020-00-15 01:02:03.456')",
                        "(2,'2020-00-00','2020-05-00 23:59:59','0000-00-00 00:00:00.001')",
                        "(3,'2020-05-00','0000-01-01 00:00:00','0000-00-01 00:00:00.000')",
                        "(4,'0000-00-00','0000-00-00 00:00:00','0000-00-00 00:00:00.000')"],
             "d = '0000-12-00', dt = '0000-00-00 23:59:59'")),
    Case("timestamp-zones", "values", ("stamps",), (
        "CREATE TABLE {s}.stamps (id INT PRIMARY KEY, ts TIMESTAMP(6) NULL, "
        "ts0 TIMESTAMP NULL DEFAULT NULL, up TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP "
        "ON UPDATE CURRENT_TIMESTAMP, v INT)",),
        ("SET time_zone = '+09:00'",
         "INSERT INTO {s}.stamps VALUES (1,'2021-03-28 02:30:00.123456','1970-01-01 09:00:01',"
         "'2000-01-01 09:00:00',1), (2,'2038-01-19 12:14:07.999999',NULL,"
         "'2021-10-31 02:30:00',2), (3,NOW(6),NOW(),DEFAULT,3), (4,NULL,NULL,NOW(),4)",
         "SET time_zone = '-05:00'",
         "UPDATE {s}.stamps SET v = 10 WHERE id = 1",
         "UPDATE {s}.stamps SET id = 20, ts = '2001-01-01 00:00:00.5' WHERE id = 2",
         "DELETE FROM {s}.stamps WHERE id = 3")),
    Case("strings-utf8mb4", "values", ("texts",), (
        "CREATE TABLE {s}.texts (id INT PRIMARY KEY, c CHAR(10), v VARCHAR(100), t TEXT, "
        "tt TINYTEXT, vb VARBINARY(20)) DEFAULT CHARSET=utf8mb4",),
        crud("texts", [
            "(1,'𝄞😀','𝄞 emoji 😀 中文 ünï','tab\\there\\nnew line','x',x'00FF')",
            "(2,'trail  ','trail  ','  lead','',x'')",
            "(3,'','','','',NULL)",
            "(4,'q''\"\\\\','quote'' \"dq\" back\\\\slash','nul\\0byte','\\Z',x'5C27')"],
            "v = CONCAT(v, '✓'), c = 'é'")),
    Case("charsets", "values", ("charsets",), (
        "CREATE TABLE {s}.charsets (id INT PRIMARY KEY, l VARCHAR(20), "
        "u3 VARCHAR(20) CHARACTER SET utf8mb3, u4 VARCHAR(20) CHARACTER SET utf8mb4, "
        "a VARCHAR(20) CHARACTER SET ascii, b VARCHAR(20) CHARACTER SET binary, "
        "g VARCHAR(20) CHARACTER SET gbk, uc VARCHAR(20) CHARACTER SET ucs2, "
        "c1251 VARCHAR(20) CHARACTER SET cp1251) DEFAULT CHARSET=latin1",),
        crud("charsets", [
            "(1,'é€ÿ','é中','😀中','abc',x'00FF80','中文','é中','Привет')",
            "(2,'','','','','','','','')",
            "(3,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL)",
            "(4,'Ææ×÷','ü','𝄞','~',x'C3A9','汉字','€','ёЁ')"],
            "l = 'ÿé', uc = 'ü中', b = x'FF'")),
    Case("enum-set", "values", ("enums",), (
        "CREATE TABLE {s}.enums (id INT PRIMARY KEY, e ENUM('a','b','c'), "
        "s SET('x','y','z'), e2 ENUM('é','中','😀') CHARACTER SET utf8mb4, "
        "s2 SET('a b','c-d','') )",),
        crud("enums", [
            "(1,'a','z,x','é','a b,c-d')", "(2,'c','','中','')", "(3,NULL,NULL,NULL,NULL)",
            "(4,'b','x,y,z','😀','c-d')"], "s = 'y', e = 'b', e2 = '😀'")),
    Case("enum-invalid-value", "enum-invalid", ("badenums",), (
        "CREATE TABLE {s}.badenums (id INT PRIMARY KEY, e ENUM('a','b'), v INT)",),
        ("SET sql_mode = ''", *crud("badenums", ["(1,'bogus',1)", "(2,'a',2)", "(3,'',3)",
                                                 "(4,'nope',4)"], "v = 10, e = 'zz'")),
    ),
    Case("enum-set-latin1-members", "values", ("lenums",), (
        "CREATE TABLE {s}.lenums (id INT PRIMARY KEY, e ENUM('é','ü','a') CHARACTER SET latin1, "
        "s SET('ä','ö','x') CHARACTER SET latin1)",),
        crud("lenums", ["(1,'é','ä,x')", "(2,'ü','ö')", "(3,'a','')", "(4,NULL,'ä,ö')"],
             "e = 'ü', s = 'x'")),
    Case("enum-key", "values", ("ekeys",), (
        "CREATE TABLE {s}.ekeys (e ENUM('a','b','c','d') PRIMARY KEY, v INT)",), (
        "INSERT INTO {s}.ekeys VALUES ('a', 1), ('b', 2), ('c', 3)",
        "UPDATE {s}.ekeys SET v = 10 WHERE e = 'a'",
        "UPDATE {s}.ekeys SET e = 'd' WHERE e = 'b'",
        "DELETE FROM {s}.ekeys WHERE e = 'c'")),
    Case("json", "values", ("docs",), (
        "CREATE TABLE {s}.docs (id INT PRIMARY KEY, j JSON, t LONGTEXT)",),
        crud("docs", [
            "(1,'{\"a\":  1, \"b\": [1, 2.50, null, \"ü\\\\u00e9\"]}','{}')",
            "(2,'[]','[1,2]')", "(3,'\"s\"',NULL)",
            "(4,'{\"big\": 123456789012345678901234567890, \"f\": 1.0E+2}','null')"],
            "j = JSON_SET(j, '$.c', 'x'), t = 'plain'")),
    Case("spatial", "values", ("shapes",), (
        "CREATE TABLE {s}.shapes (id INT PRIMARY KEY, g GEOMETRY, p POINT NOT NULL, "
        "l LINESTRING, pg POLYGON, gc GEOMETRYCOLLECTION, SPATIAL INDEX (p))",),
        crud("shapes", [
            "(1,ST_GeomFromText('POINT(1 2)'),POINT(1.5,-2),"
            "ST_GeomFromText('LINESTRING(0 0,1 1,2 0)'),"
            "ST_GeomFromText('POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,2 1,2 2,1 1))'),"
            "ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))'))",
            "(2,ST_GeomFromText('POINT(1 2)', 4326),POINT(-180,90),NULL,NULL,NULL)",
            "(3,NULL,POINT(0,0),NULL,NULL,NULL)",
            "(4,ST_GeomFromText('MULTIPOLYGON(((0 0,1 0,1 1,0 0)))'),POINT(1e300,-1e-300),"
            "NULL,NULL,NULL)"], "p = POINT(3,4), g = NULL")),
    Case("blobs", "values", ("blobs",), (
        "CREATE TABLE {s}.blobs (id INT PRIMARY KEY, tb TINYBLOB, b BLOB, mb MEDIUMBLOB, "
        "lt LONGTEXT)",),
        crud("blobs", [
            "(1,x'" + "".join(f"{i:02X}" for i in range(255)) + "',"
            "REPEAT(x'00FF27225C0D0A1A', 8191),REPEAT(x'00', 1048576),REPEAT('é', 300000))",
            "(2,x'',x'',x'','')", "(3,NULL,NULL,NULL,NULL)",
            "(4,x'00',REPEAT(x'7F', 65535),REPEAT(x'FE01', 600000),REPEAT('😀', 100000))"],
            "b = REVERSE(b), mb = CONCAT(mb, x'FF')")),
    Case("auto-increment-zero", "values", ("autos",), (
        "CREATE TABLE {s}.autos (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10))",),
        ("SET sql_mode = 'NO_AUTO_VALUE_ON_ZERO'",
         "INSERT INTO {s}.autos VALUES (0, 'zero'), (5, 'five')",
         "INSERT INTO {s}.autos (v) VALUES ('auto')",
         "UPDATE {s}.autos SET v = 'zero!' WHERE id = 0",
         "UPDATE {s}.autos SET id = 7 WHERE id = 5",
         "INSERT INTO {s}.autos VALUES (0, 'again') ON DUPLICATE KEY UPDATE v = 'dup'"),
    ),
    Case("sql-mode-lenient", "values", ("lenient",), (
        "CREATE TABLE {s}.lenient (id INT PRIMARY KEY, v VARCHAR(3), s SET('a','b'), "
        "i TINYINT, d DATE, u INT UNSIGNED)",),
        ("SET sql_mode = ''",
         "INSERT INTO {s}.lenient VALUES (1,'toolong','a,zz',300,'2021-13-45',-5), "
         "(2,'ok','a',-300,'2021-02-29',1), (3,'x','b',1,'0000-00-00',2)",
         "UPDATE {s}.lenient SET v = 'again too long', i = i * 1000 WHERE id = 1",
         "UPDATE {s}.lenient SET id = 20, s = 'nope' WHERE id = 2",
         "DELETE FROM {s}.lenient WHERE id = 3")),
    Case("sql-mode-quoting", "values", ("quoting",), (
        "CREATE TABLE {s}.quoting (id INT PRIMARY KEY, v VARCHAR(40))",),
        ("SET sql_mode = 'NO_BACKSLASH_ESCAPES'",
         "INSERT INTO {s}.quoting VALUES (1, 'a\\nb\\'), (2, 'it''s'), (3, '\\\\')",
         "SET sql_mode = 'ANSI'",
         "UPDATE {s}.quoting SET v = 'pipes' || ' concat' WHERE id = 1",
         "UPDATE {s}.quoting SET \"id\" = 20 WHERE \"id\" = 2",
         "SET sql_mode = 'ORACLE'",
         "DELETE FROM {s}.quoting WHERE id = 3")),
    Case("partitioned", "values", ("parts", "hashed"), (
        "CREATE TABLE {s}.parts (id INT, region INT, v VARCHAR(10), PRIMARY KEY (id, region)) "
        "PARTITION BY RANGE (region) (PARTITION p0 VALUES LESS THAN (10), "
        "PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN MAXVALUE)",
        "CREATE TABLE {s}.hashed (id INT PRIMARY KEY, v VARCHAR(10)) "
        "PARTITION BY HASH (id) PARTITIONS 4"), (
        "INSERT INTO {s}.parts VALUES (1,5,'a'),(2,15,'b'),(3,25,'c'),(4,5,'d')",
        "UPDATE {s}.parts SET region = 15 WHERE id = 1",
        "UPDATE {s}.parts SET v = 'B' WHERE id = 2",
        "DELETE FROM {s}.parts WHERE id = 3",
        *crud("hashed", ["(1,'a')", "(2,'b')", "(3,'c')", "(4,'d')"], "v = 'A'"))),
    Case("sequence-of-values", "values", ("many",), (
        "CREATE TABLE {s}.many (id INT PRIMARY KEY, i BIGINT, u BIGINT UNSIGNED, "
        "d DECIMAL(30,10), f FLOAT, g DOUBLE, dt DATETIME(6), tm TIME(6), ts TIMESTAMP(6) NULL, "
        "s VARCHAR(40), l VARCHAR(40) CHARACTER SET latin1, b VARBINARY(40), bt BIT(64), "
        "e ENUM('a','b','c'), st SET('x','y','z'))",), (
        "SET time_zone = '+00:00'",
        # a thousand rows of values spread over each type's range (MariaDB's sequence engine)
        "INSERT INTO {s}.many SELECT n, n * 1000000007 * IF(n % 2, -1, 1), "
        "CAST(n AS UNSIGNED) * 18446744073709551, n * 12345.6789012345 * IF(n % 3, 1, -1), "
        "RAND(n) * 1e30 - 5e29, (RAND(n + 1) - 0.5) * POW(10, n % 600 - 300), "
        "TIMESTAMP('1000-01-01') + INTERVAL n * 3137 DAY + INTERVAL n * 7919 MICROSECOND, "
        "SEC_TO_TIME((n * 104729) % 6040798 - 3020399 + (n % 999999) / 1000000), "
        "FROM_UNIXTIME(1 + n * 2147483) + INTERVAL n MICROSECOND, "
        "CONCAT(CONVERT(CHAR(19968 + n USING ucs2) USING utf8mb4), "
        "CONVERT(CHAR(128512 + n % 80 USING utf32) USING utf8mb4), n), "
        "CONVERT(CONCAT(CHAR(n % 256 USING latin1), CHAR((n * 7) % 256 USING latin1)) "
        "USING latin1), LEFT(UNHEX(SHA2(n, 256)), n % 40), "
        "CAST(n AS UNSIGNED) * 18446744073709551, ELT(1 + n % 3, 'a', 'b', 'c'), n % 8 "
        "FROM (SELECT CAST(seq AS SIGNED) AS n FROM {s}.seq_1_to_1000) AS q",
        "UPDATE {s}.many SET f = f / 3, tm = SEC_TO_TIME(-TIME_TO_SEC(tm)), l = REVERSE(l) "
        "WHERE id % 5 = 0",
        "UPDATE {s}.many SET id = id + 10000 WHERE id % 7 = 0",
        "DELETE FROM {s}.many WHERE id % 11 = 0")),
    Case("key-collation-and-types", "values", ("cikeys", "mixkeys"), (
        "CREATE TABLE {s}.cikeys (k VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)",
        "CREATE TABLE {s}.mixkeys (d DECIMAL(20,10), dt DATETIME(6), b BINARY(4), "
        "f DOUBLE, v INT, PRIMARY KEY (d, dt, b, f))"), (
        "INSERT INTO {s}.cikeys VALUES ('a',1),('B',2),('c ',3),('d',4)",
        "UPDATE {s}.cikeys SET k = 'A' WHERE k = 'a'",
        "UPDATE {s}.cikeys SET k = 'b' WHERE k = 'B'",
        "DELETE FROM {s}.cikeys WHERE k = 'C'",
        "BEGIN", "DELETE FROM {s}.cikeys WHERE k = 'd'", "INSERT INTO {s}.cikeys VALUES ('D',5)",
        "COMMIT",
        "INSERT INTO {s}.mixkeys VALUES (-0.0000000001,'2020-01-01 00:00:00.000001',x'00',0.1,1),"
        "(1.5,'9999-12-31 23:59:59.999999',x'FFFFFFFF',-1e308,2),(0,'1000-01-01',x'0100',0,3)",
        "UPDATE {s}.mixkeys SET v = 10 WHERE d < 0",
        "UPDATE {s}.mixkeys SET f = 2.5, b = x'01' WHERE v = 2",
        "DELETE FROM {s}.mixkeys WHERE v = 3")),
]

DECODING = [
    Case("dates-invalid", "values", ("idates",), (
        "CREATE TABLE {s}.idates (id INT PRIMARY KEY, d DATE, dt DATETIME(6))",),
        ("SET sql_mode = 'ALLOW_INVALID_DATES'", *crud("idates", [
            "(1,'2021-02-31','2021-04-31 10:00:00.5')", "(2,'2021-02-30','2021-02-29 00:00:00')",
            "(3,'2020-02-30','2020-06-31 23:59:59.999999')", "(4,'2021-11-31',NULL)"],
            "d = '2021-09-31'")),
    ),
    Case("latin1-every-byte", "values", ("bytes1",), (
        "CREATE TABLE {s}.bytes1 (id INT PRIMARY KEY, l VARCHAR(300) CHARACTER SET latin1, "
        "c CHAR(1) CHARACTER SET latin1)",),
        crud("bytes1", [
            "(1,CONVERT(x'" + "".join(f"{i:02X}" for i in range(1, 256)) + "' USING latin1),"
            "CONVERT(x'81' USING latin1))",
            "(2,CONVERT(x'80818D8F909D' USING latin1),CONVERT(x'9D' USING latin1))",
            "(3,'é',CONVERT(x'00' USING latin1))", "(4,'',CONVERT(x'FF' USING latin1))"],
            "l = CONCAT(l, CONVERT(x'8D' USING latin1))"),
    ),
    Case("utf16-utf32", "values", ("wide",), (
        "CREATE TABLE {s}.wide (id INT PRIMARY KEY, u16 VARCHAR(10) CHARACTER SET utf16, "
        "u16le VARCHAR(10) CHARACTER SET utf16le, u32 VARCHAR(10) CHARACTER SET utf32)",),
        crud("wide", ["(1,'é中😀','é中😀','é中😀')", "(2,'a','b','c')", "(3,'','','')",
                      "(4,NULL,NULL,NULL)"], "u16 = 'ü', u32 = '𝄞'"),
    ),
    Case("set-key", "values", ("skeys",), (
        "CREATE TABLE {s}.skeys (s SET('x','y','z') NOT NULL PRIMARY KEY, v INT)",), (
        "INSERT INTO {s}.skeys VALUES ('x', 1), ('x,y', 2), ('', 3), ('z', 4)",
        "UPDATE {s}.skeys SET v = 10 WHERE s = 'x'",
        "UPDATE {s}.skeys SET s = 'y,z' WHERE s = 'x,y'",
        "DELETE FROM {s}.skeys WHERE s = 'z'"),
    ),
    Case("blob-16mb", "big-blob", ("big",), (
        "CREATE TABLE {s}.big (id INT PRIMARY KEY, b LONGBLOB)",), (
        "INSERT INTO {s}.big VALUES (1, REPEAT(x'00FF5C27', 4194304))",
        "UPDATE {s}.big SET b = CONCAT(x'01', SUBSTRING(b, 2)) WHERE id = 1",
        "INSERT INTO {s}.big VALUES (2, REPEAT(x'41', 4194305)), (3, x'42')")),
]
