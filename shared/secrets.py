"""Password references: ``${ENV_VAR}`` or ``file:/path``. Only the reference is stored or
logged; the value is resolved where a connection is opened, and only what this machine's
:mod:`shared.confinement` allows is ever read."""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from shared import confinement
from shared.errors import ConfigError, SecretError

_ENV = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}")
_FILE = "file:"
log = logging.getLogger("setl.secrets")
_warned: set[Path] = set()  # each open file said once per process, not per connection


def reference_problem(value: str) -> str | None:
    """Why ``value`` (a token or password in a daemon's configuration) is not a reference,
    or None; a check for the configuration reader."""
    if _ENV.fullmatch(value) or (value.startswith(_FILE) and len(value) > len(_FILE)):
        return None
    return ("expected a reference, ${SETL_NAME} (an environment variable) or file:/path (a "
            "file holding the secret), not the secret itself")


@dataclass(frozen=True)
class SecretRef:
    """A reference to a secret; ``str()`` shows the reference, never the value."""

    text: str

    @classmethod
    def parse(cls, text: str) -> SecretRef:
        if _ENV.fullmatch(text) or (text.startswith(_FILE) and len(text) > len(_FILE)):
            return cls(text)
        raise ConfigError(
            "passwords are references, not values: write ${ENV_VAR} or file:/path/to/file")

    def resolve(self, environ: dict[str, str] | None = None,
                rules: confinement.Confinement | None = None) -> str:
        """The secret's value; raise SecretError naming the reference when it is missing or
        is not one this process may read (``rules``, by default this process's)."""
        environ = os.environ if environ is None else environ
        rules = rules or confinement.current()
        try:
            path = rules.secret_file(self.text) if self.text.startswith(_FILE) else None
            name = rules.secret_env(self.text) if path is None else ""
        except PermissionError as exc:
            raise SecretError(str(exc)) from None
        if path is None:
            if name not in environ:
                raise SecretError(f"password reference {self.text}: environment variable {name} "
                                  "is not set; export it where this process runs")
            return environ[name]
        try:
            _say_if_open(path)
            return path.read_text(encoding="utf-8").rstrip("\n")
        except OSError as exc:
            raise SecretError(f"password reference {self.text}: cannot read {path}: "
                              f"{exc.strerror}") from None
        except UnicodeDecodeError:
            raise SecretError(f"password reference {self.text}: {path} is not UTF-8 text; "
                              "write the password as UTF-8") from None

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"SecretRef({self.text!r})"


def _say_if_open(path: Path) -> None:
    """A warning, once, when every user of the machine may read a secret file (as ssh says
    of an open key): the password is as safe as the file."""
    mode = path.stat().st_mode
    if mode & stat.S_IROTH and path not in _warned:
        _warned.add(path)
        log.warning("event=secret_file_open path=%s mode=%s: every user of this machine can "
                    "read this password; chmod 600 (or 640 with a group of setl's own)",
                    path, oct(stat.S_IMODE(mode)))
