"""Names as MySQL/MariaDB allow them: one quoting function, the ``schema.table`` short form
with backticks, and pairs naming any legal table."""

from __future__ import annotations

import pytest

from shared import identifiers
from shared.endpoint import Cursor
from shared.errors import ConfigError
from shared.identifiers import condition, qualified, quote, template
from shared.patterns import PatternKind
from tests.unit.yaml_cases import load, pairs


@pytest.mark.parametrize(("name", "quoted"), [
    ("orders", "`orders`"), ("back`tick", "`back``tick`"), ("``", "``````"), ("表", "`表`")])
def test_quote_doubles_backticks(name: str, quoted: str) -> None:
    assert identifiers.quote(name) == quoted
    assert identifiers.unquote(quoted) == name


@pytest.mark.parametrize(("text", "parts"), [
    ("shop.orders", ("shop", "orders")),
    ("`my-db`.`t.1`", ("`my-db`", "`t.1`")),
    ("shop.`order items`", ("shop", "`order items`")),
    ("`a``.b`.c", ("`a``.b`", "c")),
    ("my-db.表", ("my-db", "表")),
])
def test_short_form_splits_at_the_one_dot_outside_backticks(text: str,
                                                            parts: tuple[str, str]) -> None:
    assert identifiers.split_qualified(text) == parts


@pytest.mark.parametrize("text", ["orders", "a.b.c", "`a.b", ".t", "s.", "`a`.`b`.`c`"])
def test_a_short_form_without_exactly_one_dot_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"expected schema\.table"):
        identifiers.split_qualified(text)


@pytest.mark.parametrize(("schema", "table"), [
    ("shop", "orders"), ("my-db", "t.1"), ("tick`db", "t[1]"), ("re:x", "表")])
def test_short_form_reads_back_what_it_writes(schema: str, table: str) -> None:
    written = identifiers.short_form(schema, table)
    assert tuple(map(identifiers.unquote, identifiers.split_qualified(written))) == (
        schema, table)


def test_pairs_name_any_legal_table_in_both_forms() -> None:
    loaded = load(pairs("""\
        - {source: '`my-db`.`t.1`', target: '`copy db`.`t.1`'}
        - {source: {namespace: topic-name.sanitization-it, table: 'a|b@c'}, target: x.y}
        - {source: 'dbz5743中文.`t[1]`', target: 'naïve.`re:t`'}
        """))
    (pipeline,) = loaded.channels[0].pipelines
    names = [(p.source.namespace.literal, p.source.table.literal, p.target.namespace.literal,
              p.target.table.literal) for p in pipeline.pairs]
    assert names == [("my-db", "t.1", "copy db", "t.1"),
                     ("topic-name.sanitization-it", "a|b@c", "x", "y"),
                     ("dbz5743中文", "t[1]", "naïve", "re:t")]
    assert all(p.source.table.kind is PatternKind.SINGLE for p in pipeline.pairs)


@pytest.mark.parametrize("name", ["t%x", "t%%x", "100%", "%s", "%(a)s", "{}", "a`%`b", "'%'"])
def test_a_name_in_a_template_formats_back_to_itself(name: str) -> None:
    sql = f"SELECT {quote(name)} FROM {qualified(name, name)} WHERE x = %s AND y LIKE 'a%%'"
    assert template(sql) % ("1",) == (f"SELECT {quote(name)} FROM {qualified(name, name)} "
                                       "WHERE x = 1 AND y LIKE 'a%'")


def test_a_remembered_template_is_the_scans_answer_for_its_own_text() -> None:
    texts = [f"SELECT {quote(name)} FROM t WHERE x = %s" for name in ("t%x", "tx", "100%")]
    scanned = [template.__wrapped__(sql) for sql in texts]
    for _ in range(2):
        assert [template(sql) for sql in texts] == scanned
    assert scanned == ["SELECT `t%%x` FROM t WHERE x = %s", texts[1],
                       "SELECT `100%%` FROM t WHERE x = %s"]


def test_a_users_condition_keeps_its_percent_signs_and_names() -> None:
    where = "v LIKE 'a%' AND `p%` = 1 AND `q` = '`%'"
    assert template(f"SELECT 1 FROM t WHERE id > %s AND ({condition(where)})") % (5,) == \
        f"SELECT 1 FROM t WHERE id > 5 AND ({where})"


def test_every_cursor_keeps_names_whole() -> None:
    sent: list[str] = []

    class Connection:  # what a cursor asks of its connection to format parameters
        encoding = "utf8"

        def literal(self, value: object) -> str:
            return repr(value)

        def escape(self, value: object, mapping: object = None) -> str:
            return repr(value)

        def query(self, sql: str | bytes | bytearray, unbuffered: bool = False) -> int:
            sent.append(sql if isinstance(sql, str) else bytes(sql).decode())
            return 0

        def _get_result(self) -> None:  # pragma: no cover - not reached
            return None

        def next_result(self) -> None:  # pragma: no cover - not reached
            return None

    cursor = Cursor(Connection())  # type: ignore[arg-type]
    cursor._do_get_result = lambda: None  # type: ignore[method-assign]
    cursor.execute("SELECT * FROM `t%x` WHERE `100%` = %s", (1,))
    cursor.execute("SELECT * FROM `t%x`")  # no parameters: not formatted at all
    cursor.executemany("INSERT INTO `t%s` (`%`) VALUES (%s)", [(1,), (2,)])
    cursor.executemany("UPDATE `t%s` SET `%` = %s", [(3,)])
    assert sent == ["SELECT * FROM `t%x` WHERE `100%` = 1", "SELECT * FROM `t%x`",
                    "INSERT INTO `t%s` (`%`) VALUES (1),(2)", "UPDATE `t%s` SET `%` = 3"]
