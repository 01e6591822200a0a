"""Snapshot chunks copied as the source's own text: the source writes each row as a line
of ``LOAD DATA`` fields, the target reads the lines, and no row is ever a Python value.

A chunk read the ordinary way (:mod:`node.extract.reads`) is parsed into Python rows,
pickled, joined into the stream as row changes, transformed, merged and rendered again as
text — about 30 µs of CPU per row on the development machine, where the target needs only a
few. For a table whose pair only renames and chooses columns, into a target table of the
same column types and charsets, that round trip changes nothing: the read asks the source
for the chunk as one value (``GROUP_CONCAT`` of the lines, :func:`query`), and Extract
passes the lines through to a ``LOAD DATA LOCAL INFILE … REPLACE`` (:func:`units`).

What makes that exact:

- **Same bytes.** Each column's text is the source server's own (numbers, dates, DOUBLE in
  its shortest round-trip form, FLOAT as the double it holds), read back by a target column
  of the very same ``COLUMN_TYPE``; text columns go as their bytes (``CAST … AS BINARY``) into
  a column of the same charset (``CHARACTER SET binary`` on the target): escaped by
  ``REPLACE`` where a value has at most :data:`SHORT` bytes, in hex where it may be longer
  (:func:`long`: MariaDB's ``REPLACE`` is quadratic in its matches). Anything else — a
  type whose text does not read back as the value (:data:`loaddata.TYPES`), another charset
  or type on the target, a column the target has and the pair does not write, a generated or
  trigger-fed target, a target merged in source order (another unique key, foreign keys),
  a two-way pipeline — reads rows the ordinary way (:func:`plan` says None).
- **Same keys.** Every line starts with its key as a token (a field loaded into a user
  variable): an integer's digits, a string's bytes in hex. Extract drops the lines whose key
  the batch writes from the window's start on, comparing the decoded key values made into
  the same tokens (:func:`token`); a value it cannot make a token of stops the pipeline with
  an error rather than copy a row that may be older than the stream's.
- **Right after the batch.** The lines load once the batch's transaction has committed, each
  chunk in a transaction of its own, several at once (:mod:`node.target.mysql.copies`), before the
  next batch. Extract left out every key the batch writes from the window's low watermark on
  (the stream's changes, rows read for the free door): the batch holds a newer state of
  those. A key the stream changed only before the window holds the same row in the batch and
  in the line. So a line writes its row as the target holds it at the end of the batch, or a
  row that was not there yet.

Where the target's ``LOAD DATA`` would take a lock on the whole table (an AUTO_INCREMENT
column under ``innodb_autoinc_lock_mode`` 1, MariaDB's default: copies on several connections
then load one after another), or its server takes no ``LOAD DATA LOCAL`` (``local_infile``
OFF, MySQL 8's default), each line holds the row as a ``VALUES`` tuple instead — text
values as ``_binary`` literals of their bytes (:func:`_value`) — and the copy is a multi-row
``REPLACE``, which takes no such lock (on the development machine, sysbench's table on two
connections: 72k rows/s by ``LOAD DATA``, 91k by tuples).

A chunk that cannot go this way after all — a value too large for one result
(``group_concat_max_len``: the source's ``max_allowed_packet``), a VALUES tuple too large
for one statement under the target's ``max_allowed_packet`` (:func:`fits`), or an empty ENUM
value (a strict target refuses it in LOAD DATA) — is read again the ordinary way by the same
task, still inside its window.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from node.extract.chunks import INTEGER_TYPES
from node.jobs import Unit
from node.target.mysql import loaddata
from node.target.mysql.facts import TableFacts, Target
from node.target.mysql.pieces import room
from node.target.mysql.sqltext import Sql
from shared.errors import SetlError
from shared.identifiers import qualified, quote

if TYPE_CHECKING:
    from node.extract.etl import CompiledPipeline
    from node.extract.reads import Read, ReadColumn

STATEMENT = 1 << 20  # bytes of VALUES tuples in one REPLACE, about (under max_allowed_packet)
KEY_VARIABLE = "@setl_key"  # where LOAD DATA puts a line's key token (and nothing reads it)
STRING_KEYS = frozenset(("char", "varchar", "binary", "varbinary"))
_NUMBERS = INTEGER_TYPES | {"decimal", "float", "double", "year"}
_TEXT = frozenset(("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum",
                   "set", "json", "binary", "varbinary", "tinyblob", "blob", "mediumblob",
                   "longblob"))
SHORT = 1024  # bytes a text column's value may have at most for its field to be escaped
_WIDTHS = {"binary": 1, "latin1": 1, "ascii": 1, "utf8mb3": 3, "utf8": 3, "utf8mb4": 4}


@dataclass(frozen=True)
class KeyPart:
    """A key column and how its values become tokens."""

    name: str
    kind: str  # int | char | varchar | binary | varbinary
    codec: str | None = None  # a text column's Python codec


@dataclass(frozen=True)
class LinesPlan:
    """How one source table's chunks go to one target table as lines."""

    datasource: str
    schema: str
    table: str
    push_weight: int
    keys: tuple[KeyPart, ...]  # the source key columns, in the read's key order
    sources: tuple[ReadColumn, ...]  # the source columns a line holds, in order
    targets: tuple[str, ...]  # the target columns they load into, in the same order
    enums: tuple[str, ...] = ()  # source ENUM columns (an empty value reads rows instead)
    values: bool = False  # lines hold VALUES tuples (no LOAD DATA, or it locks the table)
    # the target server's max_allowed_packet (0: not known): a tuple the statements cannot
    # carry under it reads its chunk as rows (:func:`fits`)
    packet: int = 0

    @property
    def target(self) -> Target:
        return (self.datasource, self.schema, self.table)


