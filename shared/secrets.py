"""Password references: ``${ENV_VAR}`` or ``file:/path``. Only the reference is stored or
logged; the value is resolved where a connection is opened, and only what this machine's
:mod:`shared.confinement` allows is ever read."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from shared import confinement
from shared.errors import ConfigError, SecretError

_ENV = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}")
_FILE = "file:"


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
