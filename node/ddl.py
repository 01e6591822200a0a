"""DDL sync: table DDL from the source's binlog, with its table names mapped through the pairs.

With ``ddl_sync: true`` CREATE/ALTER/DROP/RENAME/TRUNCATE TABLE and CREATE/DROP INDEX on a
table a pair matches are replayed on the pair's target, the names replaced by the target's
(fully qualified), one statement per target table: ``DROP TABLE a, b`` becomes two statements
when a and b map to different targets; a RENAME of several tables stays one statement per
target datasource (atomic there as on the source). Names are found with a SQL lexer
(:mod:`node.ddlparse`) and replaced where they stand; every other byte is kept as the source
ran it — strings holding ``#`` or ``--``, comments, executable comments such as
``/*!100100 DEFAULT CHARSET=latin1 */``, a ``SET STATEMENT … FOR`` before the DDL (less its
time bounds). The table of ``CREATE TABLE … LIKE`` and of ``REFERENCES`` is mapped too when a
pair copies it to the same target. CREATE/ALTER DATABASE of a source database that pairs
read is replayed on each target database it maps to. Other statements (GRANT, views,
temporary tables, …) and statements on tables no pair matches are not replayed. Column names
are not mapped: a clause naming a column a pair renames, leaves out or fills pauses, as does
an ALTER that reshapes columns or keys of a target gathering several source tables
(:mod:`node.ddlpairs`); ``ddl_sync: false``, the default, replays no DDL.

What the target cannot be left without pauses the pipeline, ``ddl_sync`` or not: a statement
that removes or replaces a replicated table's rows (TRUNCATE, DROP TABLE, CREATE OR REPLACE
TABLE, a RENAME of either side, an ALTER TABLE clause that removes or brings in rows without
row events: TRUNCATE/DROP PARTITION, DISCARD/IMPORT TABLESPACE, ALTER IGNORE … ADD UNIQUE,
ENGINE=BLACKHOLE) when it is not replayed, an EXCHANGE or CONVERT of a partition that moves
a replicated table's rows (never replayed: :func:`_swap`), a DROP DATABASE of a database
pairs read (never replayed), a rename not read whole (:func:`extract_ddl`). With it, what a
replay would get wrong pauses too: removing rows from a target that gathers several source
tables, a column added with values made where it runs (:func:`transform_ddl`), an IMPORT
TABLESPACE (its rows are a file on the source's host). Either way, a statement that makes a
replicated table system-versioned pauses (the source may have dropped the versioning again by
the time the pipeline reads its schema). Without it, an ALTER that may have
rewritten a replicated table's values in place pauses too (a MODIFY in a session that cuts
what the new type cannot hold, or in any session to a type that rounds: a DECIMAL of a
smaller scale, fewer fractional seconds, a FLOAT). These checks are :mod:`node.ddlpauses`.
Either way, a statement that adds the very unique key a table without a primary key is merged by
stops when that key was read after it ran (the changes before it were merged by it), not
when the keys were read before it was logged (the table had the key already: a redundant
``ADD UNIQUE``): :func:`node.ddlpauses.keyed_before`.

Select puts a DDL in a batch of its own, so DDL never shares a target transaction with rows.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from node import ddlpairs
from node import ddlpauses as pauses
from node.changes import ChangeType, RowChange, TargetChange
from node.ddlclauses import unrepeatable_column
from node.ddlparse import (
    SWAPS,
    DatabaseDdl,
    Name,
    TableDdl,
    created_sequence,
    database_options,
    dropped_database,
    kind_of,
    on_database,
    parse,
    parse_database,
    tables_named,
    unparsed_rename,
)
from node.ddlsession import DATABASE_DEFAULTS, database_defaults, moving_past, sql_mode
from node.sqllex import second_statement, without_time_bounds
from shared.errors import ConfigError
from shared.identifiers import qualified, quote
from shared.model import BinlogPosition

# parsing lives in node.ddlparse; these are imported from here too
__all__ = ["DatabaseDdl", "Name", "TableDdl", "concerns", "database_options", "extract_ddl",
           "kind_of", "on_database", "parse", "parse_database", "tables_named",
           "target_statements", "transform_ddl"]

# the target of one source table: (datasource, schema, table) for every pair that maps it
Mapper = Callable[[str, str], list[tuple[str, str, str]]]
# the target databases of one source database: (datasource, schema)
DatabaseMapper = Callable[[str], list[tuple[str, str]]]
# a source database's default charset and collation, ("", "") when unknown
DatabaseDefaults = Callable[[str], tuple[str, str]]
# whether a source table's targets may hold other source tables' rows too
Gathered = Callable[[str, str], bool]
# the settings (columns, processor, …) in which the pairs of two source tables differ
Apart = Callable[[tuple[str, str], tuple[str, str]], list[str]]

# how an operator moves a paused pipeline past the statement it stopped at, where the
# pipeline is not known yet (extract_ddl puts ddlsession.moving_past's in its place)
_PAST = ("setl channel stop CHANNEL --wait, then setl position set CHANNEL/PIPELINE --file … "
         "--pos … (the next transaction's position), then setl channel start CHANNEL")


class DdlPipeline(Protocol):
    """What :func:`extract_ddl` needs of a compiled pipeline (node.extract.etl's)."""

    pipeline_id: str
    ddl_sync: bool
    before_images: bool  # a subscription's (or a lake changelog's)
    follows_columns: bool  # a lake's: it adds new columns itself, ddl_sync or not
    # the key of each table without a primary key, as the source showed it when read
    table_keys: dict[tuple[str, str], tuple[str, ...]]
    keys_read_at: BinlogPosition | None  # the source's binlog end just after they were read

    def wants(self, schema: str, table: str) -> bool: ...
    def wants_schema(self, schema: str) -> bool: ...
    def pairs_for(self, schema: str, table: str) -> Sequence[Any]: ...
    def targets_of(self, schema: str, table: str) -> list[tuple[str, str, str]]: ...
    def database_defaults(self, schema: str) -> tuple[str, str]: ...
    def target_databases(self, schema: str) -> list[tuple[str, str]]: ...
    def gathered(self, schema: str, table: str) -> bool: ...
    def stored(self, schema: str, table: str) -> tuple[str, str]: ...


def _replaced(text: str, spans: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def target_statements(ddl: TableDdl, mapper: Mapper, apart: Apart | None = None
                      ) -> Iterator[tuple[str, str, str, str]]:
    """(datasource, schema, table, statement) to run on the targets, one per target table;
    a RENAME one per target datasource, holding every rename there in the source's order (a
    swap or an online schema change's cut-over is atomic there too: a reader never sees the
    table missing between two statements), named by its first table."""
    text = ddl.text
    if ddl.kind == "RENAME":
        head = text[:ddl.renames[0][0].start]
        per: dict[str, list[str]] = {}
        first: dict[str, tuple[str, str]] = {}
        for old, new in ddl.renames:
            between = text[old.end:new.start]
            for (source, schema, table), (_, new_schema, new_table) in _renamed_targets(
                    text, old, new, mapper, apart):
                per.setdefault(source, []).append(
                    f"{qualified(schema, table)}{between}{qualified(new_schema, new_table)}")
                first.setdefault(source, (schema, table))
        for source, renames in per.items():
            yield source, *first[source], head + ", ".join(renames)
        return
    if ddl.renames:  # ALTER TABLE t …, RENAME TO x
        old, new = ddl.renames[0]
        for (source, schema, table), (_, new_schema, new_table) in _renamed_targets(
                text, old, new, mapper, apart):
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


def _renamed_targets(text: str, old: Name, new: Name, mapper: Mapper, apart: Apart | None
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
            f"this statement: {_PAST}")
    differ = apart(old.pair, new.pair) if apart is not None and olds else []
    if differ:
        raise ConfigError(
            f"the source ran {text.strip()[:200]!r}: it renames {qualified(*old.pair)} to "
            f"{qualified(*new.pair)}, and the pairs that take the two names differ in "
            f"{', '.join(differ)}: the target's table would hold the rows the other pair "
            "wrote (columns it leaves out, values it changes) under the first pair's name "
            "(an online schema change's cut-over between an exact pair and a catch-all). "
            "Make the target's table match what its pair writes by hand (copy it again: "
            f"setl snapshot), then move the pipeline past this statement: {_PAST}; or give "
            "both names pairs with the same settings")
    return list(zip(olds, news, strict=True))


def transform_ddl(change: RowChange, seq: int, mapper: Mapper,
                  defaults: DatabaseDefaults | None = None,
                  databases: DatabaseMapper | None = None,
                  gathered: Gathered | None = None,
                  apart: Apart | None = None) -> list[TargetChange]:
    """The target DDL a source DDL maps to; a statement that would run on a target whose
    text holds a second statement after a ';' pauses (a stored routine's or a trigger's body
    has them, and is never run on a target)."""
    found = list(_target_ddl(change, seq, mapper, defaults, databases, gathered, apart))
    more = second_statement(change.ddl, sql_mode(change.session)) if found else ""
    if more:
        raise ConfigError(
            f"the source ran {change.ddl.strip()[:200]!r}, whose text holds a second "
            f"statement after a ';' ({more[:80]!r}; the source may have taken it for a "
            "comment): setl does not run it on the target, which may not. Run what the "
            "target should run by hand, then move the pipeline past this statement: "
            f"{_PAST}")
    return found


def _target_ddl(change: RowChange, seq: int, mapper: Mapper,
                defaults: DatabaseDefaults | None = None,
                databases: DatabaseMapper | None = None,
                gathered: Gathered | None = None,
                apart: Apart | None = None) -> Iterator[TargetChange]:
    """A source DDL change as the target DDL changes it maps to (none for other DDL). Before
    a CREATE TABLE comes a CREATE DATABASE IF NOT EXISTS for its target database with the
    source database's default charset and collation, so that columns which inherit them hold
    the same bytes as on the source. A DROP, TRUNCATE or CREATE OR REPLACE of a table whose
    target holds other source tables' rows too (shards into one table) is refused: it would
    remove theirs."""
    mode = sql_mode(change.session)
    ddl = parse(change.ddl, change.schema, mode)
    if ddl is None:
        database = parse_database(change.ddl, change.schema, mode)
        if database is not None and databases is not None:
            yield from _database_statements(database, change, seq, databases)
        return
    if (ddl.kind in ("DROP", "TRUNCATE") or ddl.replaces or ddl.rows) and gathered is not None:
        for name in ddl.names:
            if mapper(*name.pair) and gathered(*name.pair):
                targets = ", ".join(qualified(*t[1:]) for t in mapper(*name.pair))
                raise ConfigError(
                    f"the source ran {change.ddl.strip()[:200]!r}, but {targets} also takes "
                    f"rows of other source tables than {qualified(*name.pair)}: setl does "
                    "not run it there, it would remove theirs too. Delete that table's rows "
                    "from the target by hand if they should go, then move the pipeline past "
                    f"this statement: {_PAST}")
    unrepeatable = unrepeatable_column(change.ddl, mode)
    if unrepeatable and any(mapper(*name.pair) for name in ddl.names):
        column, how = unrepeatable
        raise ConfigError(
            f"the source ran {change.ddl.strip()[:200]!r}, which adds column {column} with "
            f"{how} in its default: each existing row's value is made where the statement "
            "runs, with no row event (anew on every call, from a sequence, the session's "
            "user or database, the server; setl replays only defaults made of literals, "
            "column names and functions it knows give the same values), so replayed on the "
            "target it would give the rows other values than the source's. Add the column on "
            f"the target by hand, move the pipeline past this statement: {_PAST}; then copy "
            "the table again (setl snapshot) so its rows get the source's values")
    made: set[tuple[str, str]] = set()
    session = change.session
    known = database_defaults(session)
    if ddl.kind == "CREATE" and defaults is not None and known is None:
        known = defaults(ddl.names[0].schema)
        if known[0]:  # the target's CREATE TABLE runs under them (ddlapply)
            session = (*session, (DATABASE_DEFAULTS, known))
    for source, schema, table, statement in target_statements(ddl, mapper, apart):
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


def extract_ddl(compiled: DdlPipeline, seq: int, change: RowChange) -> list[TargetChange]:
    """Extract's part of a source DDL: its target DDL with ``ddl_sync``, none without; a
    statement the targets cannot be left without pauses the pipeline either way (see the
    module's text)."""
    mode, text = sql_mode(change.session), change.ddl
    ran = f"pipeline {compiled.pipeline_id}: the source ran {text.strip()[:200]!r}"
    past = moving_past(compiled.pipeline_id, change.session)
    if unparsed_rename(text, change.schema, mode):
        raise ConfigError(
            f"{ran}, a rename whose form setl does not read, so it cannot tell which tables "
            "it renames: a replicated table renamed away or replaced would leave the target "
            "with its old rows. If it names tables this pipeline replicates, do on the target "
            f"what it did (by hand), then move the pipeline past this statement: {past}")
    dropped = dropped_database(text, mode)
    if dropped is not None:
        return _dropped_database(compiled, seq, change, dropped, ran, past)
    sequence = created_sequence(text, change.schema, mode)
    if sequence is not None and compiled.wants(*sequence):
        raise ConfigError(f"{ran}: {pauses.sequence_problem('.'.join(sequence))}. Narrow "
                          "the pipeline's pairs so that none takes it (setl apply), then "
                          "resume: the statement is then passed over")
    ddl = parse(text, change.schema, mode)
    if ddl is not None and ddl.rows in SWAPS:
        pauses.swapped(compiled, ddl, ran, past)
    if ddl is not None:
        pauses.keyed_before(compiled, ddl, change, ran, past)
        pauses.versioned(compiled, ddl, change, ran, past)
    if compiled.ddl_sync and ddl is not None and ddl.rows == "IMPORT TABLESPACE":
        pauses.imported(compiled, ddl, ran, past)
    if compiled.ddl_sync and ddl is not None:
        ddlpairs.check(compiled, ddl, text, change.session, ran, past)
    if compiled.ddl_sync:
        try:
            return transform_ddl(change, seq, compiled.targets_of, compiled.database_defaults,
                                 compiled.target_databases, compiled.gathered,
                                 _apart(compiled))
        except ConfigError as exc:  # said with this pipeline's commands
            raise ConfigError(str(exc).replace(_PAST, past)) from None
    if ddl is None:
        return []
    removes = ddl.kind in ("DROP", "TRUNCATE") or ddl.replaces or bool(ddl.rows)
    names = [name.pair for name in ddl.names] if removes else \
        [name.pair for pair in ddl.renames for name in pair]
    tables = [qualified(*pair) for pair in dict.fromkeys(names) if compiled.wants(*pair)]
    if tables:
        what = "renames" if ddl.renames else "removes or replaces the rows of"
        if ddl.rows:
            what = f"removes or brings in rows without row events ({ddl.rows}) in"
        raise ConfigError(
            f"{ran}, which {what} {', '.join(tables)}, replicated by this pipeline; with "
            "ddl_sync off it is not replayed, and the target would keep the old rows and mix "
            "them with the new ones (a new AUTO_INCREMENT id written over an old row). Do on "
            f"the target what it did (by hand), then move the pipeline past this statement: "
            f"{past}; or turn ddl_sync on for this pipeline (setl apply) and resume, and it "
            "is replayed (a subscription's reader gets it as a DDL transaction)")
    if ddl.kind == "ALTER":
        pauses.rewritten(compiled, ddl, change, ran, past)
    if ddl.kind == "ALTER" and compiled.follows_columns:
        # a lake adds the column with its first row, ddl_sync or not: it sees the statement
        # to stop where that would leave the rows it holds NULL where the source's are not
        return [TargetChange(datasource, schema, table, ChangeType.DDL, (), None, None,
                             seq=seq, ddl=text, session=change.session)
                for name in ddl.names if compiled.wants(*name.pair)
                for datasource, schema, table in compiled.targets_of(*name.pair)]
    return []


def _dropped_database(compiled: DdlPipeline, seq: int, change: RowChange, ddl: DatabaseDdl,
                      ran: str, past: str) -> list[TargetChange]:
    """A DROP DATABASE: nothing when no pair reads it; with ``ddl_sync`` a subscription's
    reader gets it as a DDL transaction (a lake refuses it at Load); else it pauses: setl
    never drops a target database (it may hold more than the source's), and a table made
    again there would meet the old one's rows."""
    if not compiled.wants_schema(ddl.schema):
        return []
    databases = compiled.target_databases(ddl.schema)
    if compiled.ddl_sync and compiled.before_images and databases:
        return list(_database_statements(ddl, change, seq, compiled.target_databases))
    where = ", ".join(qualified(*database) for database in databases) or \
        "the target tables its pairs write"
    raise ConfigError(
        f"{ran}, which drops every table of {ddl.schema}, a database this pipeline "
        "replicates tables of: setl never replays DROP DATABASE (a target database may hold "
        "more than the source's), and a table made again under an old name would mix its "
        f"new rows with the old ones the target keeps. Drop or empty the tables of "
        f"{ddl.schema} on the target by hand (in {where}), then move the pipeline past this "
        f"statement: {past}")


def _apart(compiled: DdlPipeline) -> Apart:
    def apart(old: tuple[str, str], new: tuple[str, str]) -> list[str]:
        # the pairs of the names as the source stores them (a DDL's as typed: ORDERS)
        olds = compiled.pairs_for(*compiled.stored(*old))
        news = compiled.pairs_for(*compiled.stored(*new))
        if len(olds) != len(news):
            return ["the pairs taking them"]
        return sorted({name for one, other in zip(olds, news, strict=True) if one is not other
                       for name in one.pair.settings_apart(other.pair) if name != "source"})
    return apart


def concerns(statement: str, schema: str, mode: int, wants: Callable[[str, str], bool],
             wants_schema: Callable[[str], bool]) -> bool:
    """Whether a DDL read without ``ddl_sync`` still goes to Extract (which cuts a batch for
    it and reads the tables' keys again after it, or pauses: :func:`extract_ddl`): one that
    names a replicated table, a DROP DATABASE of a database pairs read, a rename not read
    whole, a CREATE SEQUENCE a pair takes."""
    if any(wants(*table) for table in tables_named(statement, schema, mode)):
        return True
    sequence = created_sequence(statement, schema, mode)
    if sequence is not None:
        return wants(*sequence)
    dropped = dropped_database(statement, mode)
    if dropped is not None:
        return wants_schema(dropped.schema)
    return unparsed_rename(statement, schema, mode)
