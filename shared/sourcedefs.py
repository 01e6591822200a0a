"""The ``sources:`` of a definitions file: databases (one host or a replica set, with their
password and TLS by reference), lakes (a location and its storage options) and
subscriptions, each checked against the machine's confinement as it is read
(:mod:`shared.definitions` reads the rest)."""

from __future__ import annotations

import re
from typing import Any

from shared import confinement, lakestore, members
from shared.errors import ConfigError
from shared.model import DataSource, TlsOptions
from shared.secrets import SecretRef
from shared.yamlreader import MISSING, Field, Issues, Mapping

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,62}")


def name_problem(value: str) -> str | None:
    """What is wrong with a source's, channel's or pipeline's name, or None."""
    if _NAME.fullmatch(value):
        return None
    return (f"invalid name {value!r}: start with a lower-case letter, then lower-case "
            "letters, digits, '_' or '-' (at most 63)")


class SourceFields:
    """The source half of the definitions' reader (its attributes are the reader's)."""

    issues: Issues
    sources: set[str]  # every source name known so far
    targets_only: dict[str, str]  # a lake's or a subscription's name → its type

    def source(self, item: Field) -> DataSource | None:
        entry = item.mapping()
        if entry is None:
            return None
        name = entry.get("name", lambda f: f.string(name_problem), required=True)
        if name is not MISSING:  # known even if broken: no "unknown source" for its users
            self.sources.add(name)
        kind = entry.get("type", lambda f: f.choice(["mysql", "mariadb", "delta",
                                                     "subscription"]), "mysql")
        if kind in ("delta", "subscription") and name is not MISSING:
            self.targets_only[name] = kind
        elif name is not MISSING:  # (a stored lake defined again as a database)
            self.targets_only.pop(name, None)
        if kind == "delta":
            return self._lake(entry, name)
        if kind == "subscription":  # read by applications (setl subscribe): nothing to reach
            entry.close()
            return None if name is MISSING else DataSource(name, "", 0, "", None, kind)
        # a replica set (hosts) or one host; the set's first member is the one used at first
        replica_set = entry.has("hosts")
        if replica_set and (entry.has("host") or entry.has("port")):
            entry.field("hosts").fail(  # type: ignore[union-attr]
                "give either 'host' (and 'port') or 'hosts' (a replica set's members, "
                "host:port each), not both")
        hosts = entry.get("hosts", self._members, ())
        host = entry.get("host", Field.string, required=not replica_set)
        port = entry.get("port", lambda f: f.integer(1, 65535), 3306)
        if replica_set:
            host, port = members.split(hosts[0]) if hosts else (MISSING, MISSING)
        primary = entry.get("primary", lambda f: f.choice(list(members.FINDERS)), "read_only")
        switch_after_s = entry.get("switch_after_s", lambda f: f.integer(1, 86_400), 10)
        user = entry.get("user", Field.string, "root")
        password = entry.get("password", self._secret, None)
        charset = entry.get("charset", lambda f: f.string(_charset_problem), "utf8mb4")
        tls = entry.get("tls", self._tls, None)
        rules = confinement.checked_rules()
        if rules is not None and isinstance(password, SecretRef) and \
                MISSING not in (host, port):
            for member_host, member_port in [members.split(m) for m in hosts] or [(host, port)]:
                problem = rules.credential_problem(password.text, member_host, member_port)
                if problem is not None:
                    entry.field("password").fail(problem)  # type: ignore[union-attr]
                    break
        entry.close()
        if MISSING in (name, host):
            return None
        return DataSource(name, host, port, user, password, kind, charset, tls, hosts,
                          primary, switch_after_s)

    def _lake(self, entry: Mapping, name: Any) -> DataSource | None:
        """A lake target (``type: delta``): its tables under ``location``, the object
        store's options in ``storage`` (a credential among them by reference)."""
        location = entry.get("location", lambda f: f.string(
            lambda text: lakestore.location_problem(text) or lakestore.support_problem(text)),
                             required=True)
        storage = entry.get("storage", self._storage, ())
        storage = MISSING if storage is None else storage  # an option refused
        rules = confinement.checked_rules()
        if rules is not None and isinstance(location, str):
            problem = rules.lake_problem(location)
            if problem is not None:
                entry.field("location").fail(problem)  # type: ignore[union-attr]
            elif isinstance(storage, tuple) and not location.startswith(("/", "file://")):
                # its store's endpoint, and each credential's reference, as the node checks
                found = dict(option.partition("=")[::2] for option in storage)
                problem = lakestore.reach_problem(rules, location, found)
                if problem is not None:  # (no storage: the store is AWS's, by location)
                    (entry.field("storage") or entry.field("location")).fail(  # type: ignore[union-attr]
                        problem)
        entry.close()
        if MISSING in (name, location, storage):
            return None
        return DataSource(name, "", 0, "", None, "delta", location=location, storage=storage)

    def _storage(self, item: Field) -> Any:
        entry = item.mapping()
        if entry is None:
            return MISSING
        given = {key: value for key in list(entry.entries)
                 if (value := entry.get(key, Field.string, required=True)) is not MISSING}
        problems = lakestore.storage_problems(given)
        rules = confinement.checked_rules()
        for key, value in given.items():
            if key not in problems and rules is not None and lakestore.is_secret(key):
                problem = rules.secret_problem(value)
                if problem is not None:
                    problems[key] = problem
        for key, problem in problems.items():
            entry.field(key).fail(problem)  # type: ignore[union-attr]
        entry.close()
        if problems or len(given) < len(entry.entries):  # nothing to check the store with
            return None
        return tuple(f"{key}={value}" for key, value in given.items())

    def _members(self, item: Field) -> Any:
        if not item.is_list():
            return item.expected("a list of host:port")
        found: list[str] = []
        for child in item.items():
            text = child.string()
            if text is MISSING:
                continue
            problem = members.problem(text)
            if problem is not None:
                child.fail(problem)
            elif members.normal(text) in found:
                child.fail(f"{text} is named twice")
            else:
                found.append(members.normal(text))
        if not found:
            return item.fail("a replica set needs at least one member (host:port)")
        return tuple(found)

    def _tls(self, item: Field) -> Any:
        entry = item.mapping()
        if entry is None:
            return MISSING
        tls = TlsOptions(entry.get("ca", Field.string, ""), entry.get("cert", Field.string, ""),
                         entry.get("key", Field.string, ""),
                         entry.get("verify_identity", Field.boolean, False))
        rules = confinement.checked_rules()
        problems = {what: rules.tls_file_problem(what, getattr(tls, what))
                    for what in ("ca", "cert", "key")
                    if rules is not None and getattr(tls, what)}
        for what, problem in problems.items():
            if problem is not None:
                entry.field(what).fail(problem)  # type: ignore[union-attr]
        entry.close()
        if any(problems.values()):
            return MISSING
        if not tls.ca:
            return item.fail("tls needs 'ca' (the certificate authority that signed the "
                             "server's certificate): setl never uses TLS without verifying "
                             "the server")
        if bool(tls.cert) != bool(tls.key):
            return item.fail("give both 'cert' and 'key' for a client certificate, or neither")
        return tls

    def _secret(self, item: Field) -> Any:
        text = item.string()
        if text is MISSING:
            return MISSING
        try:
            ref = SecretRef.parse(text)
        except ConfigError as exc:
            return item.fail(exc.issues[0].message)
        rules = confinement.checked_rules()
        problem = rules.secret_problem(text) if rules is not None else None
        return item.fail(problem) if problem else ref


def _charset_problem(value: str) -> str | None:
    """A connection's character set other than utf8mb4 turns the characters it lacks into
    '?' in every row read for a copy (the stream reads the binlog's bytes)."""
    if value.lower() == "utf8mb4":
        return None
    return (f"charset {value}: setl reads and writes text as utf8mb4 (the rows it reads "
            f"for copies through a {value} connection would lose the characters {value} "
            "lacks, as '?'); leave charset out or give utf8mb4")
