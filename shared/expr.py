"""A small, safe expression language for virtual columns and column merge/split.

Expressions use Python syntax, but only this part of it, checked when the definitions load
and evaluated by walking the tree here — nothing from YAML is ever given to ``eval``:

- column names of the source row, and literals (numbers, strings, true/false/null, also
  spelled True/False/None);
- ``+ - * / // %``, unary ``-``/``not``, comparisons (``== != < <= > >= in not in``),
  ``and``/``or``, ``a if condition else b``, tuples/lists as the right side of ``in``;
- the functions in :data:`FUNCTIONS` (``concat_ws(' ', first_name, last_name)``,
  ``split_part(address, ',', 0)`` …).

No attributes, subscripts, comprehensions, lambdas or keyword arguments.

Bounded: an expression is at most ``MAX_TEXT`` characters and ``MAX_DEPTH`` levels deep; no
value it makes is longer than ``MAX_VALUE`` (``'a' * 300000000`` is refused before it is
made); regular expressions run on RE2, whose time is linear in the text (``(a+)+$`` cannot
backtrack), and a pattern written in the expression is compiled when the definitions load.
"""

from __future__ import annotations

import ast
import datetime
import operator
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import re2

from shared.textcodecs import Encoded

MAX_TEXT = 4096  # characters of an expression
MAX_DEPTH = 40  # levels of nesting
MAX_VALUE = 16 * 1024 * 1024  # characters (or items) of any value an expression makes


def _text(value: Any) -> str:
    """A value as the text functions take it. Bytes (a BINARY or BLOB column's, or text in a
    charset setl reads as its bytes: sjis, big5, euckr …) have no text these functions could
    know: their Python form, ``b'…'``, would be written into the target as if it were the
    value; refused, which pauses the pipeline naming the column and the row."""
    if isinstance(value, datetime.timedelta):  # a TIME: as MySQL writes it, not Python's
        return _time_text(value)  # "1 day, 2:00:00" for 26:00:00
    if isinstance(value, Decimal):  # a DECIMAL's digits: 0E-10 for a DECIMAL(20,10)'s 0
        return format(value, "f")
    if isinstance(value, bytes | bytearray):
        raise ExpressionError(
            "a text function was given bytes (a BINARY, VARBINARY or BLOB column, or text in "
            "a charset setl reads as bytes, e.g. sjis or big5), whose text it cannot know: "
            "compute this column in a processor, which gets the bytes as they are (length() "
            "takes bytes: their count)")
    return str(value)


def _time_text(value: datetime.timedelta) -> str:
    """A TIME's text: [-]hh:mm:ss, hours past 24 as they are, a fraction where it has one."""
    micros = value // datetime.timedelta(microseconds=1)
    seconds, fraction = divmod(abs(micros), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    text = f"{'-' if micros < 0 else ''}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{text}.{fraction:06d}" if fraction else text


def _concat_ws(separator: str, *parts: Any) -> str:
    return _text(separator).join(_text(p) for p in parts if p is not None)


class ExpressionError(ValueError):
    """An expression outside the language, or one that failed on a row."""


def _bounded(value: Any) -> Any:
    if isinstance(value, str | bytes | tuple | list) and len(value) > MAX_VALUE:
        raise ExpressionError(f"a value of {len(value):,} characters is longer than "
                              f"expressions may make ({MAX_VALUE:,})")
    return value


def _replace(text: Any, old: str, new: str) -> str:
    text, old, new = _text(text), _text(old), _text(new)
    grows = (text.count(old) if old else len(text) + 1) * max(len(new) - len(old), 0)
    if len(text) + grows > MAX_VALUE:
        raise ExpressionError(f"replace would make {len(text) + grows:,} characters, more than "
                              f"expressions may make ({MAX_VALUE:,})")
    return text.replace(old, new)


def _split_part(text: Any, separator: str, index: int) -> str | None:
    if text is None:
        return None
    parts = _text(text).split(separator)
    return parts[index] if -len(parts) <= index < len(parts) else None


def _regex(pattern: Any) -> Any:
    try:
        return re2.compile(str(pattern), _QUIET)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(
            exc.args[0], bytes) else str(exc)
        raise ExpressionError(f"regular expression {str(pattern)!r}: {reason} (RE2 syntax: "
                              "no backreferences or lookaround)") from None


_QUIET = re2.Options()
_QUIET.log_errors = False  # said in the ExpressionError, not on the process's stderr


def _regex_group(text: Any, pattern: str, group: int = 1) -> str | None:
    found = None if text is None else _regex(pattern).search(_text(text))
    return found.group(group) if found else None


def _none_safe(func: Callable[..., Any]) -> Callable[..., Any]:
    return lambda value, *rest: None if value is None else func(value, *rest)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "concat": lambda *parts: "".join(_text(p) for p in parts if p is not None),
    "concat_ws": _concat_ws,
    "split_part": _split_part,
    "regex_group": _regex_group,
    "coalesce": lambda *values: next((v for v in values if v is not None), None),
    "upper": _none_safe(lambda s: _text(s).upper()),
    "lower": _none_safe(lambda s: _text(s).lower()),
    "trim": _none_safe(lambda s: _text(s).strip()),
    "replace": _none_safe(_replace),
    "substr": _none_safe(lambda s, start, length=None: _text(s)[
        start - 1:None if length is None else start - 1 + length]),
    "length": _none_safe(lambda s: len(s) if isinstance(s, bytes | bytearray) else len(_text(s))),
    "round": _none_safe(lambda x, digits=0: round(x, digits)),
    "abs": _none_safe(abs),
    "str": _none_safe(_text),
    "int": _none_safe(int),
    "decimal": _none_safe(lambda x: Decimal(str(x))),
}
_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False,
          "None": None}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_TEMPORAL = (datetime.date, datetime.timedelta)  # DATE, DATETIME, TIMESTAMP; TIME
