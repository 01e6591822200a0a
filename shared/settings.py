"""Daemon configuration files (``conf/manager.yaml``, ``conf/node.yaml``).

Read with the same field reader as definitions, so errors name file, line and field.
``SETL_ZK_HOSTS`` and ``SETL_ZK_ROOT`` override the file (handy for tests and containers).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from shared import yamlreader
from shared.alarmrules import AlarmSettings, read_alarms
from shared.confinement import CONF, Confinement
from shared.errors import ConfigError
from shared.keepalive import Keepalive, read_keepalive
from shared.secrets import reference_problem
from shared.securitysettings import read_security
from shared.yamlreader import MISSING, Field, Mapping


@dataclass(frozen=True)
class ZkSettings:
    hosts: str = "127.0.0.1:2181"
    root: str = "/setl"
    session_timeout_s: float = 10.0
    connect_timeout_s: float = 5.0  # a daemon waiting for ZooKeeper says so this often
    call_timeout_s: float = 5.0  # every ZooKeeper call gives up after this
    give_up_after_s: float = 0.0  # a daemon started without ZooKeeper exits after this; 0: waits


@dataclass(frozen=True)
class TlsSettings:
    """The manager API's certificate; with ``client_ca`` every client must present a
    certificate signed by it."""

    cert: Path
    key: Path
    client_ca: Path | None = None


@dataclass(frozen=True)
class ReaderSettings:
    """A subscription reader's own token (``api.readers``): with it a caller may only read
    the subscriptions of ``channels`` (Subscribe, GetChannel), never the admin API."""

    token: str  # a reference (${SETL_...} or file:/path) to the reader's bearer token
    channels: tuple[str, ...]
    line: int = field(default=0, compare=False)  # where it is written, for messages


@dataclass(frozen=True)
class ApiSettings:
    """Who may call the manager's API (and open its status page)."""

    token: str = ""  # a reference (${SETL_...} or file:/path) to the bearer token; "": none
    tls: TlsSettings | None = None
    readers: tuple[ReaderSettings, ...] = ()  # the manager's only: subscription readers


@dataclass(frozen=True)
class WebSettings:
    """The manager's status page and its /metrics, on one HTTP port."""

    listen: str = "127.0.0.1:0"  # port 0: a free port, shown by 'setl status' and logged
    poll_s: float = 2.0  # how often the manager reads the pipelines' stats from ZooKeeper
    history_s: int = 900  # the delay history the page charts, per pipeline


@dataclass(frozen=True)
class MetricsSettings:
    """The node's Prometheus /metrics."""

    listen: str = "127.0.0.1:0"  # port 0: a free port, logged and shown by 'setl node list'


@dataclass(frozen=True)
class NodeAccess:
    """How the manager reaches the nodes' RPC (verify): their api.token and the CA that
    signed their certificate, when they have them."""

    token: str = ""  # a reference to the nodes' token; "": none
    ca: Path | None = None


@dataclass(frozen=True)
class ManagerSettings:
    listen: str = "127.0.0.1:7310"
    advertise: str = ""  # the address others use; defaults to listen
    zookeeper: ZkSettings = field(default_factory=ZkSettings)
    log_level: str = "info"
    security: Confinement = field(default_factory=Confinement)
    api: ApiSettings = field(default_factory=ApiSettings)
    web: WebSettings = field(default_factory=WebSettings)
    alarms: AlarmSettings = field(default_factory=AlarmSettings)
    # the configuration file read ("" for the defaults), for error messages
    file: str = field(default="", compare=False)
    nodes: NodeAccess = field(default_factory=NodeAccess)
    keepalive: Keepalive = field(default_factory=Keepalive)  # its API's and its node calls'

    @property
    def address(self) -> str:
        return self.advertise or self.listen


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[*]"
    driver_memory: str = "1g"
    options: tuple[tuple[str, str], ...] = ()
    # a batch of at most this many row changes runs Extract/Transform in the node itself: a
    # warm Spark job costs ~40 ms and ~50 ms of CPU however small (bench.sparkjob), what the
    # node spends on ~4,000 rows; a caught-up pipeline's batches (a few hundred rows every
    # batch_timeout_ms) are its latency. While Spark starts at boot every batch of up to
    # 100,000 runs in the node. 0 sends every batch to Spark, waiting for its start
    local_max_rows: int = 2000
    # boot: the node starts Spark in the background as it starts; on_demand: when a job first
    # needs it (the first batch over local_max_rows, a snapshot, a verify: it waits 6-12 s
    # for the start). A pipeline runs while Spark starts either way
    start: str = "boot"


