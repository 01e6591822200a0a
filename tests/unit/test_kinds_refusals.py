"""node/target/kinds.py check_source: which kinds of target refuse text whose values travel
as bytes (a charset setl does not decode exactly, node.charsets)."""

from __future__ import annotations

from typing import Any

import pytest

from node.target import kinds


@pytest.mark.parametrize("kind, two_way, reader", [
    ("delta", None, "the lake table"),
    ("subscription", None, "a subscription's reader"),  # its JSON took bytes for UTF-8
    ("mysql", {"a": None}, "a two-way channel's conflict check"),  # rows always 'changed'
    ("mysql", None, None),  # a database target gets the bytes as they are
])
def test_text_that_travels_as_bytes_is_refused_where_it_would_be_taken_for_text(
        monkeypatch: pytest.MonkeyPatch, kind: str, two_way: Any, reader: str | None) -> None:
    asked: list[str] = []
    for name in ("refuse_partial_rows", "refuse_cascades", "refuse_non_transactional",
                 "refuse_unsafe_tables", "refuse_stored_types"):
        monkeypatch.setattr(kinds, name, lambda *args, **kwargs: None)
    monkeypatch.setattr(kinds, "refuse_undecodable",
                        lambda compiled, source, what: asked.append(what))
    compiled = type("Compiled", (), {"pipeline_id": "c.p"})()
    kinds.check_source(kind, compiled, None, two_way=two_way)
    assert [what.split(" (")[0] for what in asked] == ([reader] if reader else [])


@pytest.mark.parametrize("two_way, expected", [
    ({"b": None}, ["refuse_folded_collisions", "refuse_unsafe_tables", "refuse_undecodable"]),
    (None, ["refuse_folded_collisions"]),  # one-way: a database target takes it as it is
])
def test_a_replicated_ddl_is_checked_again_on_a_two_way_channel(
        monkeypatch: pytest.MonkeyPatch, two_way: Any, expected: list[str]) -> None:
    """A DDL the channel replicates (ADD UNIQUE (email), CREATE TRIGGER, a column in sjis)
    can make a two-way table one the conflict check
    cannot tell apart as the write does: checked after it as at the start (only the start
    checked it, and the two sides went apart silently)."""
    called: list[str] = []
    for name in ("refuse_folded_collisions", "refuse_non_transactional",
                 "refuse_unsafe_tables", "refuse_undecodable", "refuse_stored_types",
                 "refuse_partial_rows", "refuse_cascades"):
        monkeypatch.setattr(kinds, name, (lambda n: lambda *a, **k: called.append(n))(name))
    compiled = type("Compiled", (), {"pipeline_id": "c.p"})()
    kinds.check_source("mysql", compiled, None, after_ddl=True, two_way=two_way)
    assert called == expected
