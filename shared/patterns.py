"""Name patterns for namespaces (schemas) and tables: SINGLE, MULTI and WILDCARD.

- SINGLE   ``orders``          one name: any name MySQL/MariaDB allows (``my-db``, ``表``,
           `` `t[1]` ``        ``order items``); in backticks it is taken literally, which a
                               name holding ``[``/``]`` or starting with ``re:`` needs.
- MULTI    ``orders_[0-15]``   a numbered family; zero padding of the lower bound is kept,
                               so ``orders_[00-15]`` means ``orders_00`` … ``orders_15``.
- WILDCARD ``re:order_\\d+``   a regular expression that must match the whole name.
- TEMPLATE ``ods_{table}``     a target name made from the matched source name: ``{schema}``
                               and ``{table}`` stand for the source's schema and table, so
                               ``{namespace: "re:shop_.*", table: "re:.*"}`` →
                               ``{namespace: "{schema}", table: "{table}"}`` copies a family of
                               databases under the same names, tables created later included.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from shared import identifiers
from shared.errors import ConfigError

_MULTI = re.compile(
    r"(?P<prefix>[^\[\]`]*)\[(?P<low>\d+)-(?P<high>\d+)\](?P<suffix>[^\[\]`]*)")
WILDCARD_PREFIX = "re:"
TEMPLATE_FIELDS = ("schema", "table")
# the server's own schemas and setl's: a family or an expression never takes them
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys", "retl")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


class PatternKind(enum.Enum):
    SINGLE = "SINGLE"
    MULTI = "MULTI"
    WILDCARD = "WILDCARD"
    TEMPLATE = "TEMPLATE"


@dataclass(frozen=True)
class NamePattern:
    """A parsed name pattern; ``text`` is what the user wrote."""

    text: str
    kind: PatternKind
    prefix: str = ""
    suffix: str = ""
    low: int = 0
    high: int = 0
    width: int = 0  # digits of zero padding, 0 when unpadded
    literal: str = ""  # the name a SINGLE stands for (``text`` unquoted); else ``text``

    def __post_init__(self) -> None:
        if not self.literal:
            object.__setattr__(self, "literal", self.text)

    @classmethod
    def parse(cls, text: str) -> NamePattern:
        """Parse ``text``; raise ConfigError with a one-line reason when it is not a pattern."""
        if not isinstance(text, str) or not text:
            raise ConfigError("expected a table or schema name, got an empty value")
        if identifiers.is_quoted(text):
            return cls._single(text, identifiers.unquote(text))
        if text.startswith(WILDCARD_PREFIX):
            expression = text[len(WILDCARD_PREFIX):]
            try:
                re.compile(expression)
            except re.error as exc:
                raise ConfigError(f"invalid regular expression {expression!r}: {exc}") from None
            if not expression:
                raise ConfigError("empty regular expression after 're:'")
            return cls(text, PatternKind.WILDCARD)
        if "{" in text or "}" in text:
            fields = _PLACEHOLDER.findall(text)
            stray = "{" in _PLACEHOLDER.sub("", text) or "}" in _PLACEHOLDER.sub("", text)
            if stray or not fields or any(field not in TEMPLATE_FIELDS for field in fields):
                raise ConfigError(
                    f"invalid template {text!r}: {{schema}} and {{table}} stand for the source's "
                    "names, e.g. ods_{table}; a name that holds { or } goes in backticks")
            return cls(text, PatternKind.TEMPLATE)
        if "[" in text or "]" in text:
            found = _MULTI.fullmatch(text)
            if not found:
                raise ConfigError(
                    f"invalid numbered pattern {text!r}: write it as prefix[LOW-HIGH]suffix, "
                    "e.g. orders_[0-15] or orders_[00-15] for zero padding; a name that holds "
                    "[ or ] goes in backticks, e.g. `t[1]`")
            low_text, high_text = found["low"], found["high"]
            low, high = int(low_text), int(high_text)
            if low > high:
                raise ConfigError(f"invalid numbered pattern {text!r}: range {low}-{high} is empty")
            width = len(low_text) if len(low_text) > 1 and low_text.startswith("0") else 0
            pattern = cls(text, PatternKind.MULTI, found["prefix"], found["suffix"], low, high,
                          width)
            for name in (pattern.name_at(low), pattern.name_at(high)):
                if identifiers.problem(name):
                    raise ConfigError(f"invalid numbered pattern {text!r}: "
                                      f"{identifiers.problem(name)}")
            return pattern
        return cls._single(text, text)

    @classmethod
    def _single(cls, text: str, name: str) -> NamePattern:
        found = identifiers.problem(name)
        if found:
            raise ConfigError(f"invalid name {text!r}: {found}")
        return cls(text, PatternKind.SINGLE, literal=name)

    @property
    def specificity(self) -> int:
        """Higher wins when several pairs match one table: SINGLE > MULTI > WILDCARD."""
        return {PatternKind.SINGLE: 2, PatternKind.MULTI: 1, PatternKind.WILDCARD: 0,
                PatternKind.TEMPLATE: 0}[self.kind]

    def names(self) -> list[str]:
        """Every concrete name of a SINGLE or MULTI pattern (a WILDCARD has no finite list)."""
        if self.kind is PatternKind.SINGLE:
            return [self.literal]
        if self.kind is PatternKind.MULTI:
            return [self.name_at(index) for index in range(self.low, self.high + 1)]
        raise ValueError(f"a {self.kind.value.lower()} pattern {self.text!r} has no finite list "
                         "of names")

    def name_at(self, index: int) -> str:
        """The concrete name with number ``index`` of a MULTI pattern."""
        return f"{self.prefix}{index:0{self.width}d}{self.suffix}" if self.width else \
            f"{self.prefix}{index}{self.suffix}"

    def index_of(self, name: str) -> int | None:
        """The number a MULTI pattern gives ``name``, or None when it does not match."""
        if self.kind is not PatternKind.MULTI:
            return None
        if not (name.startswith(self.prefix) and name.endswith(self.suffix)):
            return None
        digits = name[len(self.prefix):len(name) - len(self.suffix) if self.suffix else None]
        if not (digits.isascii() and digits.isdigit()):
            return None
        index = int(digits)
        # the name must be written exactly as name_at writes it: padded or not, no other way
        if not self.low <= index <= self.high or self.name_at(index) != name:
            return None
        return index

    def render(self, schema: str, table: str) -> str:
        """A TEMPLATE's name for the matched source ``schema.table``."""
        name = self.text.replace("{schema}", schema).replace("{table}", table)
        found = identifiers.problem(name)
        if found:
            raise ConfigError(f"template {self.text!r} for {schema}.{table}: {found}")
        return name

    def sources_of(self, name: str) -> list[dict[str, str]]:
        """The source names a TEMPLATE renders as ``name``: each a mapping of the fields it
        holds (``schema``, ``table``) to a value; several when two fields split ``name``
        more than one way (``{schema}_{table}``), none when ``name`` does not fit."""
        pieces = _PLACEHOLDER.split(self.text)  # literal, field, literal, …, literal
        found: list[dict[str, str]] = []

        def walk(at: int, index: int, bound: dict[str, str]) -> None:
            if not name.startswith(pieces[index], at):
                return
            at += len(pieces[index])
            if index == len(pieces) - 1:
                if at == len(name) and bound not in found:
                    found.append(bound)
                return
            field = pieces[index + 1]
            if field in bound:  # a field written twice stands for one value
                if name.startswith(bound[field], at):
                    walk(at + len(bound[field]), index + 2, bound)
                return
            for end in range(at + 1, len(name) + 1):
                walk(end, index + 2, {**bound, field: name[at:end]})

        if self.kind is PatternKind.TEMPLATE:
            walk(0, 0, {})
        return found

    def matches(self, name: str) -> bool:
        if self.kind is PatternKind.TEMPLATE:
            return False  # a template names targets only
        if self.kind is PatternKind.SINGLE:
            return name == self.literal
        if self.kind is PatternKind.MULTI:
            return self.index_of(name) is not None
        return re.fullmatch(self.text[len(WILDCARD_PREFIX):], name) is not None

    def matches_schema(self, name: str) -> bool:
        """Whether a namespace pattern takes schema ``name``: the server's own schemas and
        setl's ``retl`` only when named (``re:.*`` would otherwise copy a source's
        ``retl.retl_position`` rows over the target's positions)."""
        if name in SYSTEM_SCHEMAS and self.kind is not PatternKind.SINGLE:
            return False
        return self.matches(name)

    @property
    def size(self) -> int | None:
        """How many names the pattern stands for (None for a WILDCARD)."""
        if self.kind is PatternKind.SINGLE:
            return 1
        if self.kind is PatternKind.MULTI:
            return self.high - self.low + 1
        return None

    def __str__(self) -> str:
        return self.text
