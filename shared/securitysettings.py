"""The ``security`` section of a manager or node configuration: where definitions' secrets,
processors, database hosts, credentials and lake targets may reach, read into a
:class:`shared.confinement.Confinement` with the same field reader as the rest of the
configuration (:mod:`shared.settings`), so errors name file, line and field."""

from __future__ import annotations

import re
from pathlib import Path

from shared.confinement import Confinement, Credential, processor_path_dirs
from shared.lakestore import location_problem
from shared.yamlreader import MISSING, Field


def read_security(found: Field | None, base: Path) -> Confinement:
    """The ``security`` section: what definitions may reach (shared.confinement). Directories
    are relative to ``base``, the configuration file's folder; by default ``secrets/`` beside
    it (without a file, the installation's ``conf/secrets``) and the processor directories of
    the installation and ``$SETL_PROCESSORS_PATH``, to which ``processor_dirs`` adds."""
    secret_dirs: tuple[Path, ...] = (base / "secrets",)
    env_prefix, listed, hosts = "SETL_", (), ()
    entry = found.mapping() if found else None
    if entry is not None:
        secret_dirs = entry.get("secret_dirs", lambda f: _directories(f, base), secret_dirs)
        env_prefix = entry.get("env_prefix", lambda f: f.string(_env_prefix), env_prefix)
        listed = entry.get("processor_dirs", lambda f: _directories(f, base), ())
        hosts = entry.get("database_hosts", _hosts, ())
        credentials = entry.get("credentials", _credentials, ())
        lakes = entry.get("lake_locations", _lake_locations, ())
        entry.close()
    else:
        credentials, lakes = (), ()
    return Confinement(secret_dirs, env_prefix, (*processor_path_dirs(), *listed), hosts,
                       credentials, lake_locations=lakes)


def _lake_locations(item: Field) -> object:
    """``lake_locations``: the directories and object-store URL prefixes a definition's lake
    target may write under."""
    if not item.is_list():
        return item.expected("a list of directories or URL prefixes")
    found = []
    for element in item.items():
        text = element.string(location_problem)
        if text is MISSING:
            return MISSING
        found.append(text)
    return tuple(found)


def _credentials(item: Field) -> object:
    """``credentials``: where each password may be sent — ``{secret: REFERENCE-OR-GLOB,
    hosts: [NAMES-OR-NETWORKS], ports: [...]}`` each (a ``file:`` reference matches as
    written or as the file's resolved path)."""
    if not item.is_list():
        return item.expected("a list of {secret, hosts, ports}")
    found = []
    for element in item.items():
        entry = element.mapping()
        if entry is None:
            found.append(MISSING)
            continue
        secret = entry.get("secret", Field.string, required=True)
        hosts = entry.get("hosts", _hosts, required=True)
        ports = entry.get("ports", _ports, ())
        entry.close()
        if MISSING in (secret, hosts, ports):
            found.append(MISSING)
            continue
        found.append(Credential(secret, hosts, ports))
    return MISSING if MISSING in found else tuple(found)


def _ports(item: Field) -> object:
    if not item.is_list():
        return item.expected("a list of port numbers")
    found = [entry.integer(1, 65535) for entry in item.items()]
    return MISSING if MISSING in found else tuple(found)


def _hosts(item: Field) -> object:
    if not item.is_list():
        return item.expected("a list of host names and networks (e.g. 10.0.0.0/8)")
    found = [entry.string() for entry in item.items()]
    return MISSING if MISSING in found else tuple(found)


def _directories(item: Field, base: Path) -> object:
    if not item.is_list():
        return item.expected("a list of directories")
    found = [entry.string() for entry in item.items()]
    if MISSING in found:
        return MISSING
    return tuple((base / Path(text).expanduser()).resolve() for text in found)


def _env_prefix(value: str) -> str | None:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        return None
    return (f"expected the start of environment variable names such as SETL_, got "
            f"\"{value}\" (an empty prefix would let a definition read any variable)")