def plan(compiled: CompiledPipeline, facts: Callable[[Target], TableFacts], schema: str,
         table: str, columns: Sequence[ReadColumn], keys: Sequence[str]
         ) -> LinesPlan | None:
    """The lines plan of a source table's chunks keyed by ``keys``; None where its rows
    must be read as rows (see the module's list)."""
    if compiled.two_way:
        return None
    plains = compiled.plain(schema, table, tuple(keys))
    if plains is None or len(plains) != 1 or plains[0].keyless:
        return None
    mapping = plains[0]
    target = facts((mapping.datasource, mapping.schema, mapping.table))
    if target.triggers or target.ordered(mapping.target_keys) or \
            target.unkeyed(mapping.target_keys):
        return None
    loaded = loaddata.plan(target.columns, target.triggers)
    by_name = {column.name: column for column in columns}
    named = mapping.entry.map_row({name: name for name in by_name}, mapping.keys)
    if loaded is None or {name for name, _ in loaded} != set(named):
        return None  # a target column the pair does not write (or the other way round)
    sources, targets = [], []
    for name, _ in loaded:
        source, written = by_name[named[name]], target.columns[name]
        if source.data_type not in loaddata.TYPES or not source.column_type or \
                source.column_type != written.column_type or source.charset != written.charset:
            return None
        if source.charset and source.charset != "binary" and \
                source.charset not in loaddata.CODECS:
            return None
        sources.append(source)
        targets.append(name)
    parts = []
    for name in keys:
        column = by_name.get(name)
        if column is None or column.nullable:
            return None
        kind = "int" if column.data_type in INTEGER_TYPES else column.data_type
        if kind != "int" and kind not in STRING_KEYS:
            return None
        codec = loaddata.CODECS.get(column.charset or "") if kind in ("char", "varchar") \
            else None
        if kind in ("char", "varchar") and codec is None:
            return None
        parts.append(KeyPart(name, kind, codec))
    return LinesPlan(mapping.datasource, mapping.schema, mapping.table, mapping.push_weight,
                     tuple(parts), tuple(sources), tuple(targets),
                     tuple(column.name for column in sources if column.data_type == "enum"),
                     target.bulk_lock or not target.local_infile, target.packet)


def query(plan_: LinesPlan, schema: str, table: str, condition: str) -> str:
    """The chunk as one row: its row count, its lines (``\\n`` after each), and whether an
    ENUM column holds the empty value."""
    if plan_.values:
        tuple_ = ", ',', ".join(_value(column) for column in plan_.sources)
        line = f"CONCAT({_key_token(plan_.keys)}, '\\t(', {tuple_}, ')\\n')"
    else:
        fields = [_key_token(plan_.keys)] + [_field(column) for column in plan_.sources]
        line = "CONCAT(" + ", '\\t', ".join(fields) + ", '\\n')"
    empty = " OR ".join(f"{quote(name)} = ''" for name in plan_.enums) or "FALSE"
    return (f"SELECT COUNT(*), GROUP_CONCAT({line} SEPARATOR ''), "
            f"COALESCE(MAX({empty}), 0) FROM {qualified(schema, table)} WHERE {condition}")


