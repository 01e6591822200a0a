"""Pipelines for the tests of node/extract/etl.py (and of what compiles one): a pipeline src →
dst defined by its pairs as YAML, compiled, and a change through it."""

from __future__ import annotations

from typing import Any

from node.changes import ChangeType, RowChange, TargetChange
from node.extract.etl import CompiledPipeline, transform
from shared.definitions import load_text
from shared.model import Pipeline

PIPELINE_ID = "shop.fwd"


def pipeline(*pairs: str, options: str = "") -> Pipeline:
    """A pipeline src → dst with ``pairs`` given as YAML flow mappings."""
    lines = [
        "sources:",
        "  - {name: src, host: h1}",
        "  - {name: dst, host: h2}",
        "  - {name: other, host: h3}",
        "channels:",
        "  - name: shop",
        "    pipelines:",
        "      - name: fwd",
        "        source: src",
        "        target: dst",
        *(f"        {option}" for option in options.splitlines() if option),
        "        pairs:",
        *(f"          - {pair}" for pair in pairs),
    ]
    definitions = load_text("\n".join(lines) + "\n", "f.yaml")
    return definitions.channels[0].pipelines[0]


def compiled(*pairs: str, options: str = "") -> CompiledPipeline:
    return CompiledPipeline.compile(PIPELINE_ID, 3, pipeline(*pairs, options=options))


def insert(schema: str, table: str, row: dict[str, Any],
           keys: tuple[str, ...] = ("id",)) -> RowChange:
    return RowChange(schema, table, ChangeType.INSERT, keys, None, row)


def targets(c: CompiledPipeline, schema: str, table: str) -> list[str]:
    return [f"{p.pair.target.datasource}:{p.pair.target.namespace}.{p.pair.target.table}"
            for p in c.pairs_for(schema, table)]


def one(c: CompiledPipeline, change: RowChange, seq: int = 1) -> TargetChange:
    found = list(transform(c, seq, change))
    assert len(found) == 1, found
    return found[0]
