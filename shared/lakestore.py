"""Where a lake is and what reaches its object store, as definitions give them.

A lake target's ``location`` is a local directory (an absolute path) or an S3 URL (also an
S3-compatible store); ``storage`` holds the object store's options. Only the options listed
here are passed on, only the credential ones take secret references, and the store's
endpoint must pass the machine's rules (:func:`reach_problem`): an option that sent requests
elsewhere (a proxy, a metadata endpoint) would send the credential with them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from shared.errors import ConfigError, DatabaseHostError
from shared.secrets import SecretRef

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
    parts = None if problems else endpoint_url(found)
    if parts is not None and parts["scheme"].lower() == "http" and \
            parts["host"].lower() not in LOOPBACK:
        key = seen["endpoint"]
        problems[key] = (f"{key} {found[key]}: plain http to a host other than this machine "
                         "(127.0.0.1, ::1, localhost) would send the store's credentials in "
                         "clear; use https")
    return problems


def reach_problem(rules: Any, location: str, found: dict[str, str],
                  environ: Mapping[str, str] | None = None) -> str | None:
    """Why this machine's ``rules`` do not let a lake at ``location`` with options ``found``
    (each one taken by :func:`storage_problems`) reach its store, or None: its endpoint must
    be among ``database_hosts`` (when set), whatever credentials it uses (the machine's
    own, when it gives none), and each credential reference one the rules let this machine
    read and send there (``credentials``). A host name passes only as listed, never by
    the network its address lies in: object_store resolves it again, and could get
    another answer."""
    named = _environment(environ, ENVIRONMENT_ENDPOINTS)
    if endpoint_url(found) is None and named and not _ENDPOINT_URL.fullmatch(named):
        return (f"the node's environment names object store {named!r} (AWS_ENDPOINT_URL), "
                "which setl cannot check against its rules: write it as "
                "http(s)://host[:port], or give the lake's endpoint in its storage options")
    host, port = endpoint(location, found, environ)
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
        problem = reach_problem(confinement.current(), location, found, os.environ)
        if problem is not None:
            raise DatabaseHostError(f"{where}: {problem}")
    return {key: SecretRef.parse(value).resolve() if is_secret(key) else value
            for key, value in found.items()}




OBJECT_STORES = ("s3://", "s3a://")  # the object stores this version writes


def support_problem(location: str) -> str | None:
    """Why this version of setl cannot write a lake at ``location``, or None."""
    if location.startswith("/") or location.startswith(("file://", *OBJECT_STORES)):
        return None
    return (f"lake location {location}: this version writes lakes in local directories "
            "(an absolute path) and in S3 or an S3-compatible store (s3://bucket/path, with "
            "AWS_ENDPOINT_URL for MinIO, Ceph, R2…); use one of them")


def endpoint_url(options: dict[str, str]) -> re.Match[str] | None:
    """The endpoint the options name (None: AWS's own), as :data:`_ENDPOINT_URL` reads it."""
    url = next((value for key, value in options.items() if option(key) == "endpoint"), "")
    return _ENDPOINT_URL.fullmatch(url) if url else None


# what the object store reads from the node's environment for what the options leave out
ENVIRONMENT_ENDPOINTS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")
ENVIRONMENT_REGIONS = ("AWS_REGION", "AWS_DEFAULT_REGION")


def _environment(environ: Mapping[str, str] | None, names: tuple[str, ...]) -> str:
    return next((environ[name] for name in names if (environ or {}).get(name)), "")


def endpoint(location: str, options: dict[str, str],
             environ: Mapping[str, str] | None = None) -> tuple[str, int]:
    """The host and port an object store's requests (and their signatures) go to: the
    options' endpoint, else the one ``environ`` names (the node's environment, where the
    store is opened: object_store reads it there; not the manager's at apply), else AWS's
    of the region."""
    parts = endpoint_url(options) or _ENDPOINT_URL.fullmatch(
        _environment(environ, ENVIRONMENT_ENDPOINTS))
    if parts is None:
        region = next((value for key, value in options.items() if option(key) == "region"),
                      "") or _environment(environ, ENVIRONMENT_REGIONS) or "us-east-1"
        return f"s3.{region}.amazonaws.com", 443
    host = parts["host"].lower()
    default = 80 if parts["scheme"].lower() == "http" else 443
    return host.strip("[]"), int(parts["port"]) if parts["port"] else default
