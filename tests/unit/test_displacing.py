"""node/snapshot/displacing.py and sourceof.other_writers: a displaced row is deleted and
asked again only where that cannot lose it for good (another pipeline writes the table) nor
go round forever (a key displaced by a second batch); a key every source table lacks is
said at WARNING."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from node.extract.freedoor import Note
from node.snapshot.displacing import Moves
from node.snapshot.door import DISPLACED_IDS, DoorQueue
from node.snapshot.sourceof import other_writers
from node.target.mysql.displaced import Moved
from shared.definitions import load_text
from shared.errors import DisplacedError
from tests.unit.etl_helpers import compiled

G = ("dst", "s", "g")


def moved(key: int, by: int) -> Moved:
    return Moved((key,), (by,), "(`slot`)")


def channels(*pipelines: tuple[str, str, list[str]]) -> list[Any]:
    """Channels ``name`` of one pipeline ``fwd`` each, src → target with ``pairs``."""
    lines = ["sources:", "  - {name: src, host: h1}", "  - {name: dst, host: h2}",
             "  - {name: other, host: h3}", "channels:"]
    for name, target, pairs in pipelines:
        lines += [f"  - name: {name}", "    pipelines:", "      - name: fwd",
                  "        source: src", f"        target: {target}", "        pairs:",
                  *(f"          - {pair}" for pair in pairs)]
    return list(load_text("\n".join(lines) + "\n", "f.yaml").channels)


@pytest.mark.parametrize(("pairs", "target", "writes"), [
    (["{source: s.t2, target: s.g}"], "dst", True),
    (["{source: s.t2, target: s.G}"], "dst", True),  # (a server may ignore the case)
    (["{source: s.t2, target: s.g}"], "other", False),  # another target database
    (["{source: s.t2, target: s.h}"], "dst", False),
    (["{source: {namespace: s, table: 're:.*'}, target: {namespace: s, table: '{table}'}}"],
     "dst", True),
    (["{source: {namespace: s, table: 're:.*'}, target: {namespace: s, table: 'ods_{table}'}}"],
     "dst", False),  # (ods_… never gives g)
    (["{source: {namespace: s, table: 't_[0-3]'}, target: {namespace: s, table: 'g_[0-3]'}}"],
     "dst", False),
    # a template's bound names must be ones its source patterns take (a review: the identity
    # template counted for every table of the datasource, pausing other channels falsely)
    (["{source: {namespace: 're:shop_\\d+', table: 're:.*'}, "
      "target: {namespace: '{schema}', table: '{table}'}}"], "dst", False),
    (["{source: {namespace: 're:s|shop_\\d+', table: 're:.*'}, "
      "target: {namespace: '{schema}', table: '{table}'}}"], "dst", True),
    (["{source: s.t9, target: {namespace: s, table: '{table}'}}"], "dst", False),
    (["{source: s.G, target: {namespace: s, table: '{table}'}}"], "dst", True),
    (["{source: {namespace: s, table: 're:t_\\d'}, target: {namespace: s, table: '{table}'}}"],
     "dst", False),
])
def test_other_pipelines_that_may_write_a_table(pairs: list[str], target: str,
                                                writes: bool) -> None:
    found = channels(("a", "dst", ["{source: s.t1, target: s.g}"]), ("b", target, pairs))
    assert other_writers(found, "a.fwd", G) == (["b.fwd"] if writes else [])
    assert other_writers(found, "b.fwd", G) == ["a.fwd"]


def test_a_range_of_targets_writes_each_of_its_names() -> None:
    found = channels(("a", "dst", ["{source: s.t1, target: s.g_2}"]), (
        "b", "dst", ["{source: {namespace: s, table: 't_[0-3]'}, "
                     "target: {namespace: s, table: 'g_[0-3]'}}"]))
    assert other_writers(found, "a.fwd", ("dst", "s", "g_2")) == ["b.fwd"]
    assert other_writers(found, "a.fwd", ("dst", "s", "g_4")) == []


def test_a_table_another_pipeline_writes_stops_the_batch_naming_everything() -> None:
    moves = Moves("a.fwd", lambda target: ["b.fwd"] if target == G else [])
    with pytest.raises(DisplacedError) as caught:
        moves.check(G, [moved(2, 1)], 7)
    message = str(caught.value)
    for part in ("s.g", "(`slot`)", "[2]", "[1]", "b.fwd", "resume"):
        assert part in message
    moves.check(("dst", "s", "h"), [moved(2, 1)], 7)  # a table only this pipeline writes


def test_a_key_displaced_by_a_second_batch_stops_it_a_chain_does_not() -> None:
    asked: list[Any] = []
    moves = Moves("a.fwd", lambda target: asked.append(target) or [])
    moves.check(G, [moved(2, 1)], 7)
    moves.check(G, [moved(2, 1)], 7)  # the same batch again (Load retries it): no repeat
    moves.check(G, [moved(3, 2)], 8)  # a chain: 1 displaces 2, 2 displaces 3
    moves.check(G, [moved(4, 3), moved(5, 3)], 9)
    with pytest.raises(DisplacedError) as caught:
        moves.check(G, [moved(2, 3)], 10)
    for part in ("s.g", "[2]", "[3]", "(`slot`)", "second time", "resume"):
        assert part in str(caught.value)
    assert asked == [G] * 5  # ZooKeeper's channels read afresh each time (a channel added
    # since the first read writes the table too: a review lost its row to a cached answer)


def test_the_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from node.snapshot import displacing
    monkeypatch.setattr(displacing, "KEPT", 3)
    moves = Moves("a.fwd", None)
    for key in range(10):
        moves.check(G, [moved(key, 100)], key)
    moves.check(G, [moved(0, 100)], 50)  # forgotten: taken as the first time
    with pytest.raises(DisplacedError):
        moves.check(G, [moved(9, 100)], 51)


def test_a_key_every_source_table_lacks_is_said(caplog: pytest.LogCaptureFixture) -> None:
    moves = Moves("a.fwd", None)
    moves.asked(G, (2,), [10, 20])
    moves.asked(G, (3,), [11, 21])
    with caplog.at_level(logging.WARNING, "setl.node.snapshot.door"):
        moves.noted([Note("missing", 10, False), Note("missing", 11, False),
                     Note("loaded", 21, False), Note("missing", 999, False)])
        assert "displaced_rows_missing" not in caplog.text  # 2: one table not served yet
        moves.noted([Note("missing", 20, False)])
    lines = [r.getMessage() for r in caplog.records if "displaced_rows_missing" in
             r.getMessage()]
    assert len(lines) == 1 and "key=[2]" in lines[0] and "s.g" in lines[0]


class Stats:
    def count(self, notes: Any, pipeline_id: str) -> None:
        pass


def test_the_door_checks_before_it_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load's hook: a stopped batch keeps no request; an asked key is awaited per table."""
    door = DoorQueue("shop.fwd", None, compiled(  # type: ignore[arg-type]
        "{source: s.t1, target: s.g}", "{source: s.t2, target: s.g}"), None,
        Stats(), feeders=lambda target: [])  # type: ignore[arg-type]
    kept: list[Any] = []
    monkeypatch.setattr(door, "ask", lambda changes: kept.extend(changes))
    door.displaced(G, ("id",), [moved(2, 1)], 4)
    ids = [int(change.after["ID"]) for change in kept]
    assert len(ids) == 2 and all(one >= DISPLACED_IDS for one in ids)
    with pytest.raises(DisplacedError):
        door.displaced(G, ("id",), [moved(2, 3)], 5)
    assert len(kept) == 2  # nothing asked for the batch stopped
    door.moves.noted([Note("missing", one, False) for one in ids])
