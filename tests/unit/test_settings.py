"""Daemon configuration files: conf/manager.yaml and conf/node.yaml. Operating settings
(metrics, the status page, the API, alarms, credentials): test_settings_operating.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from shared.alarmrules import AlarmSettings
from shared.confinement import Confinement, processor_path_dirs
from shared.errors import ConfigError
from shared.sandbox import Sandbox
from shared.settings import (
    ManagerSettings,
    MetricsSettings,
    NodeSettings,
    SparkSettings,
    WebSettings,
    ZkSettings,
    load_manager,
    load_node,
)

CONF = Path(__file__).resolve().parents[2] / "conf"
# the demo reads its password from the sandbox's file, alone in its folder
DEMO_SECURITY = Confinement((CONF / "secrets", CONF.parent / ".sandbox" / "secrets"), "SETL_",
                            processor_path_dirs())
LOADERS = [pytest.param(load_manager, id="manager"), pytest.param(load_node, id="node")]


@pytest.fixture(autouse=True)
def no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SETL_ZK_HOSTS", raising=False)
    monkeypatch.delenv("SETL_ZK_ROOT", raising=False)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    return path


def errors(load: Callable[[Path], object], path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(path)
    return str(caught.value).splitlines()


def test_manager_conf_loads() -> None:
    settings = load_manager(CONF / "manager.yaml")
    assert dataclasses.replace(settings, alarms=AlarmSettings()) == ManagerSettings(
        listen="127.0.0.1:7310", advertise="",
        zookeeper=ZkSettings("127.0.0.1:23381", "/setl", 6.0, 5.0), log_level="info",
        security=DEMO_SECURITY, web=WebSettings("127.0.0.1:7311"))
    assert [rule.when for rule in settings.alarms.rules] == [
        "delay", "paused", "node_lost", "free_door_rejects", "not_running"]
    assert settings.address == "127.0.0.1:7310"


def test_node_conf_loads() -> None:
    settings = load_node(CONF / "node.yaml")
    assert settings == NodeSettings(
        listen="127.0.0.1:0", zookeeper=ZkSettings("127.0.0.1:23381", "/setl", 6.0, 5.0),
        spark=SparkSettings("local[*]", "1g", ()), log_level="info", security=DEMO_SECURITY,
        metrics=MetricsSettings("127.0.0.1:7321"))


@pytest.mark.parametrize("load", LOADERS)
def test_the_demo_reaches_the_sandbox_password_and_nothing_else_of_the_sandbox(
        load: Callable[[Path], ManagerSettings | NodeSettings]) -> None:
    rules = load(CONF / f"{load.__name__.removeprefix('load_')}.yaml").security
    sandbox = Sandbox(CONF.parent / ".sandbox")
    assert rules.secret_problem(f"file:{sandbox.secret_file}") is None
    for other in ("logs/node-1.log", "source/mysql/user.MAD", "state.json", "secret"):
        problem = rules.secret_problem(f"file:{sandbox.root / other}")
        assert problem is not None and "is outside" in problem, other


def test_a_sandbox_keeps_its_password_alone_in_a_private_folder(tmp_path: Path) -> None:
    fresh = Sandbox(tmp_path / "fresh")
    fresh.place_secret()
    assert fresh.secret_file == tmp_path / "fresh" / "secrets" / "password"
    assert [p.name for p in fresh.secret_file.parent.iterdir()] == ["password"]
    assert fresh.secret_file.parent.stat().st_mode & 0o777 == 0o700
    assert fresh.secret_file.stat().st_mode & 0o777 == 0o600
    made = fresh.password()
    fresh.place_secret()
    assert fresh.password() == made and len(made) == 24
    # a sandbox made before kept 'secret' beside its servers' data: the same password moves
    older = Sandbox(tmp_path / "older")
    older.root.mkdir()
    (older.root / "secret").write_text("kept-password\n")
    older.place_secret()
    assert older.password() == "kept-password" and not (older.root / "secret").exists()


def test_defaults_without_a_file() -> None:
    assert load_manager(None) == ManagerSettings()
    assert load_manager(None).zookeeper == ZkSettings("127.0.0.1:2181", "/setl", 10.0, 5.0)
    assert load_manager(None).address == "127.0.0.1:7310"
    assert load_node(None) == NodeSettings()
    assert load_node(None).spark == SparkSettings("local[*]", "1g", ())


@pytest.mark.parametrize("load", LOADERS)
@pytest.mark.parametrize("text", ["", "# every default\n# listen: 1.2.3.4:5\n", "{}\n"])
def test_empty_or_comment_only_file_gives_defaults(
        tmp_path: Path, load: Callable[[Path], object], text: str) -> None:
    read, defaults = load(write(tmp_path, text)), load(None)  # type: ignore[arg-type]
    # only the secrets folder differs: it is beside the file (without one, in conf/)
    assert read.security.secret_dirs == (tmp_path / "secrets",)  # type: ignore[attr-defined]
    assert dataclasses.replace(read, security=defaults.security) == defaults  # type: ignore


def test_manager_values_are_read(tmp_path: Path) -> None:
    path = write(tmp_path, "listen: 0.0.0.0:7000\nadvertise: mgr1.example:7000\n"
                           "zookeeper: {hosts: 'zk1:2181,zk2:2181', root: /prod/setl, "
                           "session_timeout_s: 30, connect_timeout_s: 5}\nlog_level: DEBUG\n")
    settings = load_manager(path)
    assert settings == ManagerSettings(
        "0.0.0.0:7000", "mgr1.example:7000",
        ZkSettings("zk1:2181,zk2:2181", "/prod/setl", 30.0, 5.0), "debug",
        Confinement((tmp_path / "secrets",), processor_dirs=processor_path_dirs()))
    assert settings.address == "mgr1.example:7000"


def test_zookeeper_waits_for_ever_and_calls_are_bounded_by_default(tmp_path: Path) -> None:
    defaults = load_node(None).zookeeper
    assert (defaults.give_up_after_s, defaults.call_timeout_s) == (0.0, 5.0)
    path = write(tmp_path, "zookeeper: {call_timeout_s: 3, give_up_after_s: 120}\n")
    read = load_node(path).zookeeper
    assert (read.call_timeout_s, read.give_up_after_s) == (3.0, 120.0)


def test_spark_options_keep_their_text(tmp_path: Path) -> None:
    path = write(tmp_path, "spark:\n  master: spark://h:7077\n  driver_memory: 4g\n  options:\n"
                           "    spark.sql.shuffle.partitions: 4\n"
                           "    spark.sql.adaptive.enabled: true\n"
                           "    spark.executor.extraJavaOptions: -Dx=y\n")
    assert load_node(path).spark == SparkSettings("spark://h:7077", "4g", (
        ("spark.sql.shuffle.partitions", "4"), ("spark.sql.adaptive.enabled", "true"),
        ("spark.executor.extraJavaOptions", "-Dx=y")))


@pytest.mark.parametrize("load", LOADERS)
@pytest.mark.parametrize(("text", "expected"), [
    ("listen: nowhere\n", ['settings.yaml:1: listen: expected host:port, got "nowhere"']),
    ("log_level: info\nlisten: 127.0.0.1:99999\n",
     ['settings.yaml:2: listen: expected host:port, got "127.0.0.1:99999"']),
    ("listen: 7310\n", ['settings.yaml:1: listen: expected host:port, got "7310"']),
    ("listen: ':7310'\n", ['settings.yaml:1: listen: expected host:port, got ":7310"']),
    ("listn: 127.0.0.1:1\n", ["settings.yaml:1: listn: unknown key; did you mean 'listen'?"]),
    ("zookeeper:\n  hosts: a:1\n  rot: /x\n",
     ["settings.yaml:3: zookeeper.rot: unknown key; did you mean 'root'?"]),
    ("zookeeper: {root: setl}\n",
     ['settings.yaml:1: zookeeper.root: expected an absolute path like /setl, got "setl"']),
    ("zookeeper: {root: /setl/}\n",
     ['settings.yaml:1: zookeeper.root: expected an absolute path like /setl, got "/setl/"']),
    ("zookeeper:\n  session_timeout_s: 0\n",
     ['settings.yaml:2: zookeeper.session_timeout_s: expected an integer from 1 to 600, '
      'got "0"']),
    ("zookeeper:\n  give_up_after_s: -1\n",
     ['settings.yaml:2: zookeeper.give_up_after_s: expected an integer from 0 to 86400, '
      'got "-1"']),
    ("zookeeper: [a]\n", ["settings.yaml:1: zookeeper: expected a mapping, got a list"]),
    ("log_level: loud\n",
     ['settings.yaml:1: log_level: expected one of debug, info, warning, error, got "loud"']),
    ("- listen\n", ["settings.yaml:1: expected a mapping, got a list"]),
    ("listen: [\n", ["settings.yaml:2: not valid YAML: expected the node content, but found "
                     "'<stream end>'"]),
    ("listen: nowhere\nlog_level: loud\n",
     ['settings.yaml:1: listen: expected host:port, got "nowhere"',
      'settings.yaml:2: log_level: expected one of debug, info, warning, error, got "loud"']),
], ids=["listen-word", "listen-port-range", "listen-port-only", "listen-no-host",
        "unknown-top-key", "unknown-zk-key", "zk-root-relative", "zk-root-trailing-slash",
        "zk-timeout-zero", "zk-give-up-negative", "zk-not-mapping", "bad-log-level",
        "top-level-list", "yaml-syntax", "two-errors"])
def test_bad_settings_name_file_line_and_field(
        tmp_path: Path, load: Callable[[Path], object], text: str, expected: list[str]) -> None:
    path = write(tmp_path, text)
    assert errors(load, path) == [f"{tmp_path}/{line}" for line in expected]


def test_security_dirs_are_relative_to_the_file_and_the_prefix_is_checked(
        tmp_path: Path) -> None:
    path = write(tmp_path, "security:\n  secret_dirs: [keys, /etc/setl]\n"
                           "  env_prefix: ACME_\n  processor_dirs: [procs]\n"
                           "  database_hosts: [10.0.0.0/8, db1.internal]\n")
    rules = load_node(path).security
    assert rules.secret_dirs == (tmp_path / "keys", Path("/etc/setl"))
    assert rules.env_prefix == "ACME_"
    assert rules.processor_dirs == (*processor_path_dirs(), tmp_path / "procs")
    assert rules.database_hosts == ("10.0.0.0/8", "db1.internal")
    bad = write(tmp_path, "security: {secret_dirs: keys, env_prefix: ''}\n")
    assert errors(load_manager, bad) == [
        f'{bad}:1: security.secret_dirs: expected a list of directories, got "keys"',
        f"{bad}:1: security.env_prefix: expected a non-empty string, got \"\""]


def test_spark_is_unknown_to_the_manager(tmp_path: Path) -> None:
    path = write(tmp_path, "listen: 127.0.0.1:1\nspark: {master: local}\n")
    assert errors(load_manager, path) == [
        f"{path}:2: spark: unknown key; known keys: advertise, alarms, api, keepalive, "
        "listen, log_level, nodes, security, web, zookeeper"]
    assert load_node(path).spark.master == "local"


def test_bad_advertise_address(tmp_path: Path) -> None:
    path = write(tmp_path, "advertise: somewhere\n")
    assert errors(load_manager, path) == [
        f'{path}:1: advertise: expected host:port, got "somewhere"']


def test_unknown_spark_key(tmp_path: Path) -> None:
    path = write(tmp_path, "spark:\n  master: local\n  driver_mem: 2g\n")
    assert errors(load_node, path) == [
        f"{path}:3: spark.driver_mem: unknown key; did you mean 'driver_memory'?"]


def test_missing_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as caught:
        load_manager(path)
    assert [issue.message for issue in caught.value.issues] == [
        f"{path}: cannot read: No such file or directory"]


@pytest.mark.parametrize("load", LOADERS)
def test_zk_hosts_env_overrides_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, load: Callable[[Path], object]) -> None:
    monkeypatch.setenv("SETL_ZK_HOSTS", "10.0.0.9:2181")
    settings = load(CONF / f"{load.__name__.removeprefix('load_')}.yaml")
    assert settings.zookeeper.hosts == "10.0.0.9:2181"  # type: ignore[attr-defined]
    assert settings.zookeeper.root == "/setl"  # type: ignore[attr-defined]
    assert settings.zookeeper.session_timeout_s == 6.0  # type: ignore[attr-defined]
    assert load(None).zookeeper.hosts == "10.0.0.9:2181"  # type: ignore[arg-type,attr-defined]


def test_zk_root_env_overrides_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETL_ZK_ROOT", "/setl-test/abc")
    settings = load_manager(CONF / "manager.yaml")
    assert (settings.zookeeper.hosts, settings.zookeeper.root) == (
        "127.0.0.1:23381", "/setl-test/abc")


def test_without_env_the_file_wins() -> None:
    assert load_manager(CONF / "manager.yaml").zookeeper.hosts == "127.0.0.1:23381"


def test_small_batches_run_in_the_node_up_to_a_configured_size(tmp_path: Path) -> None:
    assert load_node(None).spark.local_max_rows == 2000
    assert load_node(write(tmp_path, "spark:\n  local_max_rows: 0\n")).spark.local_max_rows == 0
    with pytest.raises(ConfigError, match=r"settings.yaml:2: spark.local_max_rows: expected a "
                                          r"non-negative integer"):
        load_node(write(tmp_path, "spark:\n  local_max_rows: -1\n"))
