"""Connections to MySQL/MariaDB endpoints, for the node and for CLI tools alike."""

from __future__ import annotations

from typing import Any

import pymysql

from shared.errors import SourceError
from shared.model import DataSource


def connection_settings(source: DataSource) -> dict[str, Any]:
    """PyMySQL keyword arguments; the password reference is resolved here, and only here."""
    return {"host": source.host, "port": source.port, "user": source.user,
            "password": source.password.resolve() if source.password else "",
            "charset": source.charset, "connect_timeout": 10}


def connect(source: DataSource, **extra: Any) -> pymysql.Connection:
    try:
        return pymysql.connect(**{**connection_settings(source), **extra})
    except pymysql.MySQLError as exc:
        raise SourceError(f"cannot connect to {source.name} ({source.host}:{source.port}) as "
                          f"{source.user}: {exc.args[-1] if exc.args else exc}") from None
