"""``setl position set --gtid``: a GTID start checked when it is set, not when the pipeline
starts (an unparsable one was taken and refused only then; one past the source's end was
taken for a replay and moved the targets' rows there, and the start paused with a failover's
story). Of the source's form: MariaDB's domain-server-sequence per domain, or MySQL's
executed set; on MariaDB, written by the source (``@@gtid_binlog_state``), so that a start
there neither waits for transactions that may never come nor is of another history. How it
compares with what a target holds is :func:`manager.replays.ahead`'s: by GTID state only
where the source runs ``gtid_strict_mode`` (read here, at the set).
"""

from __future__ import annotations

import re

from shared import gtid, members
from shared.errors import ConflictError, PositionConflictError, SourceError
from shared.model import BinlogPosition, DataSource


def checked(source: DataSource, text: str, channel: str) -> tuple[BinlogPosition, bool]:
    """A start at the GTID position ``text`` (of a pipeline of ``channel``),
    checked against the source: of the form its server uses, and written by it (one past
    its end would wait for transactions that may never come, or be of another history);
    and whether the source runs MariaDB's ``gtid_strict_mode`` (then, and only then, a
    domain's sequence numbers only grow, so a state orders positions)."""
    found = members.probe(source)
    if not found.answers:
        raise SourceError(f"source {source.name} ({found.member}) does not answer, so "
                          f"--gtid {text} cannot be checked: {found.error}")
    if not found.gtid_state:  # MySQL (or a MariaDB that wrote no GTID yet)
        if not _MYSQL_GTIDS.fullmatch(text):
            raise ConflictError(
                f"--gtid {text!r} is not a GTID set of source {source.name}, which writes "
                "no MariaDB GTIDs: give MySQL's executed set, source_uuid:1-100[,…], or "
                "--file F --pos P")
        return BinlogPosition(gtid=text), False
    try:
        state = gtid.parse(text)
    except PositionConflictError:
        state = {}
    if not state:
        raise ConflictError(
            f"--gtid {text!r} is not a MariaDB GTID position: give domain-server-sequence, "
            "one per domain, comma-separated (domain-server-seq[,…], e.g. 0-1-100,1-2-7), as "
            f"source {source.name}'s @@gtid_binlog_pos shows (now {found.gtid_pos})")
    lacked = gtid.missing(gtid.text(state), found.gtid_state)
    if lacked:
        parted = gtid.diverged(lacked, found.gtid_pos)
        why = (f"of another history: it went on past that number with other transactions "
               f"({', '.join(parted)})" if parted else
               f"past its end (its @@gtid_binlog_pos is {found.gtid_pos})")
        raise ConflictError(
            f"source {source.name} has not written {', '.join(lacked)}: a start at "
            f"gtid={gtid.text(state)} is {why}. Choose a GTID it has written (setl position "
            f"show {channel}), or --latest")
    return BinlogPosition(gtid=gtid.text(state)), "gtid_strict_mode" not in found.unsafe


# MySQL's GTID set: source_uuid:interval[:interval…], comma-separated
_MYSQL_GTIDS = re.compile(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
                          r"(:\d+(-\d+)?)+(\s*,\s*[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}"
                          r"-[0-9a-fA-F]{12}(:\d+(-\d+)?)+)*")
