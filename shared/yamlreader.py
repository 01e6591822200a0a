"""Read a YAML document field by field, keeping line numbers for every error.

The definition loader and the daemon configuration loader are written against this small
reader: each field is asked for with its expected kind; what is wrong is collected as a
:class:`ConfigIssue` (file, line, dotted path, message) instead of raising at the first one,
and keys nobody asked for are reported as unknown when a mapping is closed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import yaml

from shared.errors import ConfigError, ConfigIssue

T = TypeVar("T")
MISSING: Any = object()


class Issues:
    """Collects the issues of one file."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.items: list[ConfigIssue] = []

    def add(self, node: yaml.Node | None, path: str, message: str) -> None:
        line = node.start_mark.line + 1 if node is not None else 0
        self.items.append(ConfigIssue(self.file, line, path, message))

    def raise_if_any(self) -> None:
        if self.items:
            raise ConfigError(sorted(self.items, key=lambda issue: issue.line))


MAX_EXPANDED = 200_000  # values a document may hold with its aliases written out


def parse(text: str, file: str) -> tuple[yaml.Node | None, Issues]:
    """Compose ``text`` into a node tree; a syntax error becomes an issue with its line."""
    issues = Issues(file)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        size = _expanded(root)
        if size > MAX_EXPANDED:  # aliases of aliases: read once per use, ~n^k work
            issues.add(root, "", f"its YAML aliases (*name) expand to {size:,} values, more "
                       f"than {MAX_EXPANDED:,}; write the values out")
            return None, issues
        return root, issues
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        problem = exc.problem or exc.context
        issues.items.append(ConfigIssue(file, line, "", f"not valid YAML: {problem}"))
    except yaml.reader.ReaderError as exc:  # a control character: a position but no mark
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        line = text.count("\n", 0, exc.position) + 1
        issues.items.append(ConfigIssue(file, line, "", f"not valid YAML: character #x{code:04x} "
                                        "is not allowed; remove it"))
    return None, issues


def _expanded(root: yaml.Node | None) -> int:
    """How many values the document holds with every alias (``*name``) written out, counted
    without writing them out (each node's size once)."""
    if root is None:
        return 0
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = [part for pair in node.value for part in pair] \
            if isinstance(node, yaml.MappingNode) else \
            list(node.value) if isinstance(node, yaml.SequenceNode) else []
        if children_done or not children:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


class Observer:
    """What a reader asks of the documents it reads while observed: every key (its path with
    list indexes as ``[]``), whether it is required, its default, and the kinds its values
    were read as. The configuration reference is generated from it (``scripts/reference.py``):
    the keys, kinds and defaults are the readers' own."""

    def __init__(self) -> None:
        self.keys: dict[str, dict[str, Any]] = {}

    def key(self, path: str, required: bool = False, default: Any = MISSING) -> None:
        entry = self.keys.setdefault(_pattern(path), {"required": False, "defaults": [],
                                                      "kinds": [], "items": []})
        entry["required"] |= required
        if default is not MISSING and default not in entry["defaults"]:
            entry["defaults"].append(default)

    def kind(self, path: str, kind: str) -> None:
        pattern = _pattern(path)
        entry, kinds = self.keys.get(pattern), "kinds"
        if entry is None and pattern.endswith("[]"):  # an element: the list's items' kind
            entry, kinds = self.keys.get(pattern[:-2]), "items"
        if entry is not None and kind not in entry[kinds]:
            entry[kinds].append(kind)


_observer: Observer | None = None


@contextmanager
def observed() -> Iterator[Observer]:
    """Observe every document read in the block (one at a time: the reference generator)."""
    global _observer
    _observer = Observer()
    try:
        yield _observer
    finally:
        _observer = None


