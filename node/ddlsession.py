"""The source session a DDL ran in, carried to the target and run under again.

A statement means what its session makes of it: ``sql_mode`` decides whether ``"a b"`` is a
name or a string (``ANSI_QUOTES``) and what a backslash does, ``time_zone`` what instant a
TIMESTAMP default is, ``character_set_client`` which bytes the text is in, the collations
what a literal or a new database defaults to, ``foreign_key_checks`` whether a table may
reference one not made yet, ``timestamp`` what ``CURRENT_TIMESTAMP``/``NOW(6)`` gives the
rows an ``ADD COLUMN … DEFAULT CURRENT_TIMESTAMP`` fills (the source's statement time, not
the replay's: a lagging channel gave every row the time it caught up),
``auto_increment_increment``/``_offset`` the numbers an ``ADD COLUMN … AUTO_INCREMENT``
gives them, and ``explicit_defaults_for_timestamp`` what a bare TIMESTAMP column becomes.
The binlog's query event carries them all (the event's time and status variables; the last
only on MySQL 8 and MariaDB 10.10+, else it is the source's global:
:meth:`SourceFacts.explicit_defaults`); Select reads them with the statement's own bytes
(:func:`of_event`), and Load sets them on its target session around the statement and puts
its own back after (:func:`run_under`): ``timestamp`` goes back to ``DEFAULT`` (the clock;
a saved value would stop it), as the load connection runs the rows after.
"""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from node import charsets
from node.changes import Session
from node.ddlset import zone_bound_clause
from node.ddltypes import OldType
from shared.errors import SourceError
from shared.model import BinlogPosition

# carried with a DDL but not session variables: the default (charset, collation) of the
# database a CREATE TABLE goes to, as it was at that point of the binlog
DATABASE_DEFAULTS = "setl.database_defaults"
# the source's binlog position after the statement, (file, pos, server): whether the tables'
# keys were read before it ran (:func:`node.ddlpauses.keyed_before`)
POSITION = "setl.position"
FACTS = (DATABASE_DEFAULTS, POSITION)
_NO_FOREIGN_KEY_CHECKS = 1 << 26  # bits of the query event's flags2 (the session's options)
_RELAXED_UNIQUE_CHECKS = 1 << 27
_EXPLICIT_DEFAULTS = 1 << 24  # MariaDB's session explicit_defaults_for_timestamp (10.10+)
_LOGS_EXPLICIT_DEFAULTS = (10, 10)  # the first MariaDB whose flags2 is known to carry it
# MySQL/MariaDB charset names → the names pymysql and the library give their codecs
_ENCODINGS = {"latin1": "cp1252", "utf8mb3": "utf8", "utf8mb4": "utf8", "utf8": "utf8"}
CLOCK = "timestamp"  # set for the statement only, then back to DEFAULT (the server's clock)