@dataclass(frozen=True)
class NodeSettings:
    listen: str = "127.0.0.1:0"
    zookeeper: ZkSettings = field(default_factory=ZkSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    log_level: str = "info"
    security: Confinement = field(default_factory=Confinement)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    api: ApiSettings = field(default_factory=ApiSettings)  # the node's RPC: token, TLS
    file: str = field(default="", compare=False)
    keepalive: Keepalive = field(default_factory=Keepalive)  # the node's RPC's


def _address(value: str) -> str | None:
    host, _, port = value.rpartition(":")
    if host and port.isdigit() and int(port) < 65536:
        return None
    return f"expected host:port, got \"{value}\""


def _read(path: str | Path | None) -> tuple[Mapping, yamlreader.Issues]:
    """The file's top mapping (an empty one without a file; the issues say what is wrong)."""
    text, name = "{}", "<defaults>"
    if path is not None:
        try:
            text, name = Path(path).read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); "
                              "save it as UTF-8") from None
    root, issues = yamlreader.parse(text, name)
    if root is None and not issues.items:  # empty, or only comments: every default applies
        root, issues = yamlreader.parse("{}", name)
    top = Field(root, "", issues).mapping() if root is not None else None
    if top is None:
        issues.raise_if_any()
        raise ConfigError(f"{name}: expected a mapping of settings")
    return top, issues


def _zookeeper(top: Mapping) -> ZkSettings:
    settings = ZkSettings()
    found = top.field("zookeeper")
    entry = found.mapping() if found else None
    if entry is not None:
        settings = ZkSettings(
            entry.get("hosts", Field.string, settings.hosts),
            entry.get("root", lambda f: f.string(_zk_root), settings.root),
            float(entry.get("session_timeout_s", lambda f: f.integer(1, 600),
                            settings.session_timeout_s)),
            float(entry.get("connect_timeout_s", lambda f: f.integer(1, 600),
                            settings.connect_timeout_s)),
            float(entry.get("call_timeout_s", lambda f: f.integer(1, 600),
                            settings.call_timeout_s)),
            float(entry.get("give_up_after_s", lambda f: f.integer(0, 86400),
                            settings.give_up_after_s)),
        )
        entry.close()
    return dataclasses.replace(settings, hosts=os.environ.get("SETL_ZK_HOSTS", settings.hosts),
                               root=os.environ.get("SETL_ZK_ROOT", settings.root))


def _zk_root(value: str) -> str | None:
    if value.startswith("/") and (value == "/" or not value.endswith("/")):
        return None
    return f"expected an absolute path like /setl, got \"{value}\""


def _level(item: Field) -> object:
    return item.choice(["debug", "info", "warning", "error"])


def load_manager(path: str | Path | None) -> ManagerSettings:
    top, issues = _read(path)
    defaults = ManagerSettings()
    api = _api(top, _base(path), readers=True)
    alarms = read_alarms(top.field("alarms"), _base(path))
    nodes = _nodes(top, _base(path))
    # the manager's own secrets are never a definition's password
    security = read_security(top.field("security"), _base(path))
    security = dataclasses.replace(security, reserved=tuple(
        reference for reference in (
            api.token, *(reader.token for reader in api.readers), nodes.token,
            *(hook.token for hook in alarms.webhooks)) if reference))
    settings = ManagerSettings(
        top.get("listen", lambda f: f.string(_address), defaults.listen),
        top.get("advertise", lambda f: f.string(_address), ""),
        _zookeeper(top),
        top.get("log_level", _level, defaults.log_level),
        security,
        api,
        _web(top),
        alarms,
        str(path) if path is not None else "",
        nodes,
        read_keepalive(top.field("keepalive")),
    )
    top.close()
    issues.raise_if_any()
    return settings


def load_node(path: str | Path | None) -> NodeSettings:
    top, issues = _read(path)
    defaults = NodeSettings()
    spark = defaults.spark
    found = top.field("spark")
    entry = found.mapping() if found else None
    if entry is not None:
        options = entry.get("options", _options, ())
        spark = SparkSettings(entry.get("master", Field.string, spark.master),
                              entry.get("driver_memory", Field.string, spark.driver_memory),
                              options, entry.get("local_max_rows", lambda f: f.integer(low=0),
                                        spark.local_max_rows),
                              entry.get("start", lambda f: f.choice(["boot", "on_demand"]),
                                        spark.start))
        entry.close()
    api = _api(top, _base(path))
    settings = NodeSettings(
        top.get("listen", lambda f: f.string(_address), defaults.listen),
        _zookeeper(top), spark,
        top.get("log_level", _level, defaults.log_level),
        # the node's own token is never a definition's password
        dataclasses.replace(read_security(top.field("security"), _base(path)),
                            reserved=(api.token,) if api.token else ()),
        _metrics(top),
        api,
        str(path) if path is not None else "",
        read_keepalive(top.field("keepalive")),
    )
    top.close()
    issues.raise_if_any()
    return settings


