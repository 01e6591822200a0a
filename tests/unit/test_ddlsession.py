"""The source session a DDL is replayed under (node.ddlsession): its statement time and
AUTO_INCREMENT step go with it, and nothing of it stays on the load connection after."""

from __future__ import annotations

import re
import types
import zoneinfo
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from node import ddlsession

FACTS = types.SimpleNamespace(where="source s1", collation=lambda n: ("utf8mb4", "utf8mb4_bin"),
                              explicit_defaults=lambda flags2: 1)
ADD = b"ALTER TABLE t ADD created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP"


def event(**status: Any) -> Any:
    return types.SimpleNamespace(query_bytes=ADD, timestamp=1_700_000_000, **status)


def test_the_statement_time_and_auto_increment_step_are_carried() -> None:
    _, session = ddlsession.of_event(event(auto_increment_increment=2,
                                           auto_increment_offset=1), FACTS)
    names = dict(session)
    assert names["timestamp"] == 1_700_000_000
    assert (names["auto_increment_increment"], names["auto_increment_offset"]) == (2, 1)


def test_an_unlogged_auto_increment_step_is_the_plain_one() -> None:
    # logged only when not 1, 1: a target whose own step is 2 (two-way) must not use its own
    names = dict(ddlsession.of_event(event(), FACTS)[1])
    assert (names["auto_increment_increment"], names["auto_increment_offset"]) == (1, 1)


@pytest.mark.parametrize("status", [{"microseconds": 5}, {"hrnow": 5}])  # MySQL, MariaDB
def test_the_statement_time_keeps_its_microseconds(status: dict[str, int]) -> None:
    names = dict(ddlsession.of_event(event(**status), FACTS)[1])
    assert names["timestamp"] == Decimal("1700000000.000005")


class Cursor:
    def __init__(self, fail: bool = False) -> None:
        self.ran: list[str] = []
        self.fail = fail

    def execute(self, query: Any, args: Any = None) -> None:
        text = query.decode() if isinstance(query, bytes) else query
        self.ran.append(text % tuple(repr(a) for a in args) if args else text)
        if self.fail and isinstance(query, bytes):
            raise RuntimeError("1060")

    def fetchone(self) -> tuple[Any, ...]:
        return (4, 3)


@pytest.mark.parametrize("fail", [False, True])
def test_the_clock_goes_back_to_the_servers_after_the_statement(fail: bool) -> None:
    cursor = Cursor(fail)
    session = (("auto_increment_increment", 2), ("auto_increment_offset", 1),
               ("timestamp", 1_700_000_000))
    try:
        ddlsession.run_under(cursor, session, "ALTER TABLE t ADD id INT AUTO_INCREMENT KEY")
    except RuntimeError:
        assert fail
    assert cursor.ran[0] == ("SELECT @@SESSION.auto_increment_increment, "
                             "@@SESSION.auto_increment_offset")  # not the frozen clock's
    assert cursor.ran[1] == ("SET SESSION auto_increment_increment = 2, SESSION "
                             "auto_increment_offset = 1, SESSION timestamp = 1700000000")
    assert cursor.ran[3] == ("SET SESSION auto_increment_increment = 4, SESSION "
                             "auto_increment_offset = 3, SESSION timestamp = DEFAULT")


@pytest.mark.parametrize("charset", ["sjis", "cp932", "greek", "big5", "euckr", "ujis"])
def test_a_statement_in_a_charset_whose_rows_stay_bytes_is_still_read(charset: str) -> None:
    """Rows in these charsets travel as bytes (node.charsets.INEXACT), but a statement in
    them is read as text: its names and keywords are ASCII (every DDL of a client in sjis
    stopped the pipeline when the two were one)."""
    codec = ddlsession.codec(charset)
    assert "ALTER TABLE t ADD c INT".encode(codec).decode(codec) == "ALTER TABLE t ADD c INT"


class Source(ddlsession.SourceFacts):
    """A source of ``version`` whose global explicit_defaults_for_timestamp is ``glob``."""

    def __init__(self, version: str, glob: int) -> None:
        super().__init__(lambda: None, "source s1")
        self.version, self.glob = version, glob
        self.asked: list[str] = []

    def _rows(self, query: str) -> list[tuple[Any, ...]]:
        self.asked.append(query)
        return [(self.version,)] if query == "SELECT VERSION()" else [(self.glob,)]


