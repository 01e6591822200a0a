"""Table shapes: odd names, keyless tables, generated columns, foreign keys."""

from __future__ import annotations

from tests.integration.corpus.model import Case, crud

NAMES = [
    Case("name-hyphen-dot", "values", ("orders-2024.v1",), (
        "CREATE TABLE {s}.`orders-2024.v1` (`a-b` INT PRIMARY KEY, `c.d` VARCHAR(10))",),
        crud("`orders-2024.v1`", ["(1,'a')", "(2,'b')", "(3,'c')"], "`c.d` = 'x'", "`a-b`"),
        schema="topic-name.sanitization-it"),
    Case("name-space-pipe-at", "values", ("my table|x@y",), (
        "CREATE TABLE {s}.`my table|x@y` (`first name` INT PRIMARY KEY, `a|b` INT, "
        "`a@b` VARCHAR(5))",),
        crud("`my table|x@y`", ["(1,1,'a')", "(2,2,'b')", "(3,3,'c')"], "`a|b` = 10, `a@b` = 'z'",
             "`first name`"), schema=" my db|x@y"),
    Case("name-backtick", "values", ("back`tick",), (
        "CREATE TABLE {s}.`back``tick` (`col``umn` INT PRIMARY KEY, ```v` VARCHAR(5))",),
        crud("`back``tick`", ["(1,'a')", "(2,'b')", "(3,'c')"], "```v` = 'z'", "`col``umn`"),
        schema="tick`db"),
    Case("name-unicode", "values", ("表", "naïve"), (
        "CREATE TABLE {s}.`表` (`dbz5743中文` INT PRIMARY KEY, `naïve` VARCHAR(5))",
        "CREATE TABLE {s}.naïve (id INT PRIMARY KEY, `列` VARCHAR(5))"),
        (*crud("`表`", ["(1,'a')", "(2,'b')", "(3,'c')"], "`naïve` = 'ü'", "`dbz5743中文`"),
         *crud("naïve", ["(1,'a')", "(2,'b')", "(3,'c')"], "`列` = '中'")),
        schema="dbz5743中文_naïve"),
    Case("name-keywords-numbers", "values", ("select", "1e10", "$t"), (
        "CREATE TABLE {s}.`select` (`from` INT PRIMARY KEY, `order` INT, `key` VARCHAR(3))",
        "CREATE TABLE {s}.`1e10` (`123` INT PRIMARY KEY, `1e1` INT)",
        "CREATE TABLE {s}.`$t` (`$` INT PRIMARY KEY, `_` INT)"),
        (*crud("`select`", ["(1,1,'a')", "(2,2,'b')", "(3,3,'c')"], "`order` = 9", "`from`"),
         *crud("`1e10`", ["(1,1)", "(2,2)", "(3,3)"], "`1e1` = 9", "`123`"),
         *crud("`$t`", ["(1,1)", "(2,2)", "(3,3)"], "`_` = 9", "`$`")),
        schema="keywords"),
    Case("name-brackets-prefix", "values", ("t[1]", "re:t"), (
        "CREATE TABLE {s}.`t[1]` (id INT PRIMARY KEY, v VARCHAR(5))",
        "CREATE TABLE {s}.`re:t` (id INT PRIMARY KEY, `[x]` VARCHAR(5))"),
        (*crud("`t[1]`", ["(1,'a')", "(2,'b')", "(3,'c')"], "v = 'z'"),
         *crud("`re:t`", ["(1,'a')", "(2,'b')", "(3,'c')"], "`[x]` = 'z'")),
        schema="x.[0-1]"),
    # a % or braces in a name is no placeholder: `t%%x` is not `t%x`
    Case("name-percent", "values", ("t%x", "t%%x", "%s", "{}", "k%"), (
        "CREATE TABLE {s}.`t%x` (id INT PRIMARY KEY, `100%` VARCHAR(5))",
        "CREATE TABLE {s}.`t%%x` (id INT PRIMARY KEY, `%s` VARCHAR(5))",
        "CREATE TABLE {s}.`%s` (`%(id)s` INT PRIMARY KEY, `{}` VARCHAR(5), `{0}` INT)",
        "CREATE TABLE {s}.`{}` (id INT PRIMARY KEY, `%%` VARCHAR(5))",
        "CREATE TABLE {s}.`k%` (`a%` INT, `b%s` VARCHAR(5))"),
        (*crud("`t%x`", ["(1,'a')", "(2,'b')", "(3,'c')"], "`100%` = '%z'"),
         *crud("`t%%x`", ["(1,'d')", "(2,'e')", "(3,'f')"], "`%s` = '%s'"),
         *crud("`%s`", ["(1,'a',1)", "(2,'b',2)", "(3,'c',3)"], "`{}` = '{}', `{0}` = 9",
               "`%(id)s`"),
         *crud("`{}`", ["(1,'a')", "(2,'b')", "(3,'c')"], "`%%` = '%%'"),
         "INSERT INTO {s}.`k%` VALUES (1,'%'), (1,'%'), (2,'%s'), (NULL,NULL)",
         "UPDATE {s}.`k%` SET `b%s` = '%%' WHERE `a%` = 1 LIMIT 1",
         "DELETE FROM {s}.`k%` WHERE `a%` = 2 LIMIT 1"),
        schema="p%s{}"),
]

