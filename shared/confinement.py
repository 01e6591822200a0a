"""What a definition may reach on this machine, as the daemon's operator configured it.

Whoever may apply a definition must not thereby read the node's files or run code on it. So
a password reference names a file only under the configured secret directories (after
``..`` and symlinks are followed) or an environment variable only with the configured prefix,
and a processor is a module found in the configured processor directories, never just any
installed module. The node checks where it resolves and loads (that check is the one that
counts: a definition can also be written into ZooKeeper directly); the manager checks the
same rules at apply, for an early error with file, line and field.

Each daemon sets its rules once at start (:func:`confine`); a Spark worker gets the node's
with the compiled pipeline. Without a configuration the defaults are the safe ones:
``conf/secrets`` and ``conf/processors`` of the installation, variables starting ``SETL_``.
"""

from __future__ import annotations

import fnmatch
import importlib
import importlib.machinery
import importlib.util
import ipaddress
import os
import re
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

CONF = Path(__file__).resolve().parents[1] / "conf"
BUILT_IN_PROCESSORS = CONF / "processors"
DEFAULT_ENV_PREFIX = "SETL_"
_ENV = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}")
_FILE = "file:"
_PROCESSOR = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
_SETTING = "its 'security' settings"


def processor_path_dirs() -> tuple[Path, ...]:
    """The built-in processors and ``$SETL_PROCESSORS_PATH`` (``:``-separated)."""
    extra = [Path(part) for part in os.environ.get("SETL_PROCESSORS_PATH", "").split(":") if part]
    return (BUILT_IN_PROCESSORS, *extra)


# what setl reads itself (the CLI's and daemons' own settings): never a definition's password
RESERVED_ENV = ("SETL_TOKEN", "SETL_API_TOKEN", "SETL_CA", "SETL_CERT", "SETL_KEY",
                "SETL_MANAGER", "SETL_CONFIG", "SETL_ZK_HOSTS", "SETL_ZK_ROOT",
                "SETL_PROCESSORS_PATH")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def resolve(host: str) -> tuple[Address, ...]:
    """Every address of ``host``, resolved once: the check and the connection use these
    (a name resolved again could answer otherwise: DNS rebinding)."""
    try:
        return (ipaddress.ip_address(host),)
    except ValueError:
        pass
    try:
        found = dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0])
                              for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
    except (OSError, ValueError):
        return ()
    return tuple(found)


def _allows(entries: tuple[str, ...], host: str, addresses: tuple[Address, ...]) -> bool:
    """A host name listed as it is, or every address in a listed network."""
    if host.lower() in (entry.lower() for entry in entries):
        return True
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue
    return bool(addresses and networks) and all(
        any(address in network for network in networks) for address in addresses)


@dataclass(frozen=True)
class Credential:
    """Where the password a reference names may be sent (the operator's ``credentials``)."""

    secret: str  # a reference, or a glob over references (file:/etc/setl/secrets/shop-*)
    hosts: tuple[str, ...]  # host names and networks
    ports: tuple[int, ...] = ()  # empty: any

    def __str__(self) -> str:
        ports = f" port {', '.join(map(str, self.ports))}" if self.ports else ""
        return f"{', '.join(self.hosts)}{ports}"


