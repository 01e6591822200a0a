"""One straight-line Python function per table, row kind and columns-present bitmap.

A rows event's rows are read by a function generated here and compiled once: a loop over
the rows whose body reads each present column in order from the bytes, with no per-column
dispatch, method call or look-up left. Each row image has two paths: when none of its
columns is NULL (the common case) they are read without NULL checks, runs of fixed-width
numbers (and the length of the string after them) with one ``struct`` unpack and positions
as offsets known in advance; otherwise every column checks its NULL bit first. Only full
images reach a reader: :mod:`node.extract.decode` refuses an event whose images leave a
column out (``binlog_row_image`` MINIMAL or NOBLOB), which would be written as NULL (here
such a column would be None, as python-mysql-replication has it). The same rows code is
also wrapped in a function that takes a whole event and checks its header and bitmaps
itself: one call per event.

Generated code knows which column each of its lines reads (:attr:`RowsReader.columns_at`),
so an error names the column without costing the loop anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from node.extract import decodetypes
from node.extract.decodetypes import STRUCT_CODES, at

if TYPE_CHECKING:
    from node.extract.decode import ColumnSpec, TableSchema

INSERT, UPDATE, DELETE = "I", "U", "D"
_SIZES = {"b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "q": 8, "Q": 8, "f": 4, "d": 8}
_LENGTH_CODES = {1: "B", 2: "H", 4: "I"}  # a string's length, read with the numbers before it


@dataclass(frozen=True)
class RowsReader:
    """A compiled reader of the rows of one kind and bitmap: ``read(data, pos, end)`` gives
    the (before, after) pairs of the rows from ``pos``, which must end at ``end``;
    ``event(data, checksum)`` those of a whole event with this kind and bitmap."""

    read: Callable[[bytes, int, int], list[tuple[Any, Any]]]
    event: Callable[[bytes, bool], list[tuple[Any, Any]]]
    filename: str
    columns_at: dict[int, int]  # generated line number → index of the column it reads


def present(bitmap: bytes, count: int) -> list[int]:
    """The indexes of the columns a columns-present bitmap has."""
    return [i for i in range(count) if bitmap[i >> 3] & (1 << (i & 7))]


class _Source:
    """Lines of generated code, each remembering the column it reads."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.columns_at: dict[int, int] = {}
        self.base = 0  # added to every indent

    def add(self, indent: int, lines: list[str], column: int = -1) -> None:
        for line in lines:
            self.lines.append("    " * (indent + self.base) + line)
            if column >= 0:
                self.columns_at[len(self.lines)] = column


def build(schema: TableSchema, kind: str, bitmaps: tuple[bytes, ...], head: bytes,
          checked: Callable[[bytes, bool], Any]) -> RowsReader:
    """The reader of ``kind`` rows (INSERT, UPDATE, DELETE) whose images have ``bitmaps``
    (``head``: the event's column count and bitmaps, as bytes). Besides ``read``, it has
    ``event(data, checksum)``, the whole event in one call: it checks the header and ``head``
    itself and hands any other event to ``checked``."""
    columns = schema.columns
    ns: dict[str, Any] = {"PastEnd": decodetypes.PastEnd, "checked": checked,
                          "Undecodable": decodetypes.Undecodable,
                          "SIZE": decodetypes.struct_reader("I")}
    source = _Source()
    source.add(0, ["def read(d, p, end):", "    if p >= end:", "        return []"])
    _rows(source, columns, kind, bitmaps, ns)
    width = len(head)
    source.add(0, [
        "def event(d, checksum):",
        "    if d[5] < 30:",  # V1; V2 (MySQL) has extra data, its length counting itself
        "        pos = 28",
        "    else:",
        "        pos = 28 + (d[28] | d[29] << 8)",
        "        if pos < 30:",
        "            return checked(d, checksum)",
        f"    if d[pos:pos + {width}] != {head!r} or SIZE(d, 10)[0] != len(d) - 1:",
        "        return checked(d, checksum)",
        f"    p = pos + {width}",
        "    end = len(d) - 4 if checksum else len(d)",
        "    if p >= end:",
        "        return []"])
    _rows(source, columns, kind, bitmaps, ns)
    filename = f"<setl rows reader {schema.schema}.{schema.table} {kind} " \
               f"{b''.join(bitmaps).hex()}>"
    exec(compile("\n".join(source.lines), filename, "exec"), ns)  # our own code, from the schema
    return RowsReader(ns["read"], ns["event"], filename, source.columns_at)


