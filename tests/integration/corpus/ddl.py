"""DDL as sources run it: comments, executable comments, charsets, session settings."""

from __future__ import annotations

from tests.integration.corpus.model import Case

DDL = [
    Case("ddl-comments", "ddl", ("c1", "c2"), work=(
        "CREATE TABLE /* a comment */ {s}.c1 (id INT PRIMARY KEY, -- line comment\n"
        "v VARCHAR(10) # hash comment\n) COMMENT 'plain'",
        "INSERT INTO {s}.c1 VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "ALTER TABLE {s}.c1 ADD COLUMN w INT /* new */ AFTER id",
        "INSERT INTO {s}.c1 VALUES (4, 40, 'd')",
        "UPDATE {s}.c1 SET w = 1 WHERE id = 1", "DELETE FROM {s}.c1 WHERE id = 2",
        "CREATE TABLE {s}.c0 (id INT PRIMARY KEY)", "RENAME TABLE {s}.c0 TO {s}.c2",
        "CREATE TABLE {s}.c3 (id INT PRIMARY KEY)", "DROP TABLE {s}.c3",
        "INSERT INTO {s}.c2 VALUES (1), (2)", "TRUNCATE TABLE {s}.c2",
        "INSERT INTO {s}.c2 VALUES (3)")),
    Case("ddl-executable-comment", "ddl", ("e1",), work=(
        "CREATE TABLE {s}.e1 (id INT PRIMARY KEY, v VARCHAR(10)) "
        "/*!100100 DEFAULT CHARSET=latin1 */",
        "INSERT INTO {s}.e1 VALUES (1, 'é'), (2, 'ÿ')", "UPDATE {s}.e1 SET v = 'ü' WHERE id = 2"),
    ),
    Case("ddl-database-charset", "ddl", ("d1",), work=(
        "CREATE TABLE {s}.d1 (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO {s}.d1 VALUES (1, 'é'), (2, 'ÿ')"), schema_options="CHARACTER SET latin1"),
    Case("ddl-alter-database", "ddl", ("ad1", "ad2"), work=(
        # the database's default changes between two CREATE TABLEs: each target table gets
        # the default its source table got (ALTER DATABASE replayed, in order)
        "CREATE TABLE {s}.ad1 (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO {s}.ad1 VALUES (1, 'é')",
        "ALTER DATABASE {s} CHARACTER SET latin1 COLLATE latin1_swedish_ci",
        "CREATE TABLE {s}.ad2 (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO {s}.ad2 VALUES (1, 'é')"),
        schema_options="CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"),
    Case("ddl-timestamp-default", "ddl", ("tsd",), work=(
        "SET time_zone = '+09:00'",
        "CREATE TABLE {s}.tsd (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL "
        "DEFAULT '2020-01-01 00:00:00')",
        "INSERT INTO {s}.tsd (id) VALUES (1)")),
    Case("ddl-client-charset", "ddl", ("cc1",), work=(
        # the statement's bytes are UTF-8 but the session says latin1: the source stores
        # 'Ã©' as the default, and so must the target (the text is not re-read as UTF-8)
        "SET NAMES latin1",
        "CREATE TABLE {s}.cc1 (id INT PRIMARY KEY, v VARCHAR(10) DEFAULT 'é', "
        "w VARCHAR(10) CHARACTER SET latin1 DEFAULT 'ü')",
        "SET NAMES utf8mb4",
        "INSERT INTO {s}.cc1 (id) VALUES (1)")),
    Case("ddl-foreign-key-checks-off", "ddl", ("fkc", "fkp"), work=(
        "SET foreign_key_checks = 0",  # a child made before its parent, as dumps do
        "CREATE TABLE {s}.fkc (id INT PRIMARY KEY, p INT, "
        "FOREIGN KEY (p) REFERENCES {s}.fkp (id))",
        "CREATE TABLE {s}.fkp (id INT PRIMARY KEY)",
        "SET foreign_key_checks = 1",
        "INSERT INTO {s}.fkp VALUES (1)", "INSERT INTO {s}.fkc VALUES (10, 1)")),
    Case("ddl-strings-with-comment-markers", "ddl", ("s1",), work=(
        "CREATE TABLE {s}.s1 (id INT PRIMARY KEY, a VARCHAR(20) DEFAULT '#1 # two', "
        "b VARCHAR(20) DEFAULT 'a -- b', c INT COMMENT 'x /* y */')",
        "INSERT INTO {s}.s1 (id) VALUES (1)", "INSERT INTO {s}.s1 VALUES (2, 'x', 'y', 3)"),
    ),
    Case("ddl-like-outside-table", "ddl-like", ("cust",), work=(
        "CREATE TABLE {s}.cust LIKE {o}.customers",
        "INSERT INTO {s}.cust VALUES (1, 'a')"),
        pauses="it copies (LIKE) or references a table this channel does not replicate",
        remedy=("CREATE TABLE {s}.cust (id INT PRIMARY KEY, name VARCHAR(20)) "
                "DEFAULT CHARSET=latin1",)),
    Case("ddl-ansi-quotes", "ddl-ansi", ("ansi_t",), work=(
        "SET sql_mode = 'ANSI_QUOTES'",
        "CREATE TABLE {s}.\"ansi_t\" (\"a b\" INT PRIMARY KEY, \"c\" VARCHAR(5) DEFAULT 'x')",
        "INSERT INTO {s}.\"ansi_t\" VALUES (1, 'y')")),
]
