"""Lake targets' locations and object-store options, as definitions give them.

A lake target (``type: delta``) names a ``location``: a local directory (an absolute path)
or an object-store URL delta-rs writes (``s3://``, ``gs://``, ``az://``, ``abfss://``). Its
tables are ``<location>/<schema>/<table>``. ``storage`` holds the object store's options
(delta-rs' names: ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``…); an option that is a credential
is a secret reference (``${SETL_…}`` or ``file:…``), resolved only in the node that writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from shared.secrets import SecretRef

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


def table_uri(location: str, schema: str, table: str) -> str:
    """Where a target table's Delta table is under its location."""
    return f"{location.rstrip('/')}/{schema}/{table}"