class SourceFacts:
    """What a session's ids and names stand for on the source: its collations by id and the
    offset of its SYSTEM time zone, read from the source on first need."""

    def __init__(self, connect: Callable[[], Any], where: str) -> None:
        self._connect, self.where = connect, where
        self._collations: dict[int, tuple[str, str]] = {}
        self._charset_of: dict[str, str] = {}  # collation name → its charset
        self._default_of: dict[str, str] = {}  # charset → its default collation
        self._logs_explicit_defaults: bool | None = None  # does flags2 carry it? (read once)

    def _rows(self, query: str) -> list[tuple[Any, ...]]:
        conn = self._connect()
        try:
            with conn.cursor() as cursor:
                cursor.execute(query)
                return list(cursor.fetchall())
        finally:
            conn.close()

    def _load(self) -> None:
        rows = self._rows("SELECT ID, CHARACTER_SET_NAME, COLLATION_NAME, IS_DEFAULT FROM "
                          "information_schema.COLLATIONS")
        self._collations = {int(n): (str(c), str(name)) for n, c, name, _ in rows
                            if n is not None}
        self._charset_of = {str(name).lower(): str(c) for _, c, name, _ in rows}
        self._default_of = {str(c).lower(): str(name) for _, c, name, default in rows
                            if str(default).upper() == "YES"}

    def collation(self, number: int) -> tuple[str, str]:
        """(charset, collation) of a collation id."""
        if number not in self._collations:
            self._load()
        if number not in self._collations:
            raise SourceError(f"{self.where}: a DDL statement's session names collation id "
                              f"{number}, which the source does not list; setl cannot run it "
                              "as the source did")
        return self._collations[number]

    def defaults(self, charset: str | None, collation: str | None) -> tuple[str, str] | None:
        """(charset, collation) that a CHARACTER SET and/or COLLATE clause gives a database."""
        if not self._collations:
            self._load()
        if collation:
            found = self._charset_of.get(collation.lower())
            return (found, collation) if found else None
        if charset:
            found = self._default_of.get(charset.lower())
            return (charset, found) if found else None
        return None

    def databases(self) -> dict[str, tuple[str, str]]:
        """Every database's default (charset, collation) now."""
        return {str(name): (str(c), str(co)) for name, c, co in self._rows(
            "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM "
            "information_schema.SCHEMATA")}

    def system_zone(self, at: int) -> tuple[str, tuple[str, str]]:
        """The offset of the source's SYSTEM time zone at instant ``at`` (Unix seconds: a
        DDL's own time, not now), and two offsets it has had since 1970 (on a 1 January or
        1 July up to that year; alike where it has had one only): they differ where the zone
        observes daylight saving time, or did (Sao Paulo until 2019), or moved (Almaty in
        2024), and rows of those dates were converted by the offset they had."""
        when = datetime.fromtimestamp(at, UTC).replace(tzinfo=None)
        # (at noon: CONVERT_TZ gives Unix second 0, 1970-01-01 00:00:00, back unconverted)
        instants = [when] + [datetime(year, month, 1, 12) for year in range(
            1970, min(when.year, 2037) + 1) for month in (1, 7)]
        [local] = self._rows("SELECT " + ", ".join(
            f"CONVERT_TZ('{utc:%Y-%m-%d %H:%M:%S}', '+00:00', 'SYSTEM')" for utc in instants))
        if any(value is None for value in local):
            raise SourceError(f"{self.where}: the source did not give the offset of its SYSTEM "
                              f"time zone at {when:%Y-%m-%d %H:%M:%S} UTC, which a DDL "
                              "statement ran in; run it on the target by hand, then skip it "
                              "with 'setl position set'")
        now, *history = (_offset(value - utc) for value, utc in
                          zip(local, instants, strict=True))
        other = next((offset for offset in history if offset != history[-1]), history[-1])
        return now, (other, history[-1])

    def explicit_defaults(self, flags2: int | None) -> int:
        """The ``explicit_defaults_for_timestamp`` a DDL without MySQL 8's status variable
        ran under: MariaDB (from 10.10; checked on 10.11) logs the session's in the query
        event's flags2; MySQL 5.7 and older MariaDB do not log it at all, so for them it is
        the source's GLOBAL value as read now, the best there is: a session that set its
        own, or a global changed since the DDL ran, is not seen."""
        if self._logs_explicit_defaults is None:
            [(version,)] = self._rows("SELECT VERSION()")
            self._logs_explicit_defaults = _mariadb_at_least(str(version),
                                                             _LOGS_EXPLICIT_DEFAULTS)
        if self._logs_explicit_defaults and flags2 is not None:
            return 1 if flags2 & _EXPLICIT_DEFAULTS else 0
        [(value,)] = self._rows("SELECT @@GLOBAL.explicit_defaults_for_timestamp")
        return int(value)


def _mariadb_at_least(version: str, least: tuple[int, int]) -> bool:
    """Whether a ``VERSION()`` is a MariaDB's of ``least`` or later."""
    if "mariadb" not in version.lower():
        return False
    numbers = version.split("-", 1)[0].split(".")
    try:
        return (int(numbers[0]), int(numbers[1])) >= least
    except (IndexError, ValueError):
        return False


def _offset(difference: Any) -> str:
    """A time zone offset (``+02:00``) from local time minus UTC."""
    seconds = int(difference.total_seconds())
    sign, seconds = ("-" if seconds < 0 else "+"), abs(seconds)
    return f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"


