"""Lake targets' locations and object-store options, as definitions give them.

A lake target (``type: delta``) names a ``location``: a local directory (an absolute path)
or an S3 URL (``s3://``, also an S3-compatible store; other object stores are refused by
name). Its tables are ``<location>/<schema>/<table>``. ``storage`` holds the object store's
options (delta-rs' names: ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``…); an option that is a
credential is a secret reference (``${SETL_…}`` or ``file:…``), resolved by :class:`Lake`
where the lake is read or written, and only for the store's endpoint the machine's rules
bind it to. A table's commits carry setl's stamp (:class:`Stamp`): where it stands.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared.errors import ConfigError, DatabaseHostError, SourceError
from shared.model import BinlogPosition
from shared.secrets import SecretRef

PREFIX = "setl."  # setl's commit metadata on a lake table
SCHEMES = ("s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "file://")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,127}")
# the object-store options setl passes on (object_store's names and aliases, any case) →
# what each is; anything else (a proxy, a metadata or container-credentials endpoint,
# unverified certificates, another store's option) could send the credential elsewhere
OPTIONS = {
    **dict.fromkeys(("aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint"),
                    "endpoint"),
    **dict.fromkeys(("aws_region", "region", "aws_default_region", "default_region"),
                    "region"),
    **dict.fromkeys(("aws_allow_http", "allow_http"), "allow_http"),
    **dict.fromkeys(("aws_access_key_id", "access_key_id"), "access_key_id"),
    **dict.fromkeys(("aws_secret_access_key", "secret_access_key"), "secret_access_key"),
    **dict.fromkeys(("aws_session_token", "aws_token", "session_token", "token"),
                    "session_token"),
}
CREDENTIALS = ("access_key_id", "secret_access_key", "session_token")  # by reference only
_PASSED = "AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP, AWS_ACCESS_KEY_ID, " \
          "AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN"
_WHY = (("proxy", "a proxy would receive every request, credentials included"),
        ("allow_invalid_certificates", "any server could pose as the store"),
        ("metadata", "the credentials would come from, and go to, another endpoint"),
        ("container", "the credentials would come from, and go to, another endpoint"),
        ("role", "the credentials would come from, and go to, another endpoint"),
        ("web_identity", "the credentials would come from, and go to, another endpoint"))
# an endpoint as object_store and Python read it alike: no user, query, '\\' or '%'
_ENDPOINT_URL = re.compile(r"(?P<scheme>https?)://(?P<host>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])"
                           r"(?::(?P<port>[0-9]{1,5}))?/?", re.IGNORECASE)
_REGION = re.compile(r"[A-Za-z0-9_-]{1,64}")
LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")


def location_problem(text: str) -> str | None:
    """Why ``text`` is not a lake location, or None."""
    if "\x00" in text or "\n" in text:
        return "a location is one line of text"
    if text.startswith("/"):
        return None
    if text.startswith(SCHEMES):
        return url_problem(text)
    return (f"location {text!r} is neither an absolute directory nor an object-store URL "
            f"({', '.join(SCHEMES)}); write /var/lib/lake or s3://bucket/path")


def url_problem(text: str) -> str | None:
    """Why a location URL is not plain (a bucket, then names), or None: a '.' or '..'
    segment, or a character a URL reader would decode or cut at, could make it name another
    place than the one it is checked as."""
    scheme, _, rest = text.partition("://")
    segments = rest.rstrip("/").split("/")
    odd = sorted(set(rest) & set("%?#\\@ \t\r"))
    if odd:
        return (f"location {text}: {', '.join(map(repr, odd))} is not taken in a location "
                "URL; write the bucket and path as plain names")
    if any(segment in ("", ".", "..") for segment in segments[1:]) or \
            (scheme != "file" and not segments[0]):
        return (f"location {text}: an empty, '.' or '..' path segment is not taken; write "
                "the path the lake is at, s3://bucket/path")
    return None


def segments(location: str) -> tuple[str, ...]:
    """A plain location (:func:`url_problem` found nothing) as its scheme, then its bucket
    and path segments."""
    scheme, _, rest = location.partition("://")
    return (scheme.lower(), *rest.rstrip("/").split("/"))


def option(key: str) -> str | None:
    """What a storage option is (``endpoint``, ``region``, ``access_key_id``…), or None:
    not one setl passes on."""
    return OPTIONS.get(key.lower())


def is_secret(key: str) -> bool:
    """Whether the option is a credential (a reference, resolved where the lake is opened)."""
    return option(key) in CREDENTIALS


def storage_problem(key: str, value: str) -> str | None:
    """Why ``key: value`` is not an object-store option a definition may hold, or None."""
    if not _KEY.fullmatch(key):
        return f"option name {key!r}: letters, digits, '_' or '.'"
    what = option(key)
    if what is None:
        why = next((why for word, why in _WHY if word in key.lower()), None)
        return (f"{key}: setl does not pass this option to the object store"
                f"{' (' + why + ')' if why else ''}; it passes {_PASSED}. Leave {key} out")
    if what in CREDENTIALS:
        try:
            SecretRef.parse(value)
        except Exception:
            return (f"{key} is a credential: write a reference, ${{SETL_NAME}} (an "
                    "environment variable) or file:/path (a file holding it), never the "
                    "value itself")
    elif what == "endpoint" and not ((found := _ENDPOINT_URL.fullmatch(value)) and
                                     int(found["port"] or 0) <= 65535):
        return (f"{key} {value!r}: write the store's endpoint as http(s)://host[:port], "
                "nothing else (no user, path or query)")
    elif what == "region" and not _REGION.fullmatch(value):
        return f"{key} {value!r}: write a region's name, e.g. eu-west-1"
    elif what == "allow_http" and value.lower() not in ("true", "false"):
        return f"{key} {value!r}: write true or false"
    return None


def storage_problems(found: dict[str, str]) -> dict[str, str]:
    """Why each option of a storage mapping is refused (by key): each alone
    (:func:`storage_problem`), one option named twice (``AWS_ENDPOINT_URL`` and
    ``endpoint``), a plain-http endpoint other than loopback (the credentials, given or the
    machine's own, would cross the network in clear)."""
    problems = {key: problem for key, value in found.items()
                if (problem := storage_problem(key, value)) is not None}
    seen: dict[str, str] = {}
    for key in found:
        what = option(key)
        if what is not None and what in seen and key not in problems:
            problems[key] = (f"{key} and {seen[what]} both give the store's {what}; keep "
                             "one of them")
        seen.setdefault(what or key, key)
    parts = None if problems else _endpoint_url(found)
    if parts is not None and parts["scheme"].lower() == "http" and \
            parts["host"].lower() not in LOOPBACK:
        key = seen["endpoint"]
        problems[key] = (f"{key} {found[key]}: plain http to a host other than this machine "
                         "(127.0.0.1, ::1, localhost) would send the store's credentials in "
                         "clear; use https")
    return problems


def reach_problem(rules: Any, location: str, found: dict[str, str]) -> str | None:
    """Why this machine's ``rules`` do not let a lake at ``location`` with options ``found``
    (each one taken by :func:`storage_problems`) reach its store, or None: its endpoint must
    be among ``database_hosts`` (when set), whatever credentials it uses (the machine's
    own, when it gives none), and each credential reference one the rules let this machine
    read and send there (``credentials``). A host name passes only as listed, never by
    the network its address lies in: object_store resolves it again, and could get
    another answer."""
    host, port = endpoint(location, found)
    literal = _literal(host)
    problem = rules.database_problem(host, literal)
    if problem is not None:
        return f"object store {host}:{port}: {problem}"
    for key, value in found.items():
        if is_secret(key):
            problem = rules.secret_problem(value) or \
                rules.credential_problem(value, host, port, literal)
            if problem is not None:
                return f"{key}: {problem}"
    return None


def _literal(host: str) -> tuple[Any, ...]:
    import ipaddress

    try:
        return (ipaddress.ip_address(host.strip("[]")),)
    except ValueError:
        return ()


def options(storage: Iterable[str], location: str = "", name: str = "") -> dict[str, str]:
    """The object store's options with each credential's reference resolved, under this
    machine's rules (:func:`storage_problems`, :func:`reach_problem`)."""
    from shared import confinement

    found = dict(entry.partition("=")[::2] for entry in storage)
    where = f"lake target {name or location}"
    problems = storage_problems(found)
    if problems:
        key = next(iter(problems))
        raise ConfigError(f"{where}: storage {problems[key]}")
    if not location.startswith(("/", "file://")):
        problem = reach_problem(confinement.current(), location, found)
        if problem is not None:
            raise DatabaseHostError(f"{where}: {problem}")
    return {key: SecretRef.parse(value).resolve() if is_secret(key) else value
            for key, value in found.items()}


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


def maintain(table: Any, retain_hours: int | None, properties: Any = None
             ) -> dict[str, Any]:
    """Compact a table's small files, then vacuum what was removed over ``retain_hours``
    ago (None: no vacuum); what each did."""
    done = dict(table.optimize.compact(commit_properties=properties))
    done["vacuumed"] = 0 if retain_hours is None else len(vacuum(table, retain_hours,
                                                                 properties))
    return done


def retention(lake_retain_hours: int) -> int | None:
    """A pipeline's ``lake_retain_hours`` as :func:`maintain` takes it: 0 means never
    vacuum (None), not "delete removed files at once"."""
    return lake_retain_hours if lake_retain_hours > 0 else None


def vacuum(table: Any, retain_hours: int, properties: Any = None, full: bool = False
           ) -> list[str]:
    """Delete the files the table removed over ``retain_hours`` ago; their names. ``full``:
    also files no commit names (a commit that failed left them) — only where nothing
    writes the table meanwhile: a file being written is one no commit names yet."""
    return table.vacuum(retention_hours=retain_hours, dry_run=False,
                        enforce_retention_duration=False, commit_properties=properties,
                        full=full)


OBJECT_STORES = ("s3://", "s3a://")  # the object stores this version writes


def support_problem(location: str) -> str | None:
    """Why this version of setl cannot write a lake at ``location``, or None."""
    if location.startswith("/") or location.startswith(("file://", *OBJECT_STORES)):
        return None
    return (f"lake location {location}: this version writes lakes in local directories "
            "(an absolute path) and in S3 or an S3-compatible store (s3://bucket/path, with "
            "AWS_ENDPOINT_URL for MinIO, Ceph, R2…); use one of them")


def _endpoint_url(options: dict[str, str]) -> re.Match[str] | None:
    """The endpoint the options name (None: AWS's own), as :data:`_ENDPOINT_URL` reads it."""
    url = next((value for key, value in options.items() if option(key) == "endpoint"), "")
    return _ENDPOINT_URL.fullmatch(url) if url else None


def endpoint(location: str, options: dict[str, str]) -> tuple[str, int]:
    """The host and port an object store's requests (and their signatures) go to."""
    parts = _endpoint_url(options)
    if parts is None:
        region = next((value for key, value in options.items() if option(key) == "region"),
                      "") or "us-east-1"
        return f"s3.{region}.amazonaws.com", 443
    host = parts["host"].lower()
    default = 80 if parts["scheme"].lower() == "http" else 443
    return host.strip("[]"), int(parts["port"]) if parts["port"] else default


class Lake:
    """A lake target's location with its object store's options, resolved where the lake is
    read or written: each credential's reference only if the machine's rules let it go to
    the store's endpoint (``security.credentials``), as a database password to its host."""

    def __init__(self, location: str, storage: Iterable[str] = (), name: str = "") -> None:
        from shared import confinement

        where = f"{'lake target ' + name + ': ' if name else ''}"
        problem = support_problem(location) or location_problem(location)
        if problem is not None:
            raise ConfigError(f"{where}{problem}")
        problem = confinement.current().lake_problem(location)  # the node's rules count
        if problem is not None:
            raise DatabaseHostError(f"{where}{problem}")
        self.location = location[len("file://"):] if location.startswith("file://") \
            else location
        self.local = self.location.startswith("/")
        self.storage = tuple(storage)
        self.options = options(self.storage, location, name)

    @classmethod
    def of(cls, source: Any) -> Lake:
        """The lake of a ``type: delta`` data source."""
        return cls(source.location, source.storage, source.name)

    def uri(self, schema: str, table: str) -> str:
        return table_uri(self.location, schema, table)

    def table(self, schema: str, table: str) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(self.uri(schema, table), storage_options=self.options or None)

    def exists(self, schema: str, table: str) -> bool:
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.uri(schema, table),
                                        storage_options=self.options or None)

    def create(self, schema: str, table: str, arrow_schema: Any, **kwargs: Any) -> Any:
        from deltalake import DeltaTable

        return DeltaTable.create(self.uri(schema, table), arrow_schema, mode="ignore",
                                 storage_options=self.options or None, **kwargs)

    def tables(self) -> list[tuple[str, str]]:
        """The (schema, table) of every Delta table under the location."""
        if self.local:
            return _local_tables(self.location)
        return self._store_tables()

    def _store_tables(self) -> list[tuple[str, str]]:
        from pyarrow import fs

        store, root = self._filesystem(), self.location.split("://", 1)[1].rstrip("/")
        found = []
        try:
            for schema in store.get_file_info(fs.FileSelector(root, allow_not_found=True)):
                if schema.type != fs.FileType.Directory:
                    continue
                for table in store.get_file_info(fs.FileSelector(schema.path)):
                    if table.type == fs.FileType.Directory and store.get_file_info(
                            f"{table.path}/_delta_log").type != fs.FileType.NotFound:
                        found.append((name_of(schema.base_name), name_of(table.base_name)))
        except OSError as exc:
            raise SourceError(f"cannot list the tables of lake {self.location}: {exc}"
                              ) from None
        return sorted(found)

    def _filesystem(self) -> Any:
        """pyarrow's S3 filesystem with the options delta-rs is given."""
        from pyarrow import fs

        named = {option(key): value for key, value in self.options.items()}
        settings: dict[str, Any] = {}
        parts = _endpoint_url(self.options)
        if parts is not None:
            netloc = parts["host"] + (f":{parts['port']}" if parts["port"] else "")
            settings.update(endpoint_override=netloc, scheme=parts["scheme"].lower())
        for key, name in (("access_key_id", "access_key"), ("secret_access_key", "secret_key"),
                          ("session_token", "session_token"), ("region", "region")):
            if named.get(key):
                settings[name] = named[key]
        return fs.S3FileSystem(**settings)


