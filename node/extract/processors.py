"""User code in a pair: processors (``module:function``) and virtual columns.

A **processor** gets one row change as a plain dict and returns it (changed or not), a list
of changes, or None (the change is dropped)::

    {"schema": "shop", "table": "orders", "type": "I" | "U" | "D",
     "keys": ["id"], "before": {...} | None, "after": {...} | None}

Modules are executed only from their file in the processor directories of the node's
configuration (:mod:`shared.confinement`: ``conf/processors/`` of the installation, the
directories in ``$SETL_PROCESSORS_PATH`` and the node's ``security.processor_dirs``), never
any installed module nor one named like it, and no name starting with ``_``. The node checks
a pipeline's processors when it starts (``node.extract.etl``) and again where one is loaded, in the
node and in each Spark task. A **virtual column** is a target column filled by a constant, a
safe expression (:mod:`shared.expr`) over the source row, or a processor
``module:function(row) -> value``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from node.changes import ChangeType, Row, RowChange
from shared import confinement, expr
from shared.errors import TransformError
from shared.model import VirtualColumn


def load(name: str) -> Callable[..., Any]:
    """The callable ``module:function`` under this process's rules (a Spark worker gets the
    node's with the job); imported once per process and rules."""
    return _load(name, confinement.current())


@functools.cache
def _load(name: str, rules: confinement.Confinement) -> Callable[..., Any]:
    function = name.partition(":")[2]
    try:
        module = rules.load_module(name)
    except ImportError as exc:
        raise TransformError(f"processor {name}: cannot load it: {exc}") from None
    except Exception as exc:  # the module's own code failed while it was imported
        raise TransformError(f"processor {name}: importing its module failed: "
                             f"{type(exc).__name__}: {exc}") from None
    found = getattr(module, function, None)
    if found is None:
        raise TransformError(f"processor {name}: its module has no {function}")
    # only a function the module itself defines: not one it imported (`from subprocess
    # import getoutput` would make tools:getoutput run a shell command built from row data),
    # nor a class, a builtin or another callable object
    if not inspect.isfunction(found) or found.__module__ != module.__name__:
        raise TransformError(
            f"processor {name}: {function} is not a function defined in {module.__name__} "
            f"(it is {_what(found)}); a processor must be a 'def {function}(change)' of that "
            "module")
    return found


def _what(found: Any) -> str:
    origin = getattr(found, "__module__", None)
    kind = "a function" if inspect.isfunction(found) else "a class" if inspect.isclass(found) \
        else "a builtin" if inspect.isbuiltin(found) else f"a {type(found).__name__}"
    return f"{kind} from {origin}" if origin else kind


def as_dict(change: RowChange) -> dict[str, Any]:
    """The change as a processor gets it: its images copied, so a processor that edits them
    in place (the documented style) changes only what it returns, never the rows a fan-out's
    other pairs write from the same change."""
    return {"schema": change.schema, "table": change.table, "type": change.type.value,
            "keys": list(change.keys),
            "before": None if change.before is None else dict(change.before),
            "after": None if change.after is None else dict(change.after)}


def from_dict(value: Any, original: RowChange) -> RowChange:
    if not isinstance(value, dict):
        raise TypeError(f"a processor returns a change dict, a list of them or None, "
                        f"got {type(value).__name__}")
    return RowChange(value.get("schema", original.schema), value.get("table", original.table),
                     ChangeType(value.get("type", original.type.value)),
                     tuple(value.get("keys", original.keys)), value.get("before"),
                     value.get("after"), commit_ts_ms=original.commit_ts_ms)


def run_processor(name: str, change: RowChange, where: str) -> list[RowChange]:
    """The changes a processor makes of one change; its errors name pipeline, pair and key."""
    try:
        result = load(name)(as_dict(change))
        if result is None:
            return []
        items = result if isinstance(result, list) else [result]
        return [from_dict(item, change) for item in items]
    except TransformError:
        raise
    except Exception as exc:
        raise TransformError(f"{where}: processor {name} failed on key {change.key()!r}: "
                             f"{type(exc).__name__}: {exc}{_key_alone(change, exc)}") from None


def _key_alone(change: RowChange, exc: Exception) -> str:
    """What a processor's KeyError on a delete whose before image holds the key columns
    alone means, and what to do: a free-door or verify --repair ``D`` gives it no other
    column (:func:`shared.keyfillers.processor_key_notes` noted it at apply)."""
    before = change.before
    if not isinstance(exc, KeyError) or change.type is not ChangeType.DELETE or \
            before is None or not change.keys or not set(before) <= set(change.keys):
        return ""
    return (f"; the row it was given held only the key columns ({', '.join(change.keys)}), "
            "as a delete asked through the free door (a 'D' request, or verify --repair's) "
            "gives it: the key alone as its before image. Make the processor tolerate a "
            "key-only row (read other columns with row.get(...), or return the change as it "
            "is when a column is missing) and resume the channel: the request is served "
            "again. Where it computes the target's key from that column it cannot for such "
            "a request: delete that row on the target by hand and remove the request from "
            "retl.retl_pending and retl.retl_buffer instead")


@dataclass(frozen=True)
class Filler:
    """A compiled virtual column."""

    name: str
    constant: Any = None
    tree: Any = None  # a checked expression tree
    processor: str | None = None

    @classmethod
    def of(cls, column: VirtualColumn) -> Filler:
        if column.expression is not None:
            return cls(column.name, tree=expr.parse(column.expression))
        if column.processor is not None:
            return cls(column.name, processor=column.processor)
        return cls(column.name, constant=column.value)

    def value(self, row: Row) -> Any:
        if self.tree is not None:
            return expr.evaluate(self.tree, row)
        if self.processor is not None:
            return load(self.processor)(dict(row))
        return self.constant


def fill(fillers: tuple[Filler, ...], source: Row, target: Row, where: str,
         key: tuple[Any, ...]) -> Row:
    """The target row with its virtual columns, computed from the source row."""
    for filler in fillers:
        try:
            target[filler.name] = filler.value(source)
        except Exception as exc:
            raise TransformError(f"{where}: virtual column {filler.name} failed on key "
                                 f"{key!r}: {type(exc).__name__}: {exc}") from None
    return target
