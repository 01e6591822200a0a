"""A batch's statements sent to a target together: one multi-statement query for what can
go in one, and the target's error named with the table of the statement that failed."""

from __future__ import annotations

from typing import Any

import pymysql

from node.jobs import Unit

TOGETHER_BYTES = 1 << 20  # a multi-statement query's text at most (a statement may be more)


class Together:
    """Statements of a batch's transaction that go to the target as one multi-statement query
    (up to ``TOGETHER_BYTES``): a caught-up batch of a few tables was ~11 round trips (lock,
    a DELETE and an INSERT per table, position, COMMIT), each a wake-up of the node and of
    the target; now 2 (the lock, then the rest)."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.queued: list[tuple[Unit | None, str]] = []
        self.size = 0

    def add(self, unit: Unit | None, text: str) -> None:
        if self.queued and self.size + len(text) > TOGETHER_BYTES:
            self.send()
        self.queued.append((unit, text))
        self.size += len(text)

    def send(self) -> None:
        """The queued statements as one query; an error names the table of the statement
        that failed (the server runs none after it)."""
        queued, self.queued, self.size = self.queued, [], 0
        if not queued:
            return
        done = 0
        try:
            self.cursor.execute(";\n".join(text for _, text in queued))
            done = 1
            while self.cursor.nextset():
                done += 1
        except pymysql.MySQLError as exc:
            unit = queued[min(done, len(queued) - 1)][0]
            if unit is None:
                raise
            raise in_table(exc, unit) from None


def in_table(exc: pymysql.MySQLError, unit: Unit) -> pymysql.MySQLError:
    """The target's error, naming the table: same class and code (retries go by them)."""
    if len(exc.args) != 2:
        return exc
    return type(exc)(exc.args[0], f"table {unit.schema}.{unit.table}: {exc.args[1]}")


def first(what: Any, keys: tuple[str, ...]) -> str:
    """The first key or row a statement writes, for a message (empty when not kept): a
    row of a keyed table by its key."""
    if not what:
        return ""
    first = what[0]
    if keys and isinstance(first, dict):
        first = tuple(first.get(key) for key in keys)
    return f" {first!r}"