def _key_token(keys: Sequence[KeyPart]) -> str:
    parts = []
    for part in keys:
        name = quote(part.name)
        if part.kind == "int":
            parts.append(f"CAST({name} AS BINARY)")
        elif part.kind == "binary":  # as the binlog gives it: without its zero padding
            parts.append(f"HEX(TRIM(TRAILING 0x00 FROM CAST({name} AS BINARY)))")
        else:
            parts.append(f"HEX(CAST({name} AS BINARY))")
    return parts[0] if len(parts) == 1 else "CONCAT_WS(':', " + ", ".join(parts) + ")"


def long(column: ReadColumn) -> bool:
    """Whether a text column's value may be longer than :data:`SHORT` bytes: its field goes
    as its bytes in hex (escaping by ``REPLACE`` is quadratic in the matches: MariaDB moves
    the rest of the value at each one, and 1 MiB of zero bytes took the source 27 minutes)."""
    if column.data_type not in _TEXT or column.data_type in ("enum", "set"):
        return False
    if column.data_type not in STRING_KEYS:
        return True  # TEXT, BLOB, JSON: up to 4 GiB
    found = re.search(r"\((\d+)\)", column.column_type)
    if found is None:
        return True
    return int(found.group(1)) * _WIDTHS.get(column.charset or "binary", 4) > SHORT


def head(plan_: LinesPlan) -> str:
    """The LOAD DATA statement of a plan's lines: the key token into a user variable, a
    long column's hex (:func:`long`) into one of its own, set into the column unhexed."""
    fields, sets = [KEY_VARIABLE], []
    for number, (column, name) in enumerate(zip(plan_.sources, plan_.targets, strict=True)):
        if long(column):
            fields.append(f"@setl_hex{number}")
            sets.append(f"{quote(name)} = UNHEX(@setl_hex{number})")
        else:
            fields.append(quote(name))
    return loaddata.head(plan_.schema, plan_.table, fields, sets)


def _field(column: ReadColumn) -> str:
    """A column's LOAD DATA field as SQL: its text (bytes), escaped, ``\\N`` for NULL; a
    long column's (:func:`long`) bytes in hex, which the target unhexes (:func:`head`)."""
    value = column.expression if column.data_type == "float" else quote(column.name)
    value = f"CAST({value} AS BINARY)"
    if long(column):  # (HEX is NULL past max_allowed_packet: no line, the chunk as rows)
        return f"IF({quote(column.name)} IS NULL, '\\\\N', HEX({value}))"
    if column.data_type in _TEXT:
        for char, escaped in (("\\\\", "\\\\\\\\"), ("\\t", "\\\\t"), ("\\n", "\\\\n"),
                              ("\\r", "\\\\r")):
            value = f"REPLACE({value}, '{char}', '{escaped}')"
        value = f"REPLACE({value}, CHAR(0), '\\\\0')"
    return f"IFNULL({value}, '\\\\N')"


def _value(column: ReadColumn) -> str:
    """A column's value in a VALUES tuple as SQL: numbers as their text, other values
    quoted (text as ``_binary`` literals of its bytes: any charset, read by a target column
    of the same one), a line break escaped, ``NULL`` for NULL; a long column's
    (:func:`long`) bytes as a hex literal (``X'…'``)."""
    if column.data_type in _NUMBERS:
        value = column.expression if column.data_type == "float" else quote(column.name)
        return f"IFNULL(CAST({value} AS BINARY), 'NULL')"
    if long(column):
        return (f"IF({quote(column.name)} IS NULL, 'NULL', "
                f"CONCAT('X''', HEX(CAST({quote(column.name)} AS BINARY)), ''''))")
    quoted = f"QUOTE(CAST({quote(column.name)} AS BINARY))"  # QUOTE(NULL) is NULL's text
    if column.data_type not in _TEXT:
        return quoted
    quoted = f"REPLACE(REPLACE({quoted}, '\\n', '\\\\n'), '\\r', '\\\\r')"
    return f"IF({quote(column.name)} IS NULL, 'NULL', CONCAT('_binary', {quoted}))"


def complete(count: int, lines: bytes) -> bool:
    """Whether the lines hold every row counted (``GROUP_CONCAT`` cuts at its limit)."""
    return lines.count(b"\n") == count and (not lines or lines.endswith(b"\n"))