_TIME = re2.compile(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")


def _encoded(op: ast.operator, a: Any, b: Any) -> Encoded:
    """``a + b`` or ``a * n`` of text kept as its bytes (:class:`Encoded`), which stays
    text of its charset (plain bytes are written as bytes: the target would store them
    as if they were in its column's charset); any other operation is refused."""
    if isinstance(op, ast.Add) and type(a) is type(b) is Encoded and a.charset == b.charset:
        return Encoded(bytes(a) + bytes(b), a.charset)
    if isinstance(op, ast.Mult) and ((type(a) is Encoded and isinstance(b, int)) or
                                     (type(b) is Encoded and isinstance(a, int))):
        text, times = (a, b) if type(a) is Encoded else (b, a)
        return Encoded(bytes(text) * times, text.charset)
    charset = a.charset if type(a) is Encoded else b.charset
    raise ExpressionError(
        f"text in charset {charset} (read as its bytes: setl cannot read it as characters) "
        "can only be joined with text of its own charset or repeated; compute this column "
        "in a processor, and give it back as node.charsets.Encoded(value, charset)")


def _equal(a: Any, b: Any) -> bool:
    """``a == b``, a DATE, DATETIME, TIMESTAMP or TIME compared with a string as MySQL
    compares them: as values of the temporal type, here by their text, which is one text per
    value only for a string in MySQL's own form: another ('2024-1-1') is refused. Bytes are
    never equal to a string: such a comparison is refused."""
    if isinstance(a, str) and isinstance(b, (*_TEMPORAL, bytes, bytearray)):
        a, b = b, a
    if type(a) is Encoded and isinstance(b, str) and b.isascii() and a.charset != "swe7":
        return bytes(a) == b.encode()  # text of an ASCII-keeping charset: an ENUM's 'active'
    if isinstance(a, bytes | bytearray) and isinstance(b, str):
        raise ExpressionError(
            f"bytes (a BINARY, VARBINARY or BLOB column, or text in a charset setl reads as "
            f"its bytes, e.g. sjis or big5) were compared with the text {b!r}, which they "
            "never equal; compare them with bytes (b'...'), as the column holds them")
    if not (isinstance(a, _TEMPORAL) and isinstance(b, str)):
        return bool(a == b)
    try:
        canonical = _text(_temporal(b, type(a))) == b
    except ValueError:
        canonical = False
    if not canonical:
        raise ExpressionError(
            f"{_text(a)!r} (a {type(a).__name__} value) was compared with {b!r}, which is not "
            "written as MySQL writes such a value (e.g. '2024-01-05', '2024-01-05 "
            "09:30:00', '-01:00:00'; no zero fraction); write the literal that way")
    return _text(a) == b


def _temporal(text: str, kind: type) -> Any:
    """A string read as a value of a temporal type (ValueError if it is not one)."""
    if issubclass(kind, datetime.datetime):
        return datetime.datetime.fromisoformat(text)
    if issubclass(kind, datetime.date):
        return datetime.date.fromisoformat(text)
    found = _TIME.fullmatch(text)
    if not found:
        raise ValueError(text)
    sign, hours, minutes, seconds, fraction = found.groups()
    value = datetime.timedelta(hours=int(hours), minutes=int(minutes), seconds=int(seconds),
                               microseconds=int((fraction or "0").ljust(6, "0")))
    return -value if sign else value


_COMPARE = {ast.Eq: _equal, ast.NotEq: lambda a, b: not _equal(a, b), ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.In: lambda a, b: _within(a, b), ast.NotIn: lambda a, b: not _within(a, b),
            ast.Is: operator.is_, ast.IsNot: operator.is_not}


def _within(a: Any, b: Any) -> bool:
    """``a in b``; a temporal value in a tuple of strings compared as :func:`_equal` does."""
    if isinstance(b, tuple) and isinstance(a, (*_TEMPORAL, bytes, bytearray)):
        return any(_equal(a, item) for item in b)
    return a in b


def parse(text: str) -> ast.expr:
    """The checked tree of an expression; raises :class:`ExpressionError`."""
    if len(text) > MAX_TEXT:
        raise ExpressionError(f"an expression of {len(text):,} characters is longer than "
                              f"{MAX_TEXT:,}; move the logic into a processor")
    if "\x00" in text:
        raise ExpressionError("an expression cannot hold the character U+0000")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        raise ExpressionError(f"invalid expression {text[:200]!r}: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"invalid expression {text[:60]!r}…: nested too deeply "
                              f"(at most {MAX_DEPTH} levels)") from None
    if _depth(tree) > MAX_DEPTH:
        raise ExpressionError(f"invalid expression {text[:60]!r}: nested too deeply (at most "
                              f"{MAX_DEPTH} levels)")
    for node in ast.walk(tree):
        problem = _problem(node)
        if problem:
            raise ExpressionError(f"invalid expression {text[:200]!r}: {problem}")
        if isinstance(node, ast.Call) and node.func.id == "regex_group" and \
                len(node.args) > 1 and isinstance(node.args[1], ast.Constant):  # type: ignore[attr-defined]
            _regex(node.args[1].value)
    return tree


def columns_read(tree: ast.expr) -> frozenset[str]:
    """The column names an expression reads (not its functions' names nor its constants)."""
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return frozenset(node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
                     and id(node) not in called and node.id not in _NAMES)


def _depth(tree: ast.AST) -> int:
    """The tree's depth, without recursion (a deep tree is what is being measured)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _problem(node: ast.AST) -> str | None:
    allowed = (ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
               ast.IfExp, ast.Call, ast.Tuple, ast.List, ast.Load, ast.operator, ast.unaryop,
               ast.boolop, ast.cmpop)
    if not isinstance(node, allowed):
        return f"{type(node).__name__.lower()} is not allowed (only columns, literals, " \
               "operators, 'if … else' and the listed functions)"
    if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
        return f"operator {type(node.op).__name__} is not allowed"
    if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.USub | ast.UAdd | ast.Not):
        return f"operator {type(node.op).__name__} is not allowed"
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            return f"{type(node.func).__name__.lower()} is not allowed (call a listed function)"
        if node.func.id not in FUNCTIONS:
            return f"unknown function {node.func.id!r} (known: {', '.join(sorted(FUNCTIONS))})"
        if node.keywords:
            return "keyword arguments are not allowed"
    return None


def evaluate(tree: ast.expr, row: Mapping[str, Any]) -> Any:
    """The expression's value on a row (column name → value)."""
    match tree:
        case ast.Constant(value=value):
            return value
        case ast.Name(id=name):
            if name in row:
                return row[name]
            if name in _NAMES:
                return _NAMES[name]
            raise ExpressionError(f"unknown column {name!r}")
        case ast.BinOp(left=left, op=op, right=right):
            a, b = evaluate(left, row), evaluate(right, row)
            if a is None or b is None:
                return None  # as in SQL: NULL in, NULL out
            if isinstance(op, ast.Add) and (isinstance(a, str) or isinstance(b, str)):
                return _bounded(_text(a) + _text(b))  # a TIME's, a DECIMAL's: MySQL's text
            if isinstance(op, ast.Mult) and ((isinstance(a, int) and isinstance(
                    b, str | bytes | tuple | list)) or (isinstance(b, int) and isinstance(
                    a, str | bytes | tuple | list))):
                size = len(a if isinstance(b, int) else b) * (b if isinstance(b, int) else a)
                if size > MAX_VALUE:
                    raise ExpressionError(f"a value of {size:,} characters is longer than "
                                          f"expressions may make ({MAX_VALUE:,})")
            if type(a) is Encoded or type(b) is Encoded:
                return _encoded(op, a, b)
            return _BINARY[type(op)](a, b)
        case ast.UnaryOp(op=op, operand=operand):
            value = evaluate(operand, row)
            if isinstance(op, ast.Not):
                return not value
            return None if value is None else (-value if isinstance(op, ast.USub) else +value)
        case ast.BoolOp(op=op, values=values):
            result: Any = None
            for item in values:
                result = evaluate(item, row)
                if bool(result) is isinstance(op, ast.Or):
                    return result
            return result
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            a = evaluate(left, row)
            for op, right in zip(ops, comparators, strict=True):
                b = evaluate(right, row)
                if not _COMPARE[type(op)](a, b):
                    return False
                a = b
            return True
        case ast.IfExp(test=test, body=body, orelse=orelse):
            return evaluate(body if evaluate(test, row) else orelse, row)
        case ast.Call(func=ast.Name(id=name), args=args):
            return _bounded(FUNCTIONS[name](*(evaluate(arg, row) for arg in args)))
        case ast.Tuple(elts=items) | ast.List(elts=items):
            return tuple(evaluate(item, row) for item in items)
    raise ExpressionError(f"cannot evaluate {ast.dump(tree)}")