def sql_mode(session: Session) -> int:
    """The session's sql_mode bits (0, the server's plain reading, when none was carried)."""
    return int(dict(session).get("sql_mode", 0))


def position(session: Session) -> BinlogPosition | None:
    """The source's binlog position after the DDL (:data:`POSITION`), if carried."""
    found = dict(session).get(POSITION)
    return BinlogPosition(str(found[0]), int(found[1]), str(found[3]) if len(found) > 3 else "",
                          str(found[2])) if found else None


def moving_past(pipeline_id: str, session: Session) -> str:
    """How an operator moves pipeline ``pipeline_id`` past the DDL that ran in ``session``:
    the commands, with the statement's end (the next transaction's position) when carried.
    A position is set on a stopped channel only (manager.positions)."""
    channel = pipeline_id.partition(".")[0]
    ended = position(session)
    where = f"--file {ended.file} --pos {ended.pos}" if ended is not None and ended.file \
        else "--file … --pos … (the next transaction's position)"
    return (f"setl channel stop {channel} --wait, then setl position set "
            f"{pipeline_id.replace('.', '/')} {where}, then setl channel start {channel}")


def database_defaults(session: Session) -> tuple[str, str] | None:
    """The default (charset, collation) of a CREATE TABLE's database at that point, if known."""
    found = dict(session).get(DATABASE_DEFAULTS)
    return (str(found[0]), str(found[1])) if found else None


def codec(charset: str) -> str:
    """The Python codec that reads text in a MySQL charset exactly (LookupError if none)."""
    name = charsets.python_codec(_ENCODINGS.get(charset, charset))
    return codecs.lookup(name).name


def of_event(event: Any, source: SourceFacts, old: Mapping[str, OldType] | None = None
             ) -> tuple[str, Session]:
    """A query event's statement, decoded from the bytes its client sent, and its session;
    ``old``: its table's column types before it, by lower-cased name, where known."""
    where, collations = source.where, source.collation
    session: list[tuple[str, Any]] = []
    charset = "utf8mb4"
    if getattr(event, "character_set_client", None) is not None:
        charset, _ = collations(event.character_set_client)
        session += [("character_set_client", charset),
                    ("collation_connection", collations(event.collation_connection)[1]),
                    ("collation_server", collations(event.collation_server)[1])]
    if getattr(event, "sql_mode", None) is not None:
        session.append(("sql_mode", int(event.sql_mode)))
    if getattr(event, "flags2", None) is not None:
        session += [("foreign_key_checks", 0 if event.flags2 & _NO_FOREIGN_KEY_CHECKS else 1),
                    ("unique_checks", 0 if event.flags2 & _RELAXED_UNIQUE_CHECKS else 1)]
    text = _statement(event, charset, where)
    zone = getattr(event, "time_zone", None)  # only when the statement used it
    if zone:
        zone = zone.decode() if isinstance(zone, bytes) else str(zone)
        session.append(("time_zone", _system_zone(text, sql_mode(tuple(session)), event,
                                                  source, old) if zone.upper() == "SYSTEM"
                        else zone))
    # what a bare TIMESTAMP column becomes: NULL DEFAULT NULL, or (OFF) NOT NULL with a
    # default, the first also ON UPDATE CURRENT_TIMESTAMP (a NULL then stores the load's NOW())
    explicit = getattr(event, "explicit_defaults_ts", None)  # MySQL 8
    session.append(("explicit_defaults_for_timestamp", int(explicit) if explicit is not None
                    else source.explicit_defaults(getattr(event, "flags2", None))))
    # logged only when not 1, 1 (the target's own may differ: a two-way pair's often do)
    session += [("auto_increment_increment", int(getattr(event, "auto_increment_increment", 1))),
                ("auto_increment_offset", int(getattr(event, "auto_increment_offset", 1)))]
    if getattr(event, "timestamp", None) is not None:
        session.append((CLOCK, statement_time(event)))
    return text, tuple(session)