_DUPS = ("CREATE TABLE {s}.{t} (a INT, b VARCHAR(10), l VARCHAR(10) CHARACTER SET latin1, "
         "f FLOAT, d DOUBLE, bt BIT(3), j JSON, ts TIMESTAMP(3) NULL, dt DATE, tm TIME(2), "
         "g POINT NULL, e ENUM('x','y'), KEY (a))")
_ROW = ("(1,'x','a',0.1,0.1,b'101','{}','2020-01-01 00:00:00.5','0001-00-00','-00:00:01.5',"
        "POINT(1,2),'x')")
_NULLS = "(NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL)"


def _keyless_work(t: str) -> tuple[str, ...]:
    """Duplicates, NULLs, values that only an exact match tells apart ('a', 'A', 'a '; a FLOAT
    0.1), changed one at a time (LIMIT 1) and several in one transaction, with savepoints
    rolled back to and released inside it."""
    table = f"{{s}}.{t}"
    return (
        "SET time_zone = '+00:00'",
        f"INSERT INTO {table} VALUES {_ROW}, {_ROW}, {_ROW}, {_NULLS}, {_NULLS}, "
        "(2,'y','A',1.5,1e-300,b'0','[1, 2]',NULL,'2020-00-00','838:59:59.99',NULL,'y'), "
        "(2,'y','a ',1.5,1e-300,b'0','[1, 2]',NULL,'2020-00-00','838:59:59.99',NULL,'y'), "
        "(3,'z','ä',3.3,3.3,b'111','{\"k\": 1}',NULL,NULL,NULL,POINT(0,0),NULL)",
        f"UPDATE {table} SET b = 'one' WHERE a = 1 LIMIT 1",
        f"UPDATE {table} SET a = 10 WHERE a IS NULL LIMIT 1",
        f"DELETE FROM {table} WHERE a = 1 AND b = 'x' LIMIT 1",
        f"UPDATE {table} SET f = f * 2, l = 'b' WHERE a = 2 AND l = BINARY 'a '",
        f"DELETE FROM {table} WHERE a = 2 AND l = BINARY 'A'",
        f"DELETE FROM {table} WHERE a = 3",
        "BEGIN",  # with savepoints (an ORM's nested transactions): what survived arrives
        f"INSERT INTO {table} VALUES {_NULLS}",
        "SAVEPOINT before_update",
        f"UPDATE {table} SET b = 'undone' WHERE a IS NULL LIMIT 1",
        "ROLLBACK TO SAVEPOINT before_update",
        f"UPDATE {table} SET b = 'null' WHERE a IS NULL LIMIT 1",
        "SAVEPOINT kept",
        f"DELETE FROM {table} WHERE b = 'null'",
        "RELEASE SAVEPOINT kept",
        f"UPDATE {table} SET e = 'y', tm = '-00:00:00.01' WHERE a = 1",
        "COMMIT")


KEYLESS = [
    Case("keyless-duplicates-nulls", "values", ("dups",), (_DUPS.format(s="{s}", t="dups"),),
         _keyless_work("dups")),
    Case("keyless-nullable-unique", "values", ("nulluniq",), (
        "CREATE TABLE {s}.nulluniq (a INT NULL, b INT, UNIQUE KEY (a))",), (
        "INSERT INTO {s}.nulluniq VALUES (NULL, 1), (NULL, 1), (1, 2), (2, 3)",
        "UPDATE {s}.nulluniq SET b = 5 WHERE a IS NULL LIMIT 1",
        "UPDATE {s}.nulluniq SET a = 3 WHERE a = 1",
        "DELETE FROM {s}.nulluniq WHERE a IS NULL AND b = 1")),
    Case("key-columns-duplicates-nulls", "values", ("kdups",),
         (_DUPS.format(s="{s}", t="kdups"),), _keyless_work("kdups"),
         pair_options={"key_columns": ["a"]}),
]