def _rows(source: _Source, columns: tuple[ColumnSpec, ...], kind: str,
          bitmaps: tuple[bytes, ...], ns: dict[str, Any]) -> None:
    """The rows from ``p`` to ``end``: the first apart from the loop (most events have one
    row), then the others; they must end at ``end``."""
    if not any(present(bitmap, len(columns)) for bitmap in bitmaps):
        # rows of no column take no bytes: a sound server never writes them, and a loop
        # over them would never reach ``end``
        source.add(1, ["raise Undecodable('a rows event whose columns-present bitmaps "
                       "name no column')"])
        return
    for base, tail in ((-1, ["if p == end:", "    return [{pair}]", "out = [{pair}]",
                             "while p < end:"]),
                       (0, ["out.append({pair})"])):
        source.base = base
        images = []
        for prefix, bitmap in zip("ab", bitmaps, strict=False):
            inside = present(bitmap, len(columns))
            _image(source, columns, inside, prefix, ns)
            images.append("{" + ", ".join(
                f"{column.name!r}: {prefix}{i}" if i in inside else f"{column.name!r}: None"
                for i, column in enumerate(columns)) + "}")
        pair = {INSERT: f"(None, {images[0]})", DELETE: f"({images[0]}, None)",
                UPDATE: f"({images[0]}, {images[-1]})"}[kind]
        source.add(2, [line.replace("{pair}", pair) for line in tail])
    source.base = 0
    source.add(1, ["if p != end:", "    raise PastEnd(p - end)", "return out"])


def _image(source: _Source, columns: tuple[ColumnSpec, ...], inside: list[int], prefix: str,
           ns: dict[str, Any]) -> None:
    """One row image: its NULL bitmap, then each present column into ``{prefix}{index}``."""
    size = (len(inside) + 7) // 8
    if not size:
        return
    # the server sets the bitmap's unused high bits (MariaDB: to 1): only the image's count
    last = (1 << (len(inside) - 8 * (size - 1))) - 1  # the bits of the last byte that count
    if size == 1:
        bits = "d[p]"
        any_null = bits if last == 0xFF else f"d[p] & {last}"
    elif size <= 4:
        bits = f"int.from_bytes(d[p:p + {size}], 'little')"
        any_null = " or ".join([*(f"d[p + {k}]" for k in range(size - 1)),
                                f"d[p + {size - 1}] & {last}"])
    else:
        bits = f"int.from_bytes(d[p:p + {size}], 'little')"
        any_null = f"{bits} & {(1 << len(inside)) - 1}"
    source.add(2, [f"if {any_null}:", f"    nulls = {bits}", f"    p += {size}"])
    for bit, i in enumerate(inside):
        source.add(3, [f"if nulls & {1 << bit}:", f"    {prefix}{i} = None", "else:"])
        read, width = decodetypes.lines(columns[i], i, f"{prefix}{i}", ns)
        source.add(4, read + ([f"p += {width}"] if width else []), i)
    source.add(2, ["else:"])
    # without NULLs, positions are the last string's end (``p`` or ``q``, taking turns) plus
    # a known offset: nothing is stored per column, ``p`` is set once at the end
    base, offset = "p", size
    for run in _runs(columns, inside):
        base, offset = _fast_run(source, columns, run, prefix, ns, base, offset)
    if base != "p" or offset:
        source.add(3, [f"p = {at(base, offset)}" if base != "p" else f"p += {offset}"])


def _fast_run(source: _Source, columns: tuple[ColumnSpec, ...], run: list[int], prefix: str,
              ns: dict[str, Any], base: str, o: int) -> tuple[str, int]:
    """Columns read without NULL checks at ``base + o``: a run of fixed-width numbers (and
    the length of a string after them) in one unpack, then that string; any other column
    alone. Returns the position after them, as a base and an offset."""
    last = columns[run[-1]]
    other = "q" if base == "p" else "p"
    if len(run) == 1:
        read, width = decodetypes.lines(last, run[0], f"{prefix}{run[0]}", ns, base, o, other)
        source.add(3, read, run[0])
        return (base, o + width) if width is not None else (other, 0)
    text = run[-1] if last.type not in STRUCT_CODES else -1
    numbers = run[:-1] if text >= 0 else run
    codes = "".join(STRUCT_CODES[columns[i].type][columns[i].unsigned] for i in numbers)
    width = sum(_SIZES[code] for code in codes)
    names = [f"{prefix}{i}" for i in numbers]
    if text >= 0:
        codes += _LENGTH_CODES[decodetypes.prefix_size(last)]
        names.append("n")
    ns[f"S_{codes}"] = decodetypes.struct_reader(codes)
    source.add(3, [f"{', '.join(names)} = S_{codes}(d, {at(base, o)})"], numbers[0])
    if text < 0:
        return base, o + width
    start = at(base, o + width + decodetypes.prefix_size(last))
    source.add(3, [f"{other} = {start} + n", f"{prefix}{text} = "
                   f"{decodetypes.text_value(last, f'd[{start}:{other}]', ns)}"], text)
    return other, 0


def _runs(columns: tuple[ColumnSpec, ...], inside: list[int]) -> list[list[int]]:
    """The present columns in order: consecutive fixed-width numbers grouped, with the
    string after them when its length is 1, 2 or 4 bytes (read in the same unpack)."""
    runs: list[list[int]] = []
    for i in inside:
        kind = columns[i].type
        open_run = bool(runs) and columns[runs[-1][-1]].type in STRUCT_CODES
        if open_run and (kind in STRUCT_CODES or
                         decodetypes.prefix_size(columns[i]) in _LENGTH_CODES):
            runs[-1].append(i)  # adjacent in the row: columns left out take no bytes
        else:
            runs.append([i])
    return runs