@pytest.mark.parametrize(("version", "flags2", "expected"), [
    ("10.11.19-MariaDB-0+deb12u1-log", 1 << 24, 1),  # MariaDB logs the session's
    ("10.11.19-MariaDB-0+deb12u1-log", 0, 0),
    ("10.6.21-MariaDB-log", 1 << 24, 0),  # not known to log it: the global
    ("5.7.44-log", 0, 0),  # MySQL 5.7 never logs it: the global
])
def test_a_mariadb_ddl_runs_under_its_explicit_defaults_for_timestamp(
        version: str, flags2: int, expected: int) -> None:
    """A bare TIMESTAMP the source made NULL DEFAULT NULL became NOT NULL DEFAULT
    CURRENT_TIMESTAMP ON UPDATE … on a target whose global is OFF: its NULLs the load's time."""
    names = dict(ddlsession.of_event(event(flags2=flags2), Source(version, 0))[1])
    assert names["explicit_defaults_for_timestamp"] == expected


def test_mysql_8s_status_variable_wins_and_the_version_is_read_once() -> None:
    source = Source("10.11.19-MariaDB", 0)
    names = dict(ddlsession.of_event(event(explicit_defaults_ts=1, flags2=0), source)[1])
    assert names["explicit_defaults_for_timestamp"] == 1 and source.asked == []
    ddlsession.of_event(event(flags2=0), source)
    ddlsession.of_event(event(flags2=0), source)
    assert source.asked == ["SELECT VERSION()"]


@pytest.mark.parametrize("charset, literal", [("cp932", b"\x87\x90"), ("big5", b"\xa2\x40")])
def test_a_statement_whose_bytes_do_not_come_back_alike_is_refused(
        charset: str, literal: bytes) -> None:
    """cp932's NEC row 13 '≒' (87 90) reads as the character 81 E0 also stands for: replayed,
    a DEFAULT, an ENUM member or a generated column's literal would hold other bytes."""
    facts = types.SimpleNamespace(where="source s1", collation=lambda n: (charset, charset),
                                  explicit_defaults=lambda flags2: 1)
    query = b"ALTER TABLE t ADD c CHAR(1) DEFAULT '" + literal + b"'"
    with pytest.raises(ddlsession.SourceError, match=f"character set {charset}, which setl "
                                                      "cannot read exactly"):
        ddlsession.of_event(types.SimpleNamespace(
            query_bytes=query, timestamp=1, character_set_client=95, collation_connection=95,
            collation_server=95), facts)
    fine = b"ALTER TABLE t ADD c CHAR(1) DEFAULT '\x81\xe0'" if charset == "cp932" else ADD
    text, _ = ddlsession.of_event(types.SimpleNamespace(
        query_bytes=fine, timestamp=1, character_set_client=95, collation_connection=95,
        collation_server=95), facts)
    assert text.encode(ddlsession.codec(charset)) == fine


class Zoned(ddlsession.SourceFacts):
    """A source whose SYSTEM time zone is ``zone`` (CONVERT_TZ(…, 'SYSTEM') answered here)."""

    def __init__(self, zone: str) -> None:
        super().__init__(lambda: None, "source s1")
        self.zone = zoneinfo.ZoneInfo(zone)

    def _rows(self, query: str) -> list[tuple[Any, ...]]:
        assert "'SYSTEM'" in query
        return [tuple(datetime.fromisoformat(utc).replace(tzinfo=UTC)
                      .astimezone(self.zone).replace(tzinfo=None)
                      for utc in re.findall(r"CONVERT_TZ\('([^']+)'", query))]

    def explicit_defaults(self, flags2: int | None) -> int:
        return 1


JULY_2024 = int(datetime(2024, 7, 20, 12, tzinfo=UTC).timestamp())
ZONE_BOUND = ["ALTER TABLE t MODIFY d TIMESTAMP NULL",  # DATETIME → TIMESTAMP
              "ALTER TABLE t MODIFY d DATETIME NULL",  # TIMESTAMP → DATETIME (zone logged)
              "ALTER TABLE t CHANGE COLUMN d e BIGINT",
              "ALTER TABLE t ADD COLUMN c TIMESTAMP NOT NULL DEFAULT '2024-01-15 00:00:00'",
              "ALTER TABLE t ADD INDEX (a), ADD (c TIMESTAMP NULL DEFAULT 20240115000000)"]


def zoned(statement: str, at: int = JULY_2024) -> Any:
    return types.SimpleNamespace(query_bytes=statement.encode(), timestamp=at,
                                 time_zone=b"SYSTEM", sql_mode=0)


@pytest.mark.parametrize("statement", ZONE_BOUND)
def test_a_statement_converting_rows_in_a_daylight_saving_system_zone_stops(
        statement: str) -> None:
    """Europe/Berlin in July: +02:00 replayed for a row of January, which the source read in
    +01:00, moved it by an hour, silently (no row event carries what the ALTER rewrote)."""
    with pytest.raises(ddlsession.SourceError, match=r"offset changes with the date \(it "
                       r"has been \+01:00 and \+02:00: daylight saving time.*"
                       r"SET time_zone = 'Area/City'.*setl position set"):
        ddlsession.of_event(zoned(statement), Zoned("Europe/Berlin"))


