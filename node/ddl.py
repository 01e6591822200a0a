"""DDL sync: table DDL from the source's binlog, with its table names mapped through the pairs.

With ``ddl_sync: true`` CREATE/ALTER/DROP/RENAME/TRUNCATE TABLE and CREATE/DROP INDEX on a
table a pair matches are replayed on the pair's target, the names replaced by the target's
(fully qualified), one statement per target table: ``DROP TABLE a, b`` becomes two statements
when a and b map to different targets. Names are found with a SQL lexer (:mod:`node.sqllex`)
and replaced where they stand; every other byte is kept as the source ran it — strings holding
``#`` or ``--``, comments, executable comments such as ``/*!100100 DEFAULT CHARSET=latin1
*/``, a ``SET STATEMENT … FOR`` before the DDL (less its time bounds). The table of
``CREATE TABLE … LIKE`` and of ``REFERENCES`` is mapped too when a pair copies it to the same
target. CREATE/ALTER DATABASE of a source database that pairs read is replayed on each target
database it maps to. Other statements (GRANT, views, temporary tables, …) and statements on
tables no pair matches are not replayed. A column a pair renames or excludes is not renamed
in the DDL: give such tables their target DDL by hand (``ddl_sync: false``, the default,
filters every DDL).

Select puts a DDL in a batch of its own, so DDL never shares a target transaction with rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from node.changes import ChangeType, RowChange, TargetChange
from node.ddlsession import DATABASE_DEFAULTS, database_defaults, sql_mode
from node.sqllex import NAME, WORD, Token, identifier, parts, second_statement, without_time_bounds
from node.sqllex import statement_code as code
from shared.errors import ConfigError
from shared.identifiers import qualified, quote

# the target of one source table: (datasource, schema, table) for every pair that maps it
Mapper = Callable[[str, str], list[tuple[str, str, str]]]
# the target databases of one source database: (datasource, schema)
DatabaseMapper = Callable[[str], list[tuple[str, str]]]
# a source database's default charset and collation, ("", "") when unknown
DatabaseDefaults = Callable[[str], tuple[str, str]]
# whether a source table's targets may hold other source tables' rows too
Gathered = Callable[[str, str], bool]


@dataclass(frozen=True)
class Name:
    """A table named in a statement, and where it stands in the text."""

    schema: str
    table: str
    start: int
    end: int

    @property
    def pair(self) -> tuple[str, str]:
        return self.schema, self.table


@dataclass(frozen=True)
class TableDdl:
    """A table DDL statement: the tables it acts on, as named and where."""

    kind: str
    text: str  # the statement as the source ran it
    names: tuple[Name, ...]
    renames: tuple[tuple[Name, Name], ...] = ()
    others: tuple[Name, ...] = ()  # CREATE … LIKE and REFERENCES: mapped where a pair copies


@dataclass(frozen=True)
class DatabaseDdl:
    """CREATE or ALTER DATABASE: the database it acts on and where its name stands (an ALTER
    without a name acts on the session's database: the name goes in at ``start``)."""

    kind: str
    text: str
    schema: str
    start: int
    end: int


# what may follow ALTER DATABASE when the name is left out
_DATABASE_OPTIONS = ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT")


class _Reader:
    """Walks the meaningful tokens of a statement."""

    def __init__(self, tokens: list[Token], default_schema: str) -> None:
        self.tokens, self.at, self.default_schema = tokens, 0, default_schema

    def word(self, *words: str) -> bool:
        if self.at < len(self.tokens) and self.tokens[self.at].is_word(*words):
            self.at += 1
            return True
        return False

    def symbol(self, text: str) -> bool:
        if self.at < len(self.tokens) and self.tokens[self.at].text == text:
            self.at += 1
            return True
        return False

    def name(self) -> Name | None:
        """A table name here: ``t``, ``db.t``, `` `d b`.`t` ``."""
        first = self._part(self.at)
        if first is None:
            return None
        if self._dot(self.at + 1):
            second = self._part(self.at + 2)
            if second is not None:
                name = Name(first, second, self.tokens[self.at].start,
                            self.tokens[self.at + 2].end)
                self.at += 3
                return name
        name = Name(self.default_schema, first, self.tokens[self.at].start,
                    self.tokens[self.at].end)
        self.at += 1
        return name

    def _part(self, index: int) -> str | None:
        if index >= len(self.tokens) or self.tokens[index].kind not in (NAME, WORD):
            return None
        return identifier(self.tokens[index])

    def _dot(self, index: int) -> bool:
        return index < len(self.tokens) and self.tokens[index].text == "."

    def references(self) -> tuple[Name, ...]:
        """The tables after REFERENCES in the rest of the statement."""
        found = []
        while self.at < len(self.tokens):
            if self.word("REFERENCES"):
                name = self.name()
                if name is not None:
                    found.append(name)
            else:
                self.at += 1
        return tuple(found)


def parse(statement: str, default_schema: str, sql_mode: int = 0) -> TableDdl | None:
    """The table DDL in a statement (as a session in ``sql_mode`` reads it), or None for any
    other statement."""
    read = _Reader(code(statement, sql_mode), default_schema)
    if read.word("CREATE"):
        if read.word("OR") and not read.word("REPLACE"):
            return None
        read.word("ONLINE", "OFFLINE")
        read.word("UNIQUE", "FULLTEXT", "SPATIAL")
        if read.word("INDEX"):
            return _index(read, statement)
        if read.word("TEMPORARY") or not read.word("TABLE"):
            return None
        if read.word("IF"):
            read.word("NOT")
            read.word("EXISTS")
        name = read.name()
        if name is None:
            return None
        read.symbol("(")
        like = read.name() if read.word("LIKE") else None
        return TableDdl("CREATE", statement, (name,),
                        others=((like,) if like else ()) + read.references())
    if read.word("ALTER"):
        read.word("ONLINE")
        read.word("IGNORE")
        if not read.word("TABLE"):
            return None
        if read.word("IF"):
            read.word("EXISTS")
        name = read.name()
        if name is None:
            return None
        renamed = _renamed_to(read.tokens[read.at:], read.default_schema)
        return TableDdl("ALTER", statement, (name,), () if renamed is None else
                        ((name, renamed),), others=read.references())
    if read.word("DROP"):
        read.word("ONLINE", "OFFLINE")
        if read.word("INDEX"):
            return _index(read, statement)
        if read.word("TEMPORARY") or not read.word("TABLE"):
            return None
        if read.word("IF"):
            read.word("EXISTS")
        names = []
        while (name := read.name()) is not None:
            names.append(name)
            if not read.symbol(","):
                break
        return TableDdl("DROP", statement, tuple(names)) if names else None
    if read.word("TRUNCATE"):
        read.word("TABLE")
        name = read.name()
        return TableDdl("TRUNCATE", statement, (name,)) if name else None
    if read.word("RENAME"):
        if not read.word("TABLE", "TABLES"):
            return None
        renames = []
        while (old := read.name()) is not None and read.word("TO") and \
                (new := read.name()) is not None:
            renames.append((old, new))
            if not read.symbol(","):
                break
        return TableDdl("RENAME", statement, (), tuple(renames)) if renames else None
    return None


def tables_named(statement: str, default_schema: str, sql_mode: int = 0
                 ) -> list[tuple[str, str]]:
    """The (schema, table) a table DDL acts on, both sides of a rename; none for any other
    statement."""
    ddl = parse(statement, default_schema, sql_mode)
    if ddl is None:
        return []
    return [name.pair for name in ddl.names] + \
        [name.pair for pair in ddl.renames for name in pair]


def _renamed_to(rest: list[Token], default_schema: str) -> Name | None:
    """The new name an ALTER TABLE's ``RENAME [TO|AS|=] x`` clause gives the table (not a
    ``RENAME COLUMN``, ``INDEX`` or ``KEY``), or None."""
    for clause in parts(rest):
        if clause and clause[0].is_word("RENAME") and not (
                len(clause) > 1 and clause[1].is_word("COLUMN", "INDEX", "KEY")):
            read = _Reader(clause[1:], default_schema)
            if not read.word("TO", "AS"):
                read.symbol("=")
            return read.name()
    return None


def _index(read: _Reader, statement: str) -> TableDdl | None:
    """``CREATE … INDEX i … ON t …`` and ``DROP INDEX i ON t``: the table after ``ON``."""
    while read.at < len(read.tokens) and not read.word("ON"):
        read.at += 1
    name = read.name()
    return TableDdl("INDEX", statement, (name,)) if name else None


def parse_database(statement: str, default_schema: str, sql_mode: int = 0
                   ) -> DatabaseDdl | None:
    """CREATE/ALTER DATABASE (or SCHEMA) in a statement, or None for any other statement."""
    tokens = code(statement, sql_mode)
    read = _Reader(tokens, default_schema)
    kind = "CREATE" if read.word("CREATE") else "ALTER" if read.word("ALTER") else ""
    if not kind or not read.word("DATABASE", "SCHEMA"):
        return None
    if kind == "CREATE" and read.word("IF"):
        read.word("NOT")
        read.word("EXISTS")
    token = tokens[read.at] if read.at < len(tokens) else None
    if token is not None and token.kind in (NAME, WORD) and \
            not (kind == "ALTER" and token.is_word(*_DATABASE_OPTIONS)):
        return DatabaseDdl(kind, statement, identifier(token) or "", token.start, token.end)
    if kind == "ALTER" and default_schema:
        at = tokens[read.at - 1].end
        return DatabaseDdl(kind, statement, default_schema, at, at)
    return None


def database_options(statement: str, sql_mode: int = 0) -> tuple[str | None, str | None]:
    """The CHARACTER SET and COLLATE a CREATE/ALTER DATABASE names (None where it does not)."""
    tokens, charset, collation = code(statement, sql_mode), None, None
    for at, token in enumerate(tokens):
        value_at = at + 1
        if token.is_word("CHARACTER") and value_at < len(tokens) and \
                tokens[value_at].is_word("SET"):
            value_at += 1
        elif not token.is_word("CHARSET", "COLLATE"):
            continue
        if value_at < len(tokens) and tokens[value_at].text == "=":
            value_at += 1
        if value_at < len(tokens):
            value = identifier(tokens[value_at]) or tokens[value_at].text.strip("'\"")
            if token.is_word("COLLATE"):
                collation = value
            else:
                charset = value
    return charset, collation


def kind_of(statement: str, sql_mode: int = 0) -> str:
    """The statement's first keyword (CREATE, DROP, …), comments and markers skipped."""
    first = next(iter(code(statement, sql_mode)), None)
    return first.text.upper() if first is not None and first.kind == WORD else ""


def _replaced(text: str, spans: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def target_statements(ddl: TableDdl, mapper: Mapper) -> Iterator[tuple[str, str, str, str]]:
    """(datasource, schema, table, statement) to run on the targets, one per target table."""
    text = ddl.text
    if ddl.kind == "RENAME":
        head = text[:ddl.renames[0][0].start]
        for old, new in ddl.renames:
            between = text[old.end:new.start]
            for (source, schema, table), (_, new_schema, new_table) in _renamed_targets(
                    text, old, new, mapper):
                yield source, schema, table, (
                    f"{head}{qualified(schema, table)}{between}"
                    f"{qualified(new_schema, new_table)}")
        return
    if ddl.renames:  # ALTER TABLE t …, RENAME TO x
        old, new = ddl.renames[0]
        for (source, schema, table), (_, new_schema, new_table) in _renamed_targets(
                text, old, new, mapper):
            yield source, schema, table, _replaced(text, [
                (old.start, old.end, qualified(schema, table)),
                (new.start, new.end, qualified(new_schema, new_table)),
                *_others(ddl, mapper, source)])
        return
    first, last = ddl.names[0], ddl.names[-1]
    for name in ddl.names:
        for source, schema, table in mapper(*name.pair):
            if len(ddl.names) == 1:
                yield source, schema, table, _replaced(
                    text, [(name.start, name.end, qualified(schema, table)),
                           *_others(ddl, mapper, source)])
            else:  # DROP TABLE a, b: one statement per table
                yield source, schema, table, (
                    f"{text[:first.start]}{qualified(schema, table)}{text[last.end:]}")


def _others(ddl: TableDdl, mapper: Mapper, source: str) -> list[tuple[int, int, str]]:
    """Where the tables of ``LIKE`` and ``REFERENCES`` stand, with their names on the
    ``source`` datasource when a pair copies them there (as written otherwise)."""
    return [(other.start, other.end, qualified(*target[1:])) for other in ddl.others
            for target in mapper(*other.pair)[:1] if target[0] == source]


def _renamed_targets(text: str, old: Name, new: Name, mapper: Mapper
                     ) -> list[tuple[tuple[str, str, str], tuple[str, str, str]]]:
    """The targets of a renamed table before and after, paired (none when neither name is
    replicated); a rename the targets cannot follow stops the pipeline."""
    olds, news = mapper(*old.pair), mapper(*new.pair)
    if len(olds) != len(news) or any(a[0] != b[0] for a, b in zip(olds, news, strict=True)):
        raise ConfigError(
            f"the source ran {text.strip()[:200]!r}: it renames "
            f"{qualified(*old.pair)} to {qualified(*new.pair)}, and only one of the "
            "two is replicated (or they go to different targets), so the target "
            "cannot follow: a table swap would leave the target with the old rows, "
            "or with rows never replicated. Make the target's table match the "
            "source's by hand (copy it: setl snapshot), then move the pipeline past "
            "this statement: setl position set CHANNEL/PIPELINE --file … --pos … "
            "(the next transaction's position), and resume")
    return list(zip(olds, news, strict=True))


def transform_ddl(change: RowChange, seq: int, mapper: Mapper,
                  defaults: DatabaseDefaults | None = None,
                  databases: DatabaseMapper | None = None,
                  gathered: Gathered | None = None) -> list[TargetChange]:
    """The target DDL a source DDL maps to; a statement that would run on a target whose
    text holds a second statement after a ';' pauses (a stored routine's or a trigger's body
    has them, and is never run on a target)."""
    found = list(_target_ddl(change, seq, mapper, defaults, databases, gathered))
    more = second_statement(change.ddl, sql_mode(change.session)) if found else ""
    if more:
        raise ConfigError(
            f"the source ran {change.ddl.strip()[:200]!r}, whose text holds a second "
            f"statement after a ';' ({more[:80]!r}; the source may have taken it for a "
            "comment): setl does not run it on the target, which may not. Run what the "
            "target should run by hand, then move the pipeline past this statement: setl "
            "position set CHANNEL/PIPELINE --file … --pos … (the next transaction's "
            "position), and resume")
    return found


def _target_ddl(change: RowChange, seq: int, mapper: Mapper,
                defaults: DatabaseDefaults | None = None,
                databases: DatabaseMapper | None = None,
                gathered: Gathered | None = None) -> Iterator[TargetChange]:
    """A source DDL change as the target DDL changes it maps to (none for other DDL). Before
    a CREATE TABLE comes a CREATE DATABASE IF NOT EXISTS for its target database with the
    source database's default charset and collation, so that columns which inherit them hold
    the same bytes as on the source. A DROP or TRUNCATE of a table whose target holds other
    source tables' rows too (shards into one table) is refused: it would remove theirs."""
    mode = sql_mode(change.session)
    ddl = parse(change.ddl, change.schema, mode)
    if ddl is None:
        database = parse_database(change.ddl, change.schema, mode)
        if database is not None and databases is not None:
            yield from _database_statements(database, change, seq, databases)
        return
    if ddl.kind in ("DROP", "TRUNCATE") and gathered is not None:
        for name in ddl.names:
            if mapper(*name.pair) and gathered(*name.pair):
                targets = ", ".join(qualified(*t[1:]) for t in mapper(*name.pair))
                raise ConfigError(
                    f"the source ran {change.ddl.strip()[:200]!r}, but {targets} also takes "
                    f"rows of other source tables than {qualified(*name.pair)}: setl does "
                    "not run it there, it would remove theirs too. Delete that table's rows "
                    "from the target by hand if they should go, then move the pipeline past "
                    "this statement: setl position set CHANNEL/PIPELINE --file … --pos … (the "
                    "next transaction's position), and resume")
    made: set[tuple[str, str]] = set()
    session = change.session
    known = database_defaults(session)
    if ddl.kind == "CREATE" and defaults is not None and known is None:
        known = defaults(ddl.names[0].schema)
        if known[0]:  # the target's CREATE TABLE runs under them (ddlapply)
            session = (*session, (DATABASE_DEFAULTS, known))
    for source, schema, table, statement in target_statements(ddl, mapper):
        # a SET STATEMENT … FOR before the DDL may bound the source's run (max_statement_time,
        # lock_wait_timeout): a replica does not keep that (MariaDB's own ignore
        # max_statement_time), else a slower target fails the DDL on every try
        statement = without_time_bounds(statement, mode)
        if ddl.kind == "CREATE" and known and known[0] and (source, schema) not in made:
            made.add((source, schema))
            yield TargetChange(source, schema, table, ChangeType.DDL, (), None, None,
                               seq=seq, ddl=f"CREATE DATABASE IF NOT EXISTS {quote(schema)} "
                               f"CHARACTER SET {known[0]} COLLATE {known[1]}")
        yield TargetChange(source, schema, table, ChangeType.DDL, (), None, None, seq=seq,
                           ddl=statement, session=session)


def _database_statements(ddl: DatabaseDdl, change: RowChange, seq: int,
                         databases: DatabaseMapper) -> Iterator[TargetChange]:
    """CREATE/ALTER DATABASE for every target database the source database maps to, under
    the source session (its charset and collation, or collation_server when none is named)."""
    for datasource, schema in databases(ddl.schema):
        name = quote(schema) if ddl.start < ddl.end else f" {quote(schema)}"
        yield TargetChange(datasource, schema, "", ChangeType.DDL, (), None, None, seq=seq,
                           ddl=_replaced(ddl.text, [(ddl.start, ddl.end, name)]),
                           session=change.session)


def on_database(statement: str, sql_mode: int = 0) -> str:
    """CREATE or ALTER when the statement makes or changes a database, else ""."""
    tokens = code(statement, sql_mode)
    if len(tokens) > 1 and tokens[0].is_word("CREATE", "ALTER") and \
            tokens[1].is_word("DATABASE", "SCHEMA"):
        return tokens[0].text.upper()
    return ""
