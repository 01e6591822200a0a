"""Alarm rules and webhooks as the manager's operator writes them (``alarms:`` in
``conf/manager.yaml``, or a file it names), read with the same field reader as the rest of
the configuration, so errors name file, line and field. The manager evaluates them
(:mod:`manager.alarms`)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from shared import yamlreader
from shared.secrets import reference_problem
from shared.yamlreader import MISSING, Field

DELAY, PAUSED, FAILED, NODE_LOST, FREE_DOOR_REJECTS, SOURCE_SWITCH, NOT_RUNNING = (
    "delay", "paused", "failed", "node_lost", "free_door_rejects", "source_switch",
    "not_running")
ROWS_SKIPPED = "rows_skipped"
KINDS = (DELAY, PAUSED, FAILED, NODE_LOST, FREE_DOOR_REJECTS, SOURCE_SWITCH, NOT_RUNNING,
         ROWS_SKIPPED)
# not_running's default for_s: longer than a start or a failover (a session's timeout, a
# start that checks the source and targets), short enough that a pipeline nobody runs is
# told within minutes
NOT_RUNNING_FOR_S = 120
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class AlarmRule:
    """One rule. ``when`` says what it watches:

    - ``delay``: a pipeline's delay above ``above`` milliseconds for ``for_s`` seconds
      (judged while its node runs, retries, starts or switches it);
    - ``paused``: a channel in status PAUSE (a pipeline failed for good, or an operator
      paused it) for ``for_s`` seconds;
    - ``failed``: a pipeline whose node reports it failed (its channel was paused);
    - ``node_lost``: a node that was registered (or is listed in ``nodes``) is gone;
    - ``free_door_rejects``: more than ``above`` free-door requests rejected by one pipeline
      within ``within_s`` seconds;
    - ``source_switch``: a pipeline whose source's primary is lost (it waits to switch), or
      whose source switched to another member within ``within_s`` seconds;
    - ``not_running``: a pipeline of a channel in status START that is not running (no node
      holds it, its start fails and is retried, it waits for its source) for ``for_s``
      seconds (default :data:`NOT_RUNNING_FOR_S`): its delay, which only a runner reports,
      cannot tell it;
    - ``rows_skipped``: more than ``above`` rows (default 0: any) refused by the target and
      skipped by one pipeline (``skip_load_exception``) within ``within_s`` seconds.
    """

    name: str
    when: str
    above: float = 0.0
    for_s: float = 0.0
    within_s: float = 300.0
    pipelines: tuple[str, ...] = ()  # patterns of pipeline ids (channel.pipeline, * and ?)
    nodes: tuple[int, ...] = ()  # node_lost: nodes that must be there even if never seen


@dataclass(frozen=True)
class Webhook:
    url: str
    token: str = ""  # a reference; its value is sent as "Authorization: Bearer ..."


@dataclass(frozen=True)
class AlarmSettings:
    rules: tuple[AlarmRule, ...] = ()
    webhooks: tuple[Webhook, ...] = ()


def read_alarms(found: Field | None, base: Path) -> AlarmSettings:
    """The ``alarms`` section: a mapping (``rules``, ``webhooks``) or the name of a YAML file
    holding one, relative to ``base``."""
    if found is None:
        return AlarmSettings()
    if found.is_mapping():
        return _section(found)
    name = found.string()
    if name is MISSING:
        return AlarmSettings()
    path = (base / Path(name).expanduser()).resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        found.fail(f"cannot read the alarms file {path}: "
                   f"{getattr(exc, 'strerror', None) or exc}")
        return AlarmSettings()
    root, issues = yamlreader.parse(text, str(path))
    settings = _section(Field(root, "", issues)) if root is not None else AlarmSettings()
    found.issues.items.extend(issues.items)  # reported with the configuration's own
    return settings


def _section(found: Field) -> AlarmSettings:
    entry = found.mapping()
    if entry is None:
        return AlarmSettings()
    rules: list[AlarmRule] = []
    names: set[str] = set()
    listed = entry.field("rules")
    for item in listed.items() if listed is not None else ():
        rule = _rule(item)
        if rule is None:
            continue
        if rule.name in names:
            item.fail(f"a second rule named {rule.name!r}; give each rule its own name")
            continue
        names.add(rule.name)
        rules.append(rule)
    hooks = entry.field("webhooks")
    webhooks = [hook for hook in (_webhook(item) for item in
                                  (hooks.items() if hooks is not None else ())) if hook]
    entry.close()
    return AlarmSettings(tuple(rules), tuple(webhooks))


def _rule(item: Field) -> AlarmRule | None:
    entry = item.mapping()
    if entry is None:
        return None
    name = entry.get("name", lambda f: f.string(_name), required=True)
    when = entry.get("when", lambda f: f.choice(list(KINDS)), required=True)
    if when is MISSING:
        return None  # which other keys belong is unknown: only 'when' is reported
    above, within_s, pipelines, nodes = 0, 300, (), ()
    if when == DELAY:
        above = entry.get("above_ms", lambda f: f.integer(0), MISSING, required=True)
    elif when == FREE_DOOR_REJECTS:
        above = entry.get("above", lambda f: f.integer(0), MISSING, required=True)
        within_s = entry.get("within_s", lambda f: f.integer(1, 86400), within_s)
    elif when == ROWS_SKIPPED:
        above = entry.get("above", lambda f: f.integer(0), 0)
        within_s = entry.get("within_s", lambda f: f.integer(1, 86400), within_s)
    elif when == SOURCE_SWITCH:
        within_s = entry.get("within_s", lambda f: f.integer(1, 86400), within_s)
    if when in (DELAY, PAUSED, FAILED, FREE_DOOR_REJECTS, SOURCE_SWITCH, NOT_RUNNING,
                ROWS_SKIPPED):
        pipelines = entry.get("pipelines", _patterns, ())
    if when == NODE_LOST:
        nodes = entry.get("nodes", _node_ids, ())
    for_s = entry.get("for_s", lambda f: f.integer(0, 86400),
                      NOT_RUNNING_FOR_S if when == NOT_RUNNING else 0) \
        if when not in (FREE_DOOR_REJECTS, ROWS_SKIPPED) else 0
    entry.close()  # a key of another kind of rule is reported as unknown here
    if MISSING in (name, when, above):
        return None
    return AlarmRule(name, when, float(above), float(for_s), float(within_s), pipelines,
                     nodes)


def _name(value: str) -> str | None:
    if _NAME.fullmatch(value):
        return None
    return f"expected a name of letters, digits, '.', '_' or '-', got \"{value}\""


def _patterns(item: Field) -> object:
    if not item.is_list():
        return item.expected("a list of pipeline ids or patterns such as shop.*")
    found = [entry.string() for entry in item.items()]
    return MISSING if MISSING in found else tuple(found)


def _node_ids(item: Field) -> object:
    if not item.is_list():
        return item.expected("a list of node ids")
    found = [entry.integer(1) for entry in item.items()]
    return MISSING if MISSING in found else tuple(found)


def _webhook(item: Field) -> Webhook | None:
    entry = item.mapping()
    if entry is None:
        return None
    url = entry.get("url", lambda f: f.string(_url), required=True)
    token = entry.get("token", lambda f: f.string(reference_problem), "")
    entry.close()
    if url is MISSING:
        return None
    host = urlsplit(url).hostname or ""
    if token and urlsplit(url).scheme == "http" and not _loopback(host):
        entry.field("token").fail(  # type: ignore[union-attr]
            f"the token would cross the network in clear to {host} (an http:// URL): give "
            "the webhook an https:// URL, or leave the token out")
    return Webhook(url, token)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _url(value: str) -> str | None:
    parts = urlsplit(value)
    if parts.scheme in ("http", "https") and parts.hostname:
        return None
    return f"expected an http:// or https:// URL, got \"{value}\""

