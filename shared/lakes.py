"""Lake targets' locations and object-store options, as definitions give them.

A lake target (``type: delta``) names a ``location``: a local directory (an absolute path)
or an object-store URL delta-rs writes (``s3://``, ``gs://``, ``az://``, ``abfss://``). Its
tables are ``<location>/<schema>/<table>``. ``storage`` holds the object store's options
(delta-rs' names: ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``…); an option that is a credential
is a secret reference (``${SETL_…}`` or ``file:…``), resolved only in the node that writes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared.model import BinlogPosition
from shared.secrets import SecretRef

PREFIX = "setl."  # setl's commit metadata on a lake table
SCHEMES = ("s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "file://")
# options whose value is a credential: never written in a definition in clear
_SECRET = re.compile(r"(SECRET|PASSWORD|TOKEN|CREDENTIAL|SAS|ACCESS_KEY|ACCOUNT_KEY|"
                     r"SERVICE_ACCOUNT_KEY|CLIENT_SECRET)", re.IGNORECASE)
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,127}")


def location_problem(text: str) -> str | None:
    """Why ``text`` is not a lake location, or None."""
    if "\x00" in text or "\n" in text:
        return "a location is one line of text"
    if text.startswith("/") or text.startswith(SCHEMES):
        return None
    return (f"location {text!r} is neither an absolute directory nor an object-store URL "
            f"({', '.join(SCHEMES)}); write /var/lib/lake or s3://bucket/path")


def is_secret(key: str) -> bool:
    return bool(_SECRET.search(key))


def storage_problem(key: str, value: str) -> str | None:
    """Why ``key: value`` is not an object-store option a definition may hold, or None."""
    if not _KEY.fullmatch(key):
        return f"option name {key!r}: letters, digits, '_' or '.'"
    if is_secret(key):
        try:
            SecretRef.parse(value)
        except Exception:
            return (f"{key} is a credential: write a reference, ${{SETL_NAME}} (an "
                    "environment variable) or file:/path (a file holding it), never the "
                    "value itself")
    return None


def options(storage: Iterable[str]) -> dict[str, str]:
    """The object store's options with each credential's reference resolved (in the node
    that writes, under its confinement)."""
    found = {}
    for entry in storage:
        key, _, value = entry.partition("=")
        found[key] = SecretRef.parse(value).resolve() if is_secret(key) else value
    return found


_PLAIN = re.compile(r"[A-Za-z0-9_$-][A-Za-z0-9_$.-]*")


def path_name(name: str) -> str:
    """A schema or table name as one directory name: as it is when it is plain, else each
    character outside ``[A-Za-z0-9_$.-]`` (and a leading dot) as ``@`` and its four hex
    digits, as MariaDB names its own files (``a/b`` → ``a@002fb``). An ``@`` is encoded too,
    so every name has one directory and back."""
    if _PLAIN.fullmatch(name):
        return name
    return "".join(char if ((char.isascii() and (char.isalnum() or char in "_$-")) or
                            (char == "." and at)) else
                   "".join(f"@{unit:04x}" for unit in _units(char))
                   for at, char in enumerate(name))


def _units(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def name_of(directory: str) -> str:
    """The schema or table name a directory of :func:`path_name` holds."""
    if "@" not in directory:
        return directory
    units, out, at = bytearray(), [], 0
    while at < len(directory):
        if directory[at] == "@":
            units += bytes.fromhex(directory[at + 1:at + 5])
            at += 5
            continue
        if units:
            out.append(units.decode("utf-16-be"))
            units = bytearray()
        out.append(directory[at])
        at += 1
    if units:
        out.append(units.decode("utf-16-be"))
    return "".join(out)


def table_uri(location: str, schema: str, table: str) -> str:
    """Where a target table's Delta table is under its location."""
    return f"{location.rstrip('/')}/{path_name(schema)}/{path_name(table)}"


