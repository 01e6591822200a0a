"""Table and database DDL read from a statement's text: the tables it acts on and where their
names stand (:mod:`node.ddl` maps them through the pairs). Names are found with a SQL lexer
(:mod:`node.sqllex`), comments, strings and executable comments read as the server reads
them."""

from __future__ import annotations

from dataclasses import dataclass

from node.sqllex import NAME, WORD, Token, identifier, parts
from node.sqllex import statement_code as code


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
    replaces: bool = False  # CREATE OR REPLACE TABLE: the table's rows go, as by a DROP
    # an ALTER TABLE clause that removes or brings in rows with no row event in the binlog
    # ("TRUNCATE PARTITION", "EXCHANGE PARTITION", …: ROW_CLAUSES), "" for none
    rows: str = ""
    swapped: tuple[Name, ...] = ()  # the other table of EXCHANGE/CONVERT (SWAPS)


@dataclass(frozen=True)
class DatabaseDdl:
    """CREATE or ALTER DATABASE: the database it acts on and where its name stands (an ALTER
    without a name acts on the session's database: the name goes in at ``start``)."""

    kind: str
    text: str
    schema: str
    start: int
    end: int


# ALTER TABLE clauses whose rows move between two tables; the other's name is read
SWAPS = ("EXCHANGE PARTITION", "CONVERT PARTITION", "CONVERT TABLE")
# what :attr:`TableDdl.rows` may be: clauses that remove or bring in rows without row events
ROW_CLAUSES = ("TRUNCATE PARTITION", "DROP PARTITION", *SWAPS, "DISCARD TABLESPACE",
               "IMPORT TABLESPACE", "ALTER IGNORE … UNIQUE", "ENGINE=BLACKHOLE")
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

    def wait(self) -> None:
        """MariaDB's ``WAIT n`` or ``NOWAIT`` after a table's name (a lock wait's bound)."""
        if self.word("WAIT"):
            self.at += 1
        else:
            self.word("NOWAIT")

    def if_exists(self) -> None:
        if self.word("IF"):
            self.word("EXISTS")

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
        replaces = read.word("OR")
        if replaces and not read.word("REPLACE"):
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
                        others=((like,) if like else ()) + read.references(),
                        replaces=replaces)
    if read.word("ALTER"):
        read.word("ONLINE")
        ignore = read.word("IGNORE")
        if not read.word("TABLE"):
            return None
        read.if_exists()
        name = read.name()
        if name is None:
            return None
        read.wait()
        renamed = _renamed_to(read.tokens[read.at:], read.default_schema)
        rows, swapped = _row_clause(parts(read.tokens[read.at:]), ignore, read.default_schema)
        return TableDdl("ALTER", statement, (name,), () if renamed is None else
                        ((name, renamed),), others=read.references(), rows=rows,
                        swapped=swapped)
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
        read.if_exists()
        renames = []
        while (old := read.name()) is not None:
            read.wait()
            if not read.word("TO") or (new := read.name()) is None:
                return None  # not read whole: unparsed_rename() stops the pipeline
            renames.append((old, new))
            if not read.symbol(","):
                break
        while read.symbol(";"):
            pass
        if read.at < len(read.tokens):
            return None
        return TableDdl("RENAME", statement, (), tuple(renames)) if renames else None
    return None


def created_sequence(statement: str, default_schema: str, sql_mode: int = 0
                     ) -> tuple[str, str] | None:
    """The (schema, name) of the sequence a ``CREATE [OR REPLACE] SEQUENCE [IF NOT EXISTS]
    s`` makes (None for any other statement, and for a temporary one)."""
    read = _Reader(code(statement, sql_mode), default_schema)
    if not read.word("CREATE"):
        return None
    if read.word("OR") and not read.word("REPLACE"):
        return None
    if not read.word("SEQUENCE"):
        return None
    if read.word("IF"):
        read.word("NOT")
        read.word("EXISTS")
    name = read.name()
    return name.pair if name else None


def tables_named(statement: str, default_schema: str, sql_mode: int = 0
                 ) -> list[tuple[str, str]]:
    """The (schema, table) a table DDL acts on, both sides of a rename; none for any other
    statement."""
    ddl = parse(statement, default_schema, sql_mode)
    if ddl is None:
        return []
    return [name.pair for name in (*ddl.names, *ddl.swapped)] + \
        [name.pair for pair in ddl.renames for name in pair]