def fits(plan_: LinesPlan, lines: bytes) -> bool:
    """Whether every VALUES tuple of the lines fits a statement under the target's
    max_allowed_packet. The source reads a chunk under its own (``group_concat_max_len``),
    which may be larger: a tuple past the target's, in a REPLACE the target refuses at every
    retry, makes the chunk go as rows instead (Load cuts a long value into pieces, or says
    what to raise). LOAD DATA lines stream to the target a packet at a time: any length."""
    space = room(plan_.packet)
    if not plan_.values or len(lines) <= space:
        return True
    return max(map(len, lines.split(b"\n"))) <= space


def token(value: Any, part: KeyPart) -> bytes | None:
    """A decoded key value as the token its line starts with; None for no value."""
    if value is None:
        return None
    if part.kind == "int":
        if type(value) is int:
            return str(value).encode()
    elif part.kind in ("char", "varchar") and isinstance(value, str):
        if part.kind == "char":
            value = value.rstrip(" ")  # the server reads CHAR without its padding
        try:
            return value.encode(part.codec or "utf-8").hex().upper().encode()
        except UnicodeEncodeError:
            pass
    elif part.kind in ("binary", "varbinary") and isinstance(value, bytes | str):
        raw = value if isinstance(value, bytes) else value.encode("utf-8")
        if part.kind == "binary":
            raw = raw.rstrip(b"\0")
        return raw.hex().upper().encode()
    raise SetlError(f"snapshot: cannot compare key column {part.name} ({part.kind}) value "
                    f"{value!r} with the rows read; a row copied might be older than the "
                    "stream's. Stop the copy (setl snapshot cancel) and report this")


def tokens(read: Read, changed: Iterable[tuple[Any, ...] | None]) -> frozenset[bytes]:
    """The tokens of the keys the stream changed inside a lines read's window (in the part
    that decodes the window's events)."""
    plan_ = read.lines
    assert plan_ is not None
    found = set()
    for key in changed:
        if key is None:  # (an insert's before image, a delete's after)
            continue
        made = [token(value, part) for value, part in zip(key, plan_.keys, strict=True)]
        if None not in made:
            found.add(b":".join(made))  # type: ignore[arg-type]
    return frozenset(found)


def units(reads: Sequence[Read], dropped: Callable[[Read], frozenset[bytes]]) -> list[Any]:
    """The LOAD DATA units of lines reads (in the node), without the lines whose key token
    ``dropped(read)`` holds."""

    found = []
    for read in reads:
        plan_ = read.lines
        assert plan_ is not None
        lines, count, left_out = read.rows, read.count, dropped(read)
        if left_out and lines:
            kept = [line for line in lines.split(b"\n")[:-1]
                    if line[:line.find(b"\t")] not in left_out]
            lines = b"".join(line + b"\n" for line in kept)
            count = len(kept)
        if not count:
            continue
        if plan_.values:
            sqls = _replaces(plan_, lines)
        else:
            head_ = head(plan_)
            sqls = [Sql(head_, rows, data=data) for rows, data in loaddata.pieces(lines)]
        # first of the table's units in the batch (see the module's "Same place")
        found.append(Unit(plan_.datasource, plan_.schema, plan_.table, plan_.push_weight, -1,
                          sqls, count, tuple(part.name for part in plan_.keys), apart=True))
    return found


def _replaces(plan_: LinesPlan, lines: bytes) -> list[Sql]:
    """Lines of VALUES tuples as multi-row REPLACE statements of about ``STATEMENT`` bytes,
    each under the target's max_allowed_packet (every tuple fits one: :func:`fits`)."""
    head = (f"REPLACE INTO {qualified(plan_.schema, plan_.table)} "
            f"({', '.join(map(quote, plan_.targets))}) VALUES ")
    space = room(plan_.packet)
    found, tuples, size = [], [], 0
    for line in lines.split(b"\n")[:-1]:
        tuple_ = line[line.find(b"\t") + 1:]
        if tuples and size + len(tuple_) + 1 > space:  # (a long tuple after short ones)
            found.append(Sql(head, len(tuples), data=b",".join(tuples), inline=True))
            tuples, size = [], 0
        tuples.append(tuple_)
        size += len(tuple_) + 1
        if size >= STATEMENT:
            found.append(Sql(head, len(tuples), data=b",".join(tuples), inline=True))
            tuples, size = [], 0
    if tuples:
        found.append(Sql(head, len(tuples), data=b",".join(tuples), inline=True))
    return found