def maintain(table: Any, retain_hours: int, properties: Any = None) -> dict[str, Any]:
    """Compact a table's small files, then vacuum what was removed over ``retain_hours``
    ago; what each did."""
    done = dict(table.optimize.compact(commit_properties=properties))
    done["vacuumed"] = len(table.vacuum(retention_hours=retain_hours, dry_run=False,
                                        enforce_retention_duration=False,
                                        commit_properties=properties))
    return done


def tables_under(location: str) -> list[tuple[str, str]]:
    """The (schema, table) of every Delta table under a local lake location."""
    found = []
    if not os.path.isdir(location):
        return found
    for schema in sorted(os.listdir(location)):
        folder = os.path.join(location, schema)
        if not os.path.isdir(folder):
            continue
        for table in sorted(os.listdir(folder)):
            if os.path.isdir(os.path.join(folder, table, "_delta_log")):
                found.append((name_of(schema), name_of(table)))
    return found


@dataclass
class Stamp:
    """What a commit of setl's says of itself (``setl.*`` commit metadata)."""

    pipeline: str
    run: str
    epoch: int
    process_id: int
    position: BinlogPosition

    def metadata(self) -> dict[str, str]:
        where = self.position
        return {PREFIX + "pipeline": self.pipeline, PREFIX + "run": self.run,
                PREFIX + "epoch": str(self.epoch), PREFIX + "process_id": str(self.process_id),
                PREFIX + "position": json.dumps({"file": where.file, "pos": where.pos,
                                                 "gtid": where.gtid, "server": where.server})}

    @classmethod
    def of(cls, commit: dict[str, Any]) -> Stamp | None:
        if PREFIX + "position" not in commit:
            return None
        where = json.loads(commit[PREFIX + "position"])
        return cls(str(commit[PREFIX + "pipeline"]), str(commit.get(PREFIX + "run", "")),
                   int(commit[PREFIX + "epoch"]), int(commit[PREFIX + "process_id"]),
                   BinlogPosition(where["file"], int(where["pos"]), where.get("gtid", ""),
                                  where.get("server", "")))


def app_id(pipeline_id: str) -> str:
    return f"setl:{pipeline_id}"


def last_stamp(table: Any, pipeline_id: str, depth: int = 1000) -> Stamp | None:
    """The newest commit of setl's for the pipeline in the table's history (None: none)."""
    for commit in table.history(depth):
        stamp = Stamp.of(commit)
        if stamp is not None and stamp.pipeline == pipeline_id:
            return stamp
    return None


def restamp(location: str, pipeline_id: str, run: str, position: BinlogPosition | None
            ) -> list[str]:
    """Every table of a stopped pipeline under a lake location given another run, and with
    ``position`` a new position (an empty one: nothing loaded, so the next start loads
    from the pipeline's start again): an empty commit each. The tables changed."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    changed = []
    for schema, table in tables_under(location):
        delta = DeltaTable(table_uri(location, schema, table))
        found = last_stamp(delta, pipeline_id)
        if found is None:
            continue
        stamp = Stamp(pipeline_id, run, found.epoch, found.process_id,
                      found.position if position is None else position)
        write_deltalake(delta, pa.schema(delta.schema().to_arrow()).empty_table(),
                        mode="append", commit_properties=CommitProperties(
                            custom_metadata=stamp.metadata()))
        changed.append(f"{schema}.{table}")
    return changed


def position_of(location: str, pipeline_id: str) -> tuple[BinlogPosition, int, int] | None:
    """Where a lake stands for a pipeline: the earliest position of its tables (each holds
    every transaction up to it), the highest processId and owner epoch; None: no table
    holds any."""
    from deltalake import DeltaTable

    from shared import gtid

    stamps = [stamp for schema, table in tables_under(location)
              if (stamp := last_stamp(DeltaTable(table_uri(location, schema, table)),
                                      pipeline_id)) is not None and stamp.position.file]
    if not stamps:
        return None
    earliest = gtid.earliest([stamp.position for stamp in stamps])
    return earliest, max(s.process_id for s in stamps), max(s.epoch for s in stamps)
