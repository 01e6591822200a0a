"""``setl source switch NAME --to HOST:PORT``: a planned switchover of a replica-set source.

The manager checks the member (one of the source's hosts, answering, promoted) and stores it
as the source's primary in ZooKeeper; every node running a pipeline of the source sees the
record move, loads what it selected, and starts again on the new primary from the GTID state
of what its targets hold (:mod:`node.primary`)."""

from __future__ import annotations

import logging
import time

from shared import members
from shared.catalog import Catalog
from shared.errors import ConflictError
from shared.members import PrimaryRecord

log = logging.getLogger("setl.manager.switch")


def switch_source(catalog: Catalog, name: str, to: str) -> PrimaryRecord:
    source = catalog.source(name)  # as its primary now
    chosen, found = members.switch_to(source, to)
    record, version = catalog.primary(name)
    current = members.address(source)
    if members.address(chosen) == current:
        return record or PrimaryRecord(current, current, 0, found.gtid_pos, "manual")
    new = PrimaryRecord(members.address(chosen), current, int(time.time() * 1000),
                        found.gtid_pos, "manual")
    if not catalog.set_primary(name, new, version):
        raise ConflictError(f"source {name}'s primary changed while this switch was checked "
                            "(a node switched it); see setl status, then switch again")
    log.warning("event=source_switched source=%s from=%s to=%s gtid=%s by=manual", name,
                current, new.member, new.gtid or "-")
    return new
