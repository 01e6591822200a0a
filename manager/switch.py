"""``setl source switch NAME --to HOST:PORT``: a planned switchover of a replica-set source.

The manager checks the member (one of the source's hosts, answering, promoted) and stores it
as the source's primary in ZooKeeper; every node running a pipeline of the source sees the
record move, loads what it selected, and starts again on the new primary from the GTID state
of what its targets hold (:mod:`node.held`)."""

from __future__ import annotations

import logging
import time

from shared import gtid, members
from shared.catalog import Catalog
from shared.errors import ConflictError
from shared.members import PrimaryRecord, Probe
from shared.model import DataSource

log = logging.getLogger("setl.manager.switch")


def switch_source(catalog: Catalog, name: str, to: str) -> PrimaryRecord:
    source = catalog.source(name)  # as its primary now
    chosen, found = members.switch_to(source, to)
    record, version = catalog.primary(name)
    current = members.address(source)
    if members.address(chosen) == current:
        return record or PrimaryRecord(current, current, 0, found.gtid_pos, "manual")
    _holds_the_primarys(source, name, found)
    new = PrimaryRecord(members.address(chosen), current, int(time.time() * 1000),
                        found.gtid_pos, "manual")
    if not catalog.set_primary(name, new, version):
        raise ConflictError(f"source {name}'s primary changed while this switch was checked "
                            "(a node switched it); see setl status, then switch again")
    log.warning("event=source_switched source=%s from=%s to=%s gtid=%s by=manual", name,
                current, new.member, new.gtid or "-")
    return new


def _holds_the_primarys(source: DataSource, name: str, found: Probe) -> None:
    """Refuse a member that lacks transactions of the primary read now (promoted before it
    caught up): the pipelines would go on there, and those transactions would never reach
    their targets. A primary that does not answer cannot be compared (a failover: the
    nodes check what their targets hold against the new member)."""
    old = members.probe(source)
    if not (old.answers and old.gtid_pos and found.gtid_state) or ":" in old.gtid_pos:
        return
    lacked = gtid.missing(old.gtid_pos, found.gtid_state)
    if lacked:
        raise ConflictError(
            f"source {name}: {found.member} lacks transactions of the primary "
            f"{members.address(source)} (at GTID {old.gtid_pos}): {', '.join(lacked)}. "
            "Switching now would leave them out of every target. Let it catch up first "
            "(point it at the primary again: CHANGE MASTER TO … MASTER_USE_GTID = "
            f"slave_pos; START SLAVE; wait until it holds {old.gtid_pos}; then STOP SLAVE; "
            "RESET SLAVE ALL), then switch")