def _base(path: str | Path | None) -> Path:
    """The folder relative paths of a configuration file start from."""
    return Path(path).resolve().parent if path is not None else CONF


def _nodes(top: Mapping, base: Path) -> NodeAccess:
    found = top.field("nodes")
    entry = found.mapping() if found else None
    if entry is None:
        return NodeAccess()
    token = entry.get("token", lambda f: f.string(reference_problem), "")
    ca = entry.get("ca", lambda f: _file(f, base), None)
    entry.close()
    return NodeAccess(token, ca if ca is not MISSING else None)


def _api(top: Mapping, base: Path, readers: bool = False) -> ApiSettings:
    """``api``: its token and TLS; the manager's (``readers``) also its subscription readers'
    tokens (a node has none: it reports ``readers`` as an unknown key)."""
    found = top.field("api")
    entry = found.mapping() if found else None
    if entry is None:
        return ApiSettings()
    token = entry.get("token", lambda f: f.string(reference_problem), "")
    tls = None
    found = entry.field("tls")
    section = found.mapping() if found else None
    if section is not None:
        cert = section.get("cert", lambda f: _file(f, base), required=True)
        key = section.get("key", lambda f: _file(f, base), required=True)
        client_ca = section.get("client_ca", lambda f: _file(f, base), None)
        section.close()
        if cert is not MISSING and key is not MISSING:
            tls = TlsSettings(cert, key, client_ca)
    found = entry.field("readers") if readers else None
    listed: tuple[ReaderSettings, ...] = ()
    if found is not None:
        if not token:
            found.fail("reader tokens restrict callers of an API that has a token: set "
                       "api.token too (without it the API asks no caller for a token)")
        else:
            listed = _readers(found, token)
    entry.close()
    return ApiSettings(token, tls, listed)


def _readers(item: Field, admin: str) -> tuple[ReaderSettings, ...]:
    """``api.readers``: ``[{token: REFERENCE, channels: [NAME, ...]}, ...]``, each token its
    own (not api.token's, not another reader's)."""
    if not item.is_list():
        item.expected("a list of {token, channels}")
        return ()
    found: list[ReaderSettings] = []
    seen = {admin: "api.token"}
    for element in item.items():
        entry = element.mapping()
        if entry is None:
            continue
        token_field = entry.field("token", required=True)
        token = token_field.string(reference_problem) if token_field else MISSING
        channels = entry.get("channels", _channel_names, required=True)
        entry.close()
        if token_field is None or token is MISSING or channels is MISSING:
            continue
        if token in seen:
            token_field.fail(f"the same reference as {seen[token]}: give each reader a token "
                             "of its own (one reader may list several channels)")
            continue
        seen[token] = f"{element.path}.token"
        found.append(ReaderSettings(token, channels, element.node.start_mark.line + 1))
    return tuple(found)


def _channel_names(item: Field) -> object:
    if not item.is_list():
        return item.expected("a non-empty list of channel names")
    if not item.node.value:
        return item.fail("expected the channels this token may read, got an empty list")
    names = [entry.string() for entry in item.items()]
    return MISSING if MISSING in names else tuple(names)


def _web(top: Mapping) -> WebSettings:
    defaults, found = WebSettings(), top.field("web")
    entry = found.mapping() if found else None
    if entry is None:
        return defaults
    settings = WebSettings(
        entry.get("listen", lambda f: f.string(_address), defaults.listen),
        float(entry.get("poll_s", lambda f: f.integer(1, 60), defaults.poll_s)),
        entry.get("history_s", lambda f: f.integer(60, 86400), defaults.history_s))
    entry.close()
    return settings


def _metrics(top: Mapping) -> MetricsSettings:
    defaults, found = MetricsSettings(), top.field("metrics")
    entry = found.mapping() if found else None
    if entry is None:
        return defaults
    settings = MetricsSettings(entry.get("listen", lambda f: f.string(_address),
                                         defaults.listen))
    entry.close()
    return settings


def _file(item: Field, base: Path) -> object:
    text = item.string()
    if text is MISSING:
        return MISSING
    path = (base / Path(text).expanduser()).resolve()
    return path if path.is_file() else item.fail(f"no such file: {path}")


def load_security(path: str | Path | None) -> Confinement:
    """Only the ``security`` settings of a manager or node configuration (the admin CLI's
    rules for the password references it resolves itself, e.g. ``setl backfill``)."""
    top, issues = _read(path)
    rules = read_security(top.field("security"), _base(path))
    issues.raise_if_any()
    return rules


def _options(item: Field) -> object:
    entry = item.mapping()
    if entry is None:
        return MISSING
    pairs = []
    for key in list(entry.entries):
        value = entry.get(key, Field.string)
        if value is not MISSING:
            pairs.append((key, str(value)))
    entry.close()
    return tuple(pairs)