def _local_tables(location: str) -> list[tuple[str, str]]:
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


NEAR = 20  # commits read first for a table's stamp (each commit of setl's checks it)


def last_stamp(table: Any, pipeline_id: str, depth: int = 1000) -> Stamp | None:
    """The newest commit of setl's for the pipeline in the table's history (None: none),
    looked for in its newest commits first (reading 1,000 takes ~25 ms on a local disk)."""
    for limit in (min(NEAR, depth), depth):
        found = table.history(limit)
        for commit in found:
            stamp = Stamp.of(commit)
            if stamp is not None and stamp.pipeline == pipeline_id:
                return stamp
        if len(found) < limit:
            return None  # the whole history was read
    return None


def restamp(lake: Lake, pipeline_id: str, run: str, position: BinlogPosition | None
            ) -> list[str]:
    """Every table of a stopped pipeline under a lake location given another run, and with
    ``position`` a new position (an empty one: nothing loaded, so the next start loads
    from the pipeline's start again): an empty commit each. The tables changed."""
    import pyarrow as pa
    from deltalake import CommitProperties, write_deltalake

    changed = []
    for schema, table in lake.tables():
        delta = lake.table(schema, table)
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


def position_of(lake: Lake, pipeline_id: str) -> tuple[BinlogPosition, int, int] | None:
    """Where a lake stands for a pipeline: the earliest position of its tables (each holds
    every transaction up to it), the highest processId and owner epoch; None: no table
    holds any."""
    from shared import gtid

    stamps = [stamp for schema, table in lake.tables()
              if (stamp := last_stamp(lake.table(schema, table), pipeline_id)) is not None
              and stamp.position.file]
    if not stamps:
        return None
    earliest = gtid.earliest([stamp.position for stamp in stamps])
    return earliest, max(s.process_id for s in stamps), max(s.epoch for s in stamps)