def _row_clause(clauses: list[list[Token]], ignore: bool, default_schema: str
                ) -> tuple[str, tuple[Name, ...]]:
    """The first of an ALTER TABLE's clauses that removes or brings in rows without row
    events (one of :data:`ROW_CLAUSES`, '' for none), with the other table of a swap."""
    for clause in clauses:
        head = " ".join(token.text.upper() for token in clause[:2])
        if head in ("TRUNCATE PARTITION", "DROP PARTITION"):
            return head, ()
        if head in SWAPS:
            # EXCHANGE PARTITION p WITH TABLE x, CONVERT PARTITION p TO TABLE x,
            # CONVERT TABLE x TO PARTITION p …
            at = 2 if head == "CONVERT TABLE" else next(
                (at + 2 for at in range(2, len(clause) - 1)
                 if clause[at].is_word("WITH", "TO") and clause[at + 1].is_word("TABLE")), 0)
            other = _Reader(clause[at:], default_schema).name() if at else None
            return head, (other,) if other else ()
        if clause and clause[0].is_word("DISCARD", "IMPORT") and \
                any(token.is_word("TABLESPACE") for token in clause):
            return f"{clause[0].text.upper()} TABLESPACE", ()
        if ignore and clause and not clause[0].is_word("DROP") and \
                any(token.is_word("UNIQUE", "PRIMARY") for token in clause):
            return "ALTER IGNORE … UNIQUE", ()  # the rows with a duplicate key go
        if _blackhole(clause):
            return "ENGINE=BLACKHOLE", ()
    return "", ()


def _blackhole(clause: list[Token]) -> bool:
    """Whether a clause holds the table option ``ENGINE [=] BLACKHOLE``."""
    for at, token in enumerate(clause[:-1]):
        if token.is_word("ENGINE"):
            value = clause[at + 2] if clause[at + 1].text == "=" and at + 2 < len(clause) \
                else clause[at + 1]
            if (identifier(value) or value.text.strip("'\"")).upper() == "BLACKHOLE":
                return True
    return False


def _renamed_to(rest: list[Token], default_schema: str) -> Name | None:
    """The new name an ALTER TABLE's ``RENAME [TO|AS|=] x`` clause gives the table (not a
    ``RENAME COLUMN``, ``INDEX`` or ``KEY``), or None (also for a clause not read whole:
    :func:`unparsed_rename`)."""
    for clause in parts(rest):
        if clause and clause[0].is_word("RENAME") and not (
                len(clause) > 1 and clause[1].is_word("COLUMN", "INDEX", "KEY")):
            read = _Reader(clause[1:], default_schema)
            if not read.word("TO", "AS"):
                read.symbol("=")
            name = read.name()
            while read.symbol(";"):
                pass
            return name if read.at == len(read.tokens) else None
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


def on_database(statement: str, sql_mode: int = 0) -> str:
    """CREATE or ALTER when the statement makes or changes a database, else ""."""
    tokens = code(statement, sql_mode)
    if len(tokens) > 1 and tokens[0].is_word("CREATE", "ALTER") and \
            tokens[1].is_word("DATABASE", "SCHEMA"):
        return tokens[0].text.upper()
    return ""


def dropped_database(statement: str, sql_mode: int = 0) -> DatabaseDdl | None:
    """The ``DROP DATABASE`` (or SCHEMA) in a statement, or None for any other statement."""
    tokens = code(statement, sql_mode)
    read = _Reader(tokens, "")
    if not (read.word("DROP") and read.word("DATABASE", "SCHEMA")):
        return None
    read.if_exists()
    name = read._part(read.at)
    if name is None:
        return None
    return DatabaseDdl("DROP", statement, name, tokens[read.at].start, tokens[read.at].end)


def unparsed_rename(statement: str, default_schema: str, sql_mode: int = 0) -> bool:
    """Whether a statement renames a table in a form :func:`parse` does not read whole: a
    ``RENAME TABLE``, or an ``ALTER TABLE`` with a ``RENAME [TO|AS]`` clause, whose renames
    are not found (their tables unknown, it cannot be followed or passed)."""
    tokens = code(statement, sql_mode)
    if len(tokens) < 2:
        return False
    if tokens[0].is_word("RENAME"):
        if not tokens[1].is_word("TABLE", "TABLES"):
            return False
    elif not (tokens[0].is_word("ALTER") and any(t.is_word("TABLE") for t in tokens[1:4])
              and any(t.is_word("RENAME") and not (
                  at + 1 < len(tokens) and tokens[at + 1].is_word("COLUMN", "INDEX", "KEY"))
                  for at, t in enumerate(tokens))):
        return False
    parsed = parse(statement, default_schema, sql_mode)
    return parsed is None or not parsed.renames