GENERATED = [
    Case("generated-columns", "values", ("gen",), (
        "CREATE TABLE {s}.gen (id INT PRIMARY KEY, price DECIMAL(10,2), qty INT, "
        "total_v DECIMAL(12,2) AS (price * qty) VIRTUAL, "
        "total_p DECIMAL(12,2) AS (price * qty) PERSISTENT, name VARCHAR(20), "
        "upper_v VARCHAR(20) AS (UPPER(name)) VIRTUAL, KEY (upper_v), UNIQUE KEY (id, total_p))",),
        ("INSERT INTO {s}.gen (id, price, qty, name) VALUES (1, 1.50, 2, 'a'), "
         "(2, 2.00, 3, 'b'), (3, NULL, 1, NULL), (4, 9.99, 0, 'ü')",
         "UPDATE {s}.gen SET qty = 10 WHERE id = 1",
         "UPDATE {s}.gen SET id = 20, name = 'moved' WHERE id = 2",
         "DELETE FROM {s}.gen WHERE id = 3")),
]

FOREIGN_KEYS = [
    Case("foreign-key-cascades", "values", ("parent", "child"), (
        "CREATE TABLE {s}.parent (id INT PRIMARY KEY, v VARCHAR(5))",
        "CREATE TABLE {s}.child (id INT PRIMARY KEY, parent_id INT, v VARCHAR(5), "
        "FOREIGN KEY (parent_id) REFERENCES {s}.parent (id) ON DELETE CASCADE "
        "ON UPDATE CASCADE)"), (
        "INSERT INTO {s}.parent VALUES (1, 'p1'), (2, 'p2')",
        "INSERT INTO {s}.child VALUES (10, 1, 'c10'), (20, 2, 'c20')",
        "BEGIN", "INSERT INTO {s}.child VALUES (11, 1, 'c11')",
        "SAVEPOINT nested", "INSERT INTO {s}.parent VALUES (5, 'gone')",
        "ROLLBACK TO SAVEPOINT nested",  # the parent 5 was never there
        "INSERT INTO {s}.parent VALUES (3, 'p3')", "INSERT INTO {s}.child VALUES (30, 3, 'c30')",
        "COMMIT",
        "DELETE FROM {s}.parent WHERE id = 2",  # child 20 goes by cascade, not in the binlog
        "UPDATE {s}.parent SET id = 100 WHERE id = 1",  # children follow by cascade
        "BEGIN", "INSERT INTO {s}.parent VALUES (4, 'p4')",
        "INSERT INTO {s}.child VALUES (40, 4, 'c40')", "DELETE FROM {s}.parent WHERE id = 4",
        "COMMIT",
        "BEGIN", "DELETE FROM {s}.child WHERE id = 30", "DELETE FROM {s}.parent WHERE id = 3",
        "COMMIT")),
    Case("foreign-key-self-and-set-null", "values", ("tree", "tagged"), (
        "CREATE TABLE {s}.tree (id INT PRIMARY KEY, up INT, FOREIGN KEY (up) REFERENCES "
        "{s}.tree (id) ON DELETE CASCADE)",
        "CREATE TABLE {s}.tagged (id INT PRIMARY KEY, node INT, FOREIGN KEY (node) REFERENCES "
        "{s}.tree (id) ON DELETE SET NULL ON UPDATE CASCADE)"), (
        "BEGIN", "INSERT INTO {s}.tree VALUES (1, NULL), (2, 1), (3, 2), (4, 1)",
        "INSERT INTO {s}.tagged VALUES (1, 3), (2, 4)", "COMMIT",
        "UPDATE {s}.tree SET id = 30 WHERE id = 3",  # tagged 1 follows to 30
        "DELETE FROM {s}.tree WHERE id = 4",  # tagged 2 gets NULL
        "BEGIN", "INSERT INTO {s}.tree VALUES (5, 30)", "DELETE FROM {s}.tree WHERE id = 2",
        "COMMIT")),  # 30 and 5 go by cascade, tagged 1 gets NULL
]