class Quirky(Zoned):
    """As the server answers: CONVERT_TZ gives Unix second 0 back unconverted."""

    def _rows(self, query: str) -> list[tuple[Any, ...]]:
        [found] = super()._rows(query)
        asked = re.findall(r"CONVERT_TZ\('([^']+)'", query)
        return [tuple(datetime(1970, 1, 1) if utc == "1970-01-01 00:00:00" else value
                      for utc, value in zip(asked, found, strict=True))]


def test_a_fixed_zone_is_not_taken_for_a_changing_one_by_the_epoch_s_answer() -> None:
    """Asia/Tokyo has been +09:00 since 1970; its offset at 1970-01-01 00:00:00 UTC read
    +00:00 (the server's answer there), and a MODIFY to TIMESTAMP stopped."""
    names = dict(ddlsession.of_event(zoned(ZONE_BOUND[0]), Quirky("Asia/Tokyo"))[1])
    assert names["time_zone"] == "+09:00"


def test_a_zone_that_observed_daylight_saving_in_years_past_counts() -> None:
    """Sao Paulo has kept -03:00 all year since 2019: its 1 January and 1 July of 2025
    agree, but the rows of 2015's summers were converted by -02:00."""
    in_2025 = int(datetime(2025, 3, 1, 12, tzinfo=UTC).timestamp())
    with pytest.raises(ddlsession.SourceError, match=r"it has been -02:00 and -03:00"):
        ddlsession.of_event(zoned(ZONE_BOUND[0], in_2025), Zoned("America/Sao_Paulo"))


def test_a_modify_of_a_column_that_neither_was_nor_becomes_a_timestamp_goes_on() -> None:
    """One clause logged the zone (ADD … DEFAULT CURRENT_TIMESTAMP), another MODIFY of a
    VARCHAR stopped the whole ALTER (Rails' change_table bulk: true)."""
    statement = ("ALTER TABLE t ADD c DATETIME DEFAULT CURRENT_TIMESTAMP, "
                 "MODIFY name VARCHAR(200)")
    old = {"name": ddlsession.OldType("other"), "d": ddlsession.OldType("timestamp")}
    names = dict(ddlsession.of_event(zoned(statement), Zoned("Europe/Berlin"), old)[1])
    assert names["time_zone"] == "+02:00"
    with pytest.raises(ddlsession.SourceError, match="MODIFY name VARCHAR"):  # not known
        ddlsession.of_event(zoned(statement), Zoned("Europe/Berlin"))
    with pytest.raises(ddlsession.SourceError, match="MODIFY d DATETIME"):  # was TIMESTAMP
        ddlsession.of_event(zoned("ALTER TABLE t MODIFY d DATETIME NULL"),
                            Zoned("Europe/Berlin"), old)


@pytest.mark.parametrize("statement", ZONE_BOUND)
def test_a_fixed_offset_system_zone_replays_them_under_its_offset(statement: str) -> None:
    names = dict(ddlsession.of_event(zoned(statement), Zoned("Asia/Kolkata"))[1])
    assert names["time_zone"] == "+05:30"


@pytest.mark.parametrize("statement", [
    "CREATE TABLE t (id INT PRIMARY KEY, c TIMESTAMP NULL DEFAULT '2024-01-15 00:00:00')",
    "ALTER TABLE t ADD COLUMN z DATETIME DEFAULT CURRENT_TIMESTAMP",
    "ALTER TABLE t ADD COLUMN w TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP(6)",
    "ALTER TABLE t ADD COLUMN d DATETIME NOT NULL DEFAULT '2024-01-15 00:00:00'",
    "ALTER TABLE t ALTER COLUMN c SET DEFAULT '2024-02-01 00:00:00'",
])
def test_other_statements_run_under_the_offset_at_their_own_time(statement: str) -> None:
    """A DATETIME DEFAULT CURRENT_TIMESTAMP is the statement's instant in the zone: a DDL of
    January read in July took +02:00 (the offset now) and gave every row an hour more."""
    berlin = Zoned("Europe/Berlin")
    january = int(datetime(2024, 1, 20, 12, tzinfo=UTC).timestamp())
    assert dict(ddlsession.of_event(zoned(statement, january), berlin)[1])["time_zone"] == \
        "+01:00"
    assert dict(ddlsession.of_event(zoned(statement), berlin)[1])["time_zone"] == "+02:00"


def test_a_named_zone_is_replayed_by_its_name_even_with_daylight_saving() -> None:
    event = zoned(ZONE_BOUND[0])
    event.time_zone = b"Europe/Berlin"
    assert dict(ddlsession.of_event(event, Zoned("Europe/Berlin"))[1])["time_zone"] == \
        "Europe/Berlin"