def _pattern(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def _seen(path: str, kind: str) -> None:
    if _observer is not None:
        _observer.kind(path, kind)


def describe(node: yaml.Node) -> str:
    """How an unexpected value is shown: a scalar as written, a collection by its kind."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node.tag.endswith(":null"):
        return "nothing"
    return f'"{node.value}"'


def scalar(node: yaml.Node) -> Any:
    """The Python value of a scalar node (int, float, bool, str, date or None).

    An unknown tag (``!foo x``) or an impossible value (``2024-13-45``) gives the text as
    written. A fresh constructor each time: a shared one keeps every node it ever built.
    """
    try:
        return yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError):
        return node.value


def plain(node: yaml.Node) -> Any:
    """The node as plain data (dicts, lists, scalars; dates as their text), for JSON."""
    if isinstance(node, yaml.MappingNode):
        return {str(scalar(key)): plain(value) for key, value in node.value}
    if isinstance(node, yaml.SequenceNode):
        return [plain(item) for item in node.value]
    value = scalar(node)
    return value if value is None or isinstance(value, bool | int | float | str) else node.value


class Field:
    """One value in the document, with its path; conversions report into ``issues``."""

    def __init__(self, node: yaml.Node, path: str, issues: Issues) -> None:
        self.node, self.path, self.issues = node, path, issues

    def fail(self, message: str) -> Any:
        self.issues.add(self.node, self.path, message)
        return MISSING

    def expected(self, what: str) -> Any:
        return self.fail(f"expected {what}, got {describe(self.node)}")

    def _scalar(self) -> Any:
        return scalar(self.node) if isinstance(self.node, yaml.ScalarNode) else MISSING

    def string(self, check: Callable[[str], str | None] | None = None,
               empty: bool = False) -> Any:
        _seen(self.path, "text")
        value = self._scalar()
        if value is not None and value is not MISSING and not isinstance(value, str):
            value = self.node.value  # a bare number, yes/no or a date is fine text as written
        if not isinstance(value, str) or (value == "" and not empty):
            return self.expected("a non-empty string")
        problem = check(value) if check else None
        return self.fail(problem) if problem else value

    def integer(self, low: int | None = None, high: int | None = None) -> Any:
        value = self._scalar()
        wanted = _integer_phrase(low, high)
        _seen(self.path, wanted)
        if not isinstance(value, int) or isinstance(value, bool):
            return self.expected(wanted)
        if (low is not None and value < low) or (high is not None and value > high):
            return self.expected(wanted)
        return value

    def boolean(self) -> Any:
        _seen(self.path, "true or false")
        value = self._scalar()
        return value if isinstance(value, bool) else self.expected("true or false")

    def choice(self, options: list[str]) -> Any:
        _seen(self.path, "one of " + ", ".join(options))
        value = self._scalar()
        if isinstance(value, str) and value.lower() in options:
            return value.lower()
        return self.expected("one of " + ", ".join(options))

    def items(self) -> Iterator[Field]:
        """The elements of a list (an error, and nothing, when this is not a list)."""
        _seen(self.path, "a list")
        if not isinstance(self.node, yaml.SequenceNode):
            self.expected("a list")
            return
        for index, child in enumerate(self.node.value):
            yield Field(child, f"{self.path}[{index}]", self.issues)

    def mapping(self) -> Mapping | None:
        _seen(self.path, "a mapping")
        if not isinstance(self.node, yaml.MappingNode):
            self.expected("a mapping")
            return None
        return Mapping(self.node, self.path, self.issues)

    def is_mapping(self) -> bool:
        return isinstance(self.node, yaml.MappingNode)

    def is_list(self) -> bool:
        return isinstance(self.node, yaml.SequenceNode)


def _integer_phrase(low: int | None, high: int | None) -> str:
    if high is None:
        if low is None:
            return "an integer"
        return {1: "a positive integer", 0: "a non-negative integer"}.get(
            low, f"an integer of at least {low}")
    if low is None:
        return f"an integer of at most {high}"
    return f"an integer from {low} to {high}"


class Mapping:
    """A YAML mapping read key by key; ``close()`` reports every key nobody asked for."""

    def __init__(self, node: yaml.MappingNode, path: str, issues: Issues) -> None:
        self.node, self.path, self.issues = node, path, issues
        self.entries: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        self.used: set[str] = set()
        for key_node, value_node in node.value:
            key = str(scalar(key_node)) if isinstance(key_node, yaml.ScalarNode) else "?"
            if key in self.entries:
                issues.add(key_node, self._child(key), "duplicate key")
                continue
            self.entries[key] = (key_node, value_node)

    def _child(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.entries and not self.entries[key][1].tag.endswith(":null")

    def field(self, key: str, required: bool = False) -> Field | None:
        """The field at ``key``; None (and an issue if required) when absent or null."""
        self.used.add(key)
        if _observer is not None:
            _observer.key(self._child(key), required)
        if not self.has(key):
            if required:
                self.issues.add(self.node, self._child(key), "required field is missing")
            return None
        return Field(self.entries[key][1], self._child(key), self.issues)

    def get(self, key: str, read: Callable[[Field], T], default: T = MISSING,
            required: bool = False) -> T:
        """Read ``key`` with ``read`` (e.g. ``Field.string``); ``default`` when absent."""
        found = self.field(key, required=required)
        if _observer is not None and not required:
            _observer.key(self._child(key), default=default)
        if found is None:
            return default
        value = read(found)
        return default if value is MISSING else value

    def close(self) -> None:
        known = sorted(self.used)
        for key, (key_node, _) in self.entries.items():
            if key in self.used:
                continue
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
            self.issues.add(key_node, self._child(key), f"unknown key{hint}")
