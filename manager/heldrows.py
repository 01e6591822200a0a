"""What each target held when ``setl position reset`` blanked its position row
(``pipelines/{pid}/held`` in ZooKeeper, JSON: target → position).

A reset blanks the rows so that the next start begins at the definition's ``start:``
instead of resuming where the targets are; but the targets still hold the rows they
loaded. A later ``position set`` (or reset) that compared only with the blanked rows would
find nothing ahead of an earlier place and load those transactions again without being
told (a keyless table's rows twice). So the reset keeps each target's place here, and a
blank row stands for it (:meth:`manager.positions.Positions._rows`): a replay from before
it is refused as it was before the reset. Where the reset itself was a replay asked for
(``start:`` earlier than the row, ``--replay``), the place kept is that ``start:``.
"""

from __future__ import annotations

import json

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from shared.catalog import call
from shared.model import BinlogPosition
from shared.zk import put


def read(client: KazooClient, path: str) -> dict[str, BinlogPosition]:
    """The places kept at ``path`` (none: no reset kept any)."""
    try:
        data, _ = call("read what a reset kept of the targets", client.get, path)
    except NoNodeError:
        return {}
    raw = json.loads(data) if data else {}
    return {name: BinlogPosition(str(at[0]), int(at[1]), str(at[2]), str(at[3]))
            for name, at in raw.items()}


def write(client: KazooClient, path: str, held: dict[str, BinlogPosition]) -> None:
    """Keep ``held`` at ``path`` (the node goes when nothing is kept)."""
    if not held:
        if call("look for what a reset kept", client.exists, path):
            call("forget what a reset kept", client.delete, path)
        return
    body = {name: [at.file, at.pos, at.gtid, at.server] for name, at in sorted(held.items())}
    call("keep what a reset forgot of the targets", put, client, path,
         json.dumps(body).encode())
