"""MariaDB GTID states, and how two positions of a source compare.

A MariaDB GTID is ``domain-server-sequence``; a *state* (``@@gtid_binlog_pos``, the position
a replica connects with) is the last GTID of each domain, comma-separated. Within a replica
set that runs ``gtid_strict_mode`` the sequence numbers of a domain only grow, whichever
member wrote them, so a state says how far a server's history went in every domain — on any
member of the set, where binlog files and offsets mean nothing.

A position (:class:`~shared.model.BinlogPosition`) carries both: file/pos of the server it
names (``server``), and the GTID state after its transaction. :func:`compare` uses file/pos
when both are of the same server (or both of an unknown one: rows written before positions
named their server, a ``start:`` file/pos), else the states (one unnamed beside a named
one too, when both have them); positions that cannot be compared raise, never guess.
Two positions of one server are never ordered by their states: under gtid_strict_mode OFF
(MariaDB's default) one domain may carry two origins' sequences in one binlog (a multi-source
replica), where a later transaction has a lower number. A server that keeps its name while
its binlog starts again (RESET MASTER) is caught where a pipeline starts instead: every
target row of it must be a position of its binlog now (:func:`node.held.check_held`).

Which GTIDs a server lacks is read from ``@@gtid_binlog_state`` (the last sequence of every
domain *and server* it holds): :func:`missing`; whether catching up can still bring them
(:func:`diverged`), and which of its domains a state never saw (:func:`unseen_domains`),
from its ``@@gtid_binlog_pos``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING

from shared.errors import PositionConflictError

if TYPE_CHECKING:
    from shared.model import BinlogPosition

# domain → (server_id, sequence): the last GTID of each domain
State = dict[int, tuple[int, int]]


def parse(text: str) -> State:
    """A GTID state (or one GTID) from its text; '' is the empty state."""
    state: State = {}
    for part in text.replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            domain, server, sequence = (int(piece) for piece in part.split("-"))
        except ValueError:
            raise PositionConflictError(
                f"{part!r} is not a MariaDB GTID (domain-server-sequence, e.g. 0-1-100); "
                "MySQL's GTID sets are not supported for positions across servers") from None
        state[domain] = (server, sequence)
    return state


def text(state: State) -> str:
    return ",".join(f"{domain}-{server}-{sequence}"
                    for domain, (server, sequence) in sorted(state.items()))


def advance(state_text: str, gtid: str) -> str:
    """``state_text`` after the transaction ``gtid``."""
    state = parse(state_text)
    state.update(parse(gtid))
    return text(state)


def compare_states(a: str, b: str) -> int:
    """-1, 0 or 1 as state ``a`` is before, at or after ``b`` in one history; raises when
    neither contains the other (two histories: a failover lost transactions, or unrelated
    servers)."""
    first, second = parse(a), parse(b)
    signs = set()
    for domain in first.keys() | second.keys():
        ours, theirs = first.get(domain, (0, 0)), second.get(domain, (0, 0))
        if ours[1] == theirs[1] and ours[0] != theirs[0] and ours[1]:
            raise PositionConflictError(
                f"GTID states {a} and {b} hold different transactions with the same number "
                f"in domain {domain}: two histories")
        signs.add((ours[1] > theirs[1]) - (ours[1] < theirs[1]))
    signs.discard(0)
    if len(signs) > 1:
        raise PositionConflictError(f"GTID states {a} and {b} are of two histories (each "
                                    "has transactions the other lacks)")
    return signs.pop() if signs else 0


def same_server(a: BinlogPosition, b: BinlogPosition) -> bool:
    """Whether file/pos of ``a`` and ``b`` are of one binlog (an unknown server is taken for
    the same: what positions without it always meant)."""
    return bool(a.file and b.file) and (not a.server or not b.server or a.server == b.server)


def compare(a: BinlogPosition, b: BinlogPosition) -> int:
    """-1, 0 or 1 as ``a`` is before, at or after ``b``."""
    if same_server(a, b) and not _by_states(a, b):
        first, second = a.order(), b.order()
        return (first > second) - (first < second)
    if a.gtid and b.gtid:
        return compare_states(a.gtid, b.gtid)
    raise PositionConflictError(
        f"positions {a} (server {a.server or '?'}) and {b} (server {b.server or '?'}) are "
        "of different servers and one has no GTID state: they cannot be "
        "compared. Set where the pipeline goes on (setl position set) once you know which "
        "transactions the targets hold")


def _by_states(a: BinlogPosition, b: BinlogPosition) -> bool:
    """Whether two positions of which one names no server compare by their MariaDB GTID
    states: the unnamed one (a row written before positions named their server) may be of
    another member of the set, read after a switch, where its file/pos mean nothing (a
    row at file 120 of the old server was taken for past every batch of a new one at file
    3); a state says how far it got on any member. MySQL's GTIDs compare by file/pos."""
    if bool(a.server) == bool(b.server) or not (a.gtid and b.gtid):
        return False
    try:
        parse(a.gtid), parse(b.gtid)
    except PositionConflictError:
        return False
    return True


order_key = functools.cmp_to_key(compare)


def latest(positions: Iterable[BinlogPosition]) -> BinlogPosition:
    return max(positions, key=order_key)


def earliest(positions: Iterable[BinlogPosition]) -> BinlogPosition:
    return min(positions, key=order_key)


def missing(held: str, server_state: str) -> list[str]:
    """The last GTIDs of state ``held`` (what a target holds) that a server whose
    ``@@gtid_binlog_state`` is ``server_state`` never had, each with how far the server got.
    A domain's last GTID is on the server when the server holds that originating server's
    transactions up to its sequence; else those after the ones it holds are missing."""
    have: dict[tuple[int, int], int] = {}
    for part in server_state.replace("\n", "").split(","):
        part = part.strip()
        if part:
            domain, server, sequence = (int(piece) for piece in part.split("-"))
            have[(domain, server)] = max(sequence, have.get((domain, server), 0))
    gaps = []
    for domain, (server, sequence) in sorted(parse(held).items()):
        got = have.get((domain, server), 0)
        if got >= sequence:
            continue
        gaps.append(f"{domain}-{server}-{sequence} (it has server {server}'s transactions of "
                    f"domain {domain} up to {domain}-{server}-{got})" if got else
                    f"{domain}-{server}-{sequence} (it has none of server {server}'s in domain "
                    f"{domain})")
    return gaps


def diverged(lacked: Iterable[str], server_pos: str) -> list[str]:
    """Of the GTIDs ``lacked`` (each ``domain-server-sequence``) a server never had, those it
    can never get by catching up: its ``@@gtid_binlog_pos`` is at that sequence or past it
    in their domain with other transactions (two histories: a domain's numbers only grow),
    each with the server's last GTID there."""
    pos, parted = parse(server_pos), []
    for one in lacked:
        for domain, (server, sequence) in parse(one.split(" ")[0]).items():
            theirs = pos.get(domain)
            if theirs is not None and theirs[1] >= sequence and theirs != (server, sequence):
                parted.append(f"{domain}-{server}-{sequence} (it is at "
                              f"{domain}-{theirs[0]}-{theirs[1]} in domain {domain})")
    return parted


def unseen_domains(state: str, server_pos: str) -> State:
    """The last GTIDs of a server's ``@@gtid_binlog_pos`` in the domains ``state`` has none
    of: transactions no reader positioned at ``state`` saw (a replica's local writes in a
    domain of their own), which the server would send from its binlog's start."""
    held = parse(state)
    return {domain: last for domain, last in parse(server_pos).items() if domain not in held}