def _statement(event: Any, charset: str, where: str) -> str:
    """A query event's statement, read from its bytes in the client's character set."""
    raw = getattr(event, "query_bytes", None)
    if raw is None:
        raise SourceError(f"{where}: the binlog reader did not keep the statement's bytes; "
                          "setl's reader patches are not installed "
                          "(node.select.libevents.install)")
    try:
        text = raw.decode(codec(charset))
        if text.encode(codec(charset)) != raw:  # cp932's NEC and IBM rows, some big5:
            raise UnicodeError("its bytes, read and written again, differ")  # one character,
    except (LookupError, UnicodeError) as exc:  # two byte forms: replayed, literals change
        raise SourceError(
            f"{where}: a DDL statement was sent in character set {charset}, which setl cannot "
            f"read exactly ({exc}); run it on the target by hand, then skip it with "
            "'setl position set'") from None
    return text.strip()


def _system_zone(statement: str, mode: int, event: Any, source: SourceFacts,
                 old: Mapping[str, OldType] | None = None) -> str:
    """The offset a statement logged in the source's SYSTEM zone runs under on the target
    (which does not know that zone by name): the zone's at the statement's own time. Where
    the zone observes daylight saving time, a statement that made rows' values anew through
    it, each at its own date (:func:`node.ddlset.zone_bound_clause`), stops: under one
    offset, the rows of the other part of the year would move by an hour."""
    offset, (other, last) = source.system_zone(int(event.timestamp))
    clause = zone_bound_clause(statement, mode, old) if other != last else None
    if clause is not None:
        raise SourceError(
            f"{source.where}: a DDL statement ran in the source's SYSTEM time zone, whose "
            f"offset changes with the date (it has been {other} and {last}: daylight saving "
            f"time, or the zone's rules changed), and its clause {clause!r} converts the "
            "table's rows between local time and instants, each at its own date: replayed "
            "under one offset (the target cannot know the source machine's zone by name), the "
            "rows of other dates would be an hour off. Run the statement on the target by "
            "hand under SET time_zone = 'Area/City' (the source machine's zone, e.g. "
            "Europe/Berlin), then "
            "move the pipeline past it with 'setl position set'; and give the source a "
            "named time_zone (SET GLOBAL time_zone = 'Area/City', and default_time_zone in "
            "its my.cnf) so that its statements log the zone by name")
    return offset


def statement_time(event: Any) -> int | Decimal:
    """When the statement started on the source: the event's seconds, with the microseconds
    that MySQL (``Q_MICROSECONDS``) or MariaDB (``Q_HRNOW``) log when it used them."""
    micro = getattr(event, "microseconds", None)
    micro = getattr(event, "hrnow", None) if micro is None else micro
    seconds = int(event.timestamp)
    return Decimal(f"{seconds}.{int(micro):06d}") if micro else seconds


def run_under(cursor: Any, session: Session, statement: str) -> None:
    """Run ``statement`` on the target under the source session's settings, then put the
    target session's own settings back (also when the statement fails); its clock goes
    back to the server's (``timestamp = DEFAULT``)."""
    settings = {name: value for name, value in session if name not in FACTS}
    if not settings:
        cursor.execute(statement)
        return
    charset = settings.get("character_set_client", "utf8mb4")
    try:
        text = statement.encode(codec(charset))
    except (LookupError, UnicodeEncodeError) as exc:
        raise SourceError(f"a DDL statement cannot be written in its source's character set "
                          f"{charset} ({exc}): a mapped name has characters it lacks; map "
                          "the table to a name the charset holds") from None
    names = [name for name in settings if name != CLOCK]
    own: tuple[Any, ...] = ()
    if names:
        cursor.execute("SELECT " + ", ".join(f"@@SESSION.{name}" for name in names))
        own = tuple(cursor.fetchone())
    cursor.execute("SET " + ", ".join(f"SESSION {name} = %s" for name in settings),
                   tuple(settings.values()))
    back = "SET " + ", ".join([f"SESSION {name} = %s" for name in names] +
                              ([f"SESSION {CLOCK} = DEFAULT"] if CLOCK in settings else []))
    try:
        cursor.execute(text)
    except BaseException:
        with contextlib.suppress(Exception):  # the statement's error is the one to see
            cursor.execute(back, own)
        raise
    cursor.execute(back, own)