@dataclass(frozen=True)
class Confinement:
    secret_dirs: tuple[Path, ...] = (CONF / "secrets",)
    env_prefix: str = DEFAULT_ENV_PREFIX
    processor_dirs: tuple[Path, ...] = (BUILT_IN_PROCESSORS,)
    # the database hosts a definition may name: host names and networks; empty: any
    database_hosts: tuple[str, ...] = ()
    # where each password may be sent; empty: anywhere database_hosts allows
    credentials: tuple[Credential, ...] = ()
    # references of the daemon's own secrets (its API token, webhook tokens): never a
    # definition's
    reserved: tuple[str, ...] = ()
    # the lake locations a definition may write (directories or URL prefixes); empty: any
    lake_locations: tuple[str, ...] = ()

    # -- database hosts ---------------------------------------------------------------------
    def database_problem(self, host: str, addresses: tuple[Address, ...] | None = None
                         ) -> str | None:
        """Why a definition may not connect to ``host`` (at ``addresses``, resolved once),
        or None. A host name in the list passes as it is; otherwise every address the host
        has must lie in a listed network."""
        if not self.database_hosts:
            return None
        if _allows(self.database_hosts, host, resolve(host) if addresses is None
                   else addresses):
            return None
        return (f"host {host} is not among the database hosts this machine may connect to "
                f"({', '.join(self.database_hosts)}; {_SETTING}: database_hosts); use "
                "an allowed host, or have the operator add it")

    def credential_problem(self, reference: str, host: str, port: int,
                           addresses: tuple[Address, ...] | None = None) -> str | None:
        """Why the password ``reference`` names may not be sent to ``host:port``, or None.
        With ``credentials`` configured, every reference must be bound to the endpoint."""
        if not self.credentials:
            return None
        forms = {reference}
        if reference.startswith(_FILE):
            forms.add(_FILE + str(Path(reference[len(_FILE):]).resolve()))
        bound = [credential for credential in self.credentials
                 if any(fnmatch.fnmatchcase(form, credential.secret) for form in forms)]
        if not bound:
            return (f"password reference {reference} is bound to no database endpoint "
                    f"({_SETTING}: credentials); have the operator bind it to the servers "
                    "it belongs to")
        addresses = resolve(host) if addresses is None else addresses
        if any(_allows(credential.hosts, host, addresses) and
               (not credential.ports or port in credential.ports) for credential in bound):
            return None
        return (f"password reference {reference} may be sent only to "
                f"{'; '.join(map(str, bound))} ({_SETTING}: credentials), not to "
                f"{host}:{port}; use the credentials of that server, or have the operator "
                "bind this one to it")

    def lake_problem(self, location: str) -> str | None:
        """Why a definition may not write a lake at ``location``, or None: with
        ``lake_locations`` set, it must lie under one of them (a directory by its resolved
        path; a URL by its scheme, bucket and path segments, with no '.', '..' or encoded
        character in it that a store's URL reader would read otherwise)."""
        from shared import lakestore

        if not self.lake_locations:
            return None
        local = location[len("file://"):] if location.startswith("file://") else location
        problem = lakestore.url_problem(location) if "://" in location else None
        if problem is not None:
            return problem
        if local.startswith("/"):
            resolved = Path(local).resolve()
            if any(resolved.is_relative_to(Path(root).resolve())
                   for root in self.lake_locations if root.startswith("/")):
                return None
        else:
            parts = lakestore.segments(location)
            if any(lakestore.url_problem(root) is None and
                   parts[:len(lakestore.segments(root))] == lakestore.segments(root)
                   for root in self.lake_locations if "://" in root):
                return None
        return (f"location {location} is not under the lake locations this machine may write "
                f"({', '.join(self.lake_locations)}; {_SETTING}: lake_locations); use one of "
                "them, or have the operator add it")

    # -- password references ----------------------------------------------------------------
    def secret_file(self, reference: str) -> Path:
        """The file a ``file:`` reference may be read from (resolved, inside a secret
        directory); raise PermissionError with what to do otherwise."""
        if "\x00" in reference:
            raise PermissionError(f"password reference {reference[:40]!r}: the path holds the "
                                  "character U+0000; name a file")
        named = Path(reference[len(_FILE):])
        resolved = named.resolve()
        if self._secret(resolved):
            return resolved
        allowed = ", ".join(str(directory) for directory in self.secret_dirs)
        # where a symlink leads is said only for one in a secret directory (the operator's
        # mistake to see); elsewhere it would show whoever applies the machine's links
        # (/proc/self/cwd, /proc/self/fd/N): then only the '..' are worked out
        lexical = Path(os.path.normpath(named.absolute()))
        shown = resolved if self._secret(lexical) else lexical
        followed = "" if shown == named.absolute() else f" (it leads to {shown})"
        if not named.is_absolute() and not followed:  # (the directory itself is not said)
            followed = (" (a relative path is read from the working directory of the "
                        "process that reads it, not from the configuration file's: give it "
                        "absolute)")
        raise PermissionError(
            f"password reference {reference}: this machine reads password files only under "
            f"{allowed} ({_SETTING}: secret_dirs); {named} is outside{followed}. Put the file "
            "there, or have the operator add its directory to secret_dirs")

    def tls_file_problem(self, what: str, path: str) -> str | None:
        """Why a ``tls:`` file (``ca``, ``cert``, ``key``) may not be read here, or None: it
        must lie in a secret directory, as a password file does — a CA chosen by whoever
        writes definitions would make any server "verified". Whether the file exists is not
        said."""
        if "\x00" in path:
            return f"tls {what}: the path holds the character U+0000; name a file"
        named = Path(path)
        if named.is_absolute() and self._secret(named.resolve()):
            return None
        allowed = ", ".join(str(directory) for directory in self.secret_dirs)
        return (f"tls {what} {path}: this machine reads TLS files only under {allowed} "
                f"({_SETTING}: secret_dirs), by absolute path; put the file there, or have "
                "the operator add its directory to secret_dirs")

    def _reserved(self, reference: str) -> bool:
        found = _ENV.fullmatch(reference)
        if found and found["name"] in RESERVED_ENV:
            return True
        if reference.startswith(_FILE):
            path = Path(reference[len(_FILE):]).resolve()
            return any(own.startswith(_FILE) and Path(own[len(_FILE):]).resolve() == path
                       for own in self.reserved)
        return reference in self.reserved

    def _secret(self, path: Path) -> bool:
        return any(path.is_relative_to(directory.resolve()) for directory in self.secret_dirs)

    def secret_env(self, reference: str) -> str:
        """The variable an ``${ENV}`` reference may be read from; PermissionError if its
        name lacks the prefix."""
        found = _ENV.fullmatch(reference)
        name = found["name"] if found else reference
        if name.startswith(self.env_prefix):
            return name
        raise PermissionError(
            f"password reference {reference}: this machine reads only environment variables "
            f"whose name starts with {self.env_prefix} ({_SETTING}: env_prefix); export the "
            f"password as {self.env_prefix}{name} and refer to ${{{self.env_prefix}{name}}}")

    def secret_problem(self, reference: str) -> str | None:
        """Why a reference may not be read here, or None."""
        if "\x00" in reference:
            return (f"password reference {reference[:40]!r} holds the character U+0000; name "
                    "a file (file:/path) or a variable (${NAME})")
        if self._reserved(reference):
            return (f"password reference {reference} names one of setl's own secrets (a "
                    "token of its API, its webhooks or its CLI); a definition cannot use it")
        try:
            if reference.startswith(_FILE):
                self.secret_file(reference)
            else:
                self.secret_env(reference)
        except PermissionError as exc:
            return str(exc)
        return None

    # -- processors -------------------------------------------------------------------------
    def processor_problem(self, name: str) -> str | None:
        """Why ``module:function`` may not run here, or None (it need not exist yet). Nothing
        is imported to find out."""
        if not _PROCESSOR.fullmatch(name):  # a definition written into ZooKeeper is unchecked
            return (f"processor {name}: expected module:function made of Python names, "
                    "e.g. my_processors:clean_row")
        module, _, function = name.partition(":")
        parts = [*module.split("."), function]
        if any(part.startswith("_") for part in parts):
            return (f"processor {name}: a name starting with '_' is private; "
                    "name a public module and function")
        top = module.split(".")[0]
        spec = self._spec(top)
        if spec is None:
            return (f"processor {name}: module {top} is not in the processor "
                    f"directories of this machine ({self._dirs()}; {_SETTING}: "
                    "processor_dirs, or $SETL_PROCESSORS_PATH); installed modules cannot be "
                    "processors. Put the module there")
        if spec.origin is None:  # a folder without __init__.py: merged with others of its name
            return (f"processor {name}: {top} in the processor directories is a folder "
                    "without __init__.py; add one to make it a package")
        installed = self._installed(top)
        if installed is not None:
            return (f"processor {name}: module {top} ({spec.origin}) has the name of "
                    f"{installed}; give your module another name")
        return None

    def load_module(self, name: str) -> ModuleType:
        """The processor's module, executed only from a file in a processor directory (found
        there, never through ``sys.path``); ImportError (with what to do) otherwise."""
        problem = self.processor_problem(name)
        if problem is not None:
            raise ImportError(problem)
        module_name = name.partition(":")[0]
        top = module_name.split(".")[0]
        with _loading:  # E/T threads of the node: none may see a module half executed
            if top not in sys.modules:
                spec = self._spec(top)
                assert spec is not None and spec.loader is not None  # processor_problem found it
                loaded = importlib.util.module_from_spec(spec)
                sys.modules[top] = loaded
                try:
                    spec.loader.exec_module(loaded)
                except BaseException:
                    del sys.modules[top]
                    raise
            self._check_loaded(name, sys.modules[top])  # before any submodule runs
            for directory in self.processor_dirs:  # the modules beside it (at the end: they
                if str(directory) not in sys.path:  # cannot shadow installed ones)
                    sys.path.append(str(directory))
            module = sys.modules[top] if module_name == top else \
                importlib.import_module(module_name)
        return self._check_loaded(name, module)

    def _check_loaded(self, name: str, module: ModuleType) -> ModuleType:
        file = getattr(module, "__file__", None)
        if file is None or not self._inside(Path(file).resolve()):
            raise ImportError(f"processor {name}: a module named {module.__name__} is already "
                              f"loaded from {file or 'no file'}, outside the processor "
                              "directories; give your module another name")
        return module

    def _spec(self, module: str) -> importlib.machinery.ModuleSpec | None:
        top = module.split(".")[0]
        return importlib.machinery.PathFinder.find_spec(
            top, [str(directory) for directory in self.processor_dirs if directory.is_dir()])

    def _installed(self, top: str) -> str | None:
        """What else answers to the module name ``top`` in this process, or None."""
        if top in sys.builtin_module_names or top in sys.stdlib_module_names:
            return "a module of Python's standard library"
        elsewhere = [entry for entry in sys.path
                     if not self._inside(Path(entry or ".").resolve())]
        for finder in sys.meta_path:  # e.g. an editable install's finder, beside sys.path
            try:
                if finder is importlib.machinery.PathFinder:
                    spec = finder.find_spec(top, elsewhere)
                else:
                    find_spec = getattr(finder, "find_spec", None)
                    spec = find_spec(top, None) if find_spec is not None else None
            except (ImportError, ValueError):
                spec = None
            if spec is None:
                continue
            places = [spec.origin] if spec.origin else list(spec.submodule_search_locations or ())
            if not places or not all(self._inside(Path(place).resolve()) for place in places):
                return f"an installed module ({', '.join(places) or top})"
        return None

    def _inside(self, path: Path) -> bool:
        return any(path.is_relative_to(d.resolve()) for d in self.processor_dirs)

    def _dirs(self) -> str:
        return ", ".join(str(directory) for directory in self.processor_dirs)


_current = Confinement(processor_dirs=processor_path_dirs())
_loading = threading.RLock()


def confine(rules: Confinement) -> None:
    """This process's rules from now on (a daemon at start, a Spark worker per job)."""
    global _current
    _current = rules


def current() -> Confinement:
    return _current


_checking: ContextVar[Confinement | None] = ContextVar("setl_confinement_checking",
                                                      default=None)


@contextmanager
def checking(rules: Confinement | None) -> Iterator[None]:
    """While definitions are read (the manager's apply): each password reference and
    processor is checked against ``rules`` where it is parsed, so an error names its line."""
    token = _checking.set(rules)
    try:
        yield
    finally:
        _checking.reset(token)


def checked_rules() -> Confinement | None:
    """The rules definitions being read now are checked against (None: not checked)."""
    return _checking.get()
