"""Daemon configuration files, operating settings: metrics, the status page, the API's
token, readers and TLS, alarms, credentials bound to endpoints, and when Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.alarmrules import AlarmRule, AlarmSettings, Webhook
from shared.errors import ConfigError
from shared.settings import (
    ApiSettings,
    MetricsSettings,
    ReaderSettings,
    TlsSettings,
    WebSettings,
    load_manager,
    load_node,
)
from tests.unit.test_settings import CONF, errors, write


@pytest.fixture(autouse=True)
def no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SETL_ZK_HOSTS", raising=False)
    monkeypatch.delenv("SETL_ZK_ROOT", raising=False)


def test_web_metrics_and_api_default_to_loopback_without_a_token() -> None:
    manager, node = load_manager(None), load_node(None)
    assert manager.web == WebSettings("127.0.0.1:0", 2.0, 900)
    assert node.metrics == MetricsSettings("127.0.0.1:0")
    assert manager.api == ApiSettings("", None)
    assert manager.alarms == AlarmSettings()


def test_the_demo_configs_serve_metrics_and_the_page_on_fixed_loopback_ports() -> None:
    assert load_manager(CONF / "manager.yaml").web.listen == "127.0.0.1:7311"
    assert load_node(CONF / "node.yaml").metrics.listen == "127.0.0.1:7321"


def test_api_web_metrics_and_alarms_are_read(tmp_path: Path) -> None:
    for name in ("api.pem", "api-key.pem", "clients.pem"):
        (tmp_path / name).write_text("x")
    path = write(tmp_path, """\
api:
  token: file:secrets/api-token
  tls: {cert: api.pem, key: api-key.pem, client_ca: clients.pem}
web: {listen: 0.0.0.0:8080, poll_s: 1, history_s: 600}
alarms:
  rules:
    - {name: slow, when: delay, above_ms: 5000, for_s: 30, pipelines: [shop.*]}
    - {name: paused, when: paused}
    - {name: failed, when: failed, for_s: 5}
    - {name: node-gone, when: node_lost, nodes: [1, 2]}
    - {name: backfill, when: free_door_rejects, above: 10, within_s: 60}
    - {name: stalled, when: not_running, pipelines: [shop.*]}
    - {name: stalled-soon, when: not_running, for_s: 30}
  webhooks:
    - url: http://alerts.internal:9093/setl
    - {url: "https://hooks.example/x", token: "${SETL_HOOK_TOKEN}"}
""")
    settings = load_manager(path)
    assert settings.api == ApiSettings("file:secrets/api-token", TlsSettings(
        tmp_path / "api.pem", tmp_path / "api-key.pem", tmp_path / "clients.pem"))
    assert settings.web == WebSettings("0.0.0.0:8080", 1.0, 600)
    assert settings.alarms.rules == (
        AlarmRule("slow", "delay", 5000.0, 30.0, pipelines=("shop.*",)),
        AlarmRule("paused", "paused"), AlarmRule("failed", "failed", for_s=5.0),
        AlarmRule("node-gone", "node_lost", nodes=(1, 2)),
        AlarmRule("backfill", "free_door_rejects", 10.0, within_s=60.0),
        AlarmRule("stalled", "not_running", for_s=120.0, pipelines=("shop.*",)),
        AlarmRule("stalled-soon", "not_running", for_s=30.0))
    assert settings.alarms.webhooks == (
        Webhook("http://alerts.internal:9093/setl"),
        Webhook("https://hooks.example/x", "${SETL_HOOK_TOKEN}"))
    assert load_node(write(tmp_path, "metrics: {listen: 10.0.0.5:9100}\n")).metrics == \
        MetricsSettings("10.0.0.5:9100")


def test_alarms_may_live_in_a_file_of_their_own_whose_errors_name_it(tmp_path: Path) -> None:
    rules = tmp_path / "alarms.yaml"
    rules.write_text("rules:\n  - {name: slow, when: delay, above_ms: 100}\n")
    path = write(tmp_path, "alarms: alarms.yaml\n")
    assert load_manager(path).alarms.rules == (AlarmRule("slow", "delay", 100.0),)
    rules.write_text("rules:\n  - name: slow\n    when: delay\n    above: 100\n")
    assert errors(load_manager, path) == [
        f"{rules}:2: rules[0].above_ms: required field is missing",
        f"{rules}:4: rules[0].above: unknown key; did you mean 'above_ms'?"]
    missing = write(tmp_path, "alarms: nowhere.yaml\n")
    assert errors(load_manager, missing) == [
        f"{missing}:1: alarms: cannot read the alarms file {tmp_path}/nowhere.yaml: "
        "No such file or directory"]


@pytest.mark.parametrize(("text", "expected"), [
    ("api: {token: s3cret}\n",
     ["settings.yaml:1: api.token: expected a reference, ${SETL_NAME} (an environment "
      "variable) or file:/path (a file holding the secret), not the secret itself"]),
    ("api:\n  tls: {cert: nowhere.pem}\n",
     ["settings.yaml:2: api.tls.cert: no such file: {tmp}/nowhere.pem",
      "settings.yaml:2: api.tls.key: required field is missing"]),
    ("web:\n  listen: 8080\n", ['settings.yaml:2: web.listen: expected host:port, got "8080"']),
    ("web: {poll_s: 0}\n",
     ['settings.yaml:1: web.poll_s: expected an integer from 1 to 60, got "0"']),
    ("alarms:\n  rules:\n    - {name: a, when: slow}\n",
     ['settings.yaml:3: alarms.rules[0].when: expected one of delay, paused, failed, '
      'node_lost, free_door_rejects, source_switch, not_running, rows_skipped, '
      'got "slow"']),
    ("alarms:\n  rules:\n    - {name: a, when: delay, above_ms: -1}\n"
     "    - {name: a, when: paused}\n",
     ['settings.yaml:3: alarms.rules[0].above_ms: expected a non-negative integer, got "-1"']),
    ("alarms:\n  rules:\n    - {name: a, when: paused}\n    - {name: a, when: failed}\n",
     ["settings.yaml:4: alarms.rules[1]: a second rule named 'a'; give each rule its own name"]),
    ("alarms:\n  rules:\n    - {name: a, when: paused, above_ms: 5}\n",
     ["settings.yaml:3: alarms.rules[0].above_ms: unknown key; known keys: for_s, name, "
      "pipelines, when"]),
    ("alarms:\n  rules:\n    - {when: node_lost, nodes: [0]}\n",
     ["settings.yaml:3: alarms.rules[0].name: required field is missing",
      'settings.yaml:3: alarms.rules[0].nodes[0]: expected a positive integer, got "0"']),
    ("alarms:\n  webhooks:\n    - {url: 'ftp://x/y', token: abc}\n",
     ['settings.yaml:3: alarms.webhooks[0].url: expected an http:// or https:// URL, got '
      '"ftp://x/y"',
      "settings.yaml:3: alarms.webhooks[0].token: expected a reference, ${SETL_NAME} (an "
      "environment variable) or file:/path (a file holding the secret), not the secret "
      "itself"]),
    ("alarms: {rule: []}\n", ["settings.yaml:1: alarms.rule: unknown key; did you mean "
                              "'rules'?"]),
    ("alarms:\n  webhooks:\n    - {url: 'http://127.0.0.1:9/x', token: '${SETL_A}'}\n"
     "    - {url: 'http://hooks.example/x',\n       token: '${SETL_B}'}\n",
     ["settings.yaml:5: alarms.webhooks[1].token: the token would cross the network in clear "
      "to hooks.example (an http:// URL): give the webhook an https:// URL, or leave the "
      "token out"]),
], ids=["token-in-clear", "tls-files", "web-listen", "poll-zero", "unknown-kind",
        "negative-threshold", "duplicate-rule", "key-of-another-kind", "node-ids",
        "webhook", "unknown-alarms-key", "webhook-token-over-http"])
def test_bad_operating_settings_name_file_line_and_field(
        tmp_path: Path, text: str, expected: list[str]) -> None:
    path = write(tmp_path, text)
    assert errors(load_manager, path) == [
        f"{tmp_path}/{line}".replace("{tmp}", str(tmp_path)) for line in expected]


def test_metrics_is_the_nodes_and_web_the_managers(tmp_path: Path) -> None:
    path = write(tmp_path, "metrics: {listen: 127.0.0.1:1}\nweb: {listen: 127.0.0.1:2}\n")
    assert [line.split(": ")[1] for line in errors(load_manager, path)] == ["metrics"]
    assert [line.split(": ")[1] for line in errors(load_node, path)] == ["web"]


def test_spark_starts_at_boot_unless_told_to_wait(tmp_path: Path) -> None:
    assert load_node(None).spark.start == "boot"
    assert load_node(write(tmp_path, "spark:\n  start: on_demand\n")).spark.start == "on_demand"
    with pytest.raises(ConfigError, match=r"settings.yaml:2: spark.start: .*boot.*on_demand"):
        load_node(write(tmp_path, "spark:\n  start: later\n"))


def test_credentials_bind_passwords_to_endpoints_and_own_tokens_are_reserved(
        tmp_path: Path) -> None:
    from shared import definitions

    (tmp_path / "secrets").mkdir()
    config = tmp_path / "manager.yaml"
    config.write_text(
        f"api: {{token: 'file:{tmp_path}/secrets/api-token'}}\n"
        "security:\n"
        "  credentials:\n"
        f"    - {{secret: 'file:{tmp_path}/secrets/shop*', hosts: [db1.internal, 10.1.0.0/16], "
        "ports: [3306]}\n")
    rules = load_manager(config).security
    [bound] = rules.credentials
    assert bound.secret == f"file:{tmp_path}/secrets/shop*" and bound.ports == (3306,)
    assert rules.reserved == (f"file:{tmp_path}/secrets/api-token",)
    problem = rules.secret_problem(f"file:{tmp_path}/secrets/../secrets/api-token")
    assert problem is not None and "names one of setl's own secrets" in problem
    text = ("sources:\n"
            f"  - {{name: a, host: db1.internal, password: 'file:{tmp_path}/secrets/shop'}}\n"
            f"  - {{name: b, host: evil.example, password: 'file:{tmp_path}/secrets/shop'}}\n"
            f"  - {{name: c, host: db1.internal, password: 'file:{tmp_path}/secrets/other'}}\n")
    with pytest.raises(ConfigError) as caught:
        definitions.load_text(text, "d.yaml", rules=rules)
    assert [(issue.line, issue.path, issue.message.split(";")[0])
            for issue in caught.value.issues] == [
        (3, "sources[1].password", f"password reference file:{tmp_path}/secrets/shop may be "
         "sent only to db1.internal, 10.1.0.0/16 port 3306 (its 'security' settings: "
         "credentials), not to evil.example:3306"),
        (4, "sources[2].password", f"password reference file:{tmp_path}/secrets/other is "
         "bound to no database endpoint (its 'security' settings: credentials)")]


def test_a_node_reachable_from_other_machines_needs_a_token(tmp_path: Path) -> None:
    from node.daemon import rpc_access

    config = tmp_path / "node.yaml"
    config.write_text("listen: 0.0.0.0:7400\n")
    with pytest.raises(ConfigError) as refused:
        rpc_access(load_node(config))
    assert "listen 0.0.0.0:7400 is reachable from other machines, but no api.token is set" \
        in str(refused.value)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "node-token").write_text("t0ken\n")
    config.write_text("listen: 0.0.0.0:7400\n"
                      f"api: {{token: 'file:{tmp_path}/secrets/node-token'}}\n")
    check, credentials = rpc_access(load_node(config))
    assert check is not None and check.problem("Bearer t0ken") is None and credentials is None
    assert rpc_access(load_node(None)) == (None, None)  # loopback: no token needed


def test_subscription_readers_are_read_each_with_its_channels(tmp_path: Path) -> None:
    path = write(tmp_path, """\
api:
  token: file:secrets/api-token
  readers:
    - token: ${SETL_READER_ORDERS}
      channels: [orders_feed]
    - {token: "file:secrets/billing-reader", channels: [billing, ledger]}
""")
    settings = load_manager(path)
    assert settings.api == ApiSettings("file:secrets/api-token", None, (
        ReaderSettings("${SETL_READER_ORDERS}", ("orders_feed",)),
        ReaderSettings("file:secrets/billing-reader", ("billing", "ledger"))))
    assert [reader.line for reader in settings.api.readers] == [4, 6]
    # a reader's token is setl's own: never a definition's password
    assert settings.security.reserved == ("file:secrets/api-token", "${SETL_READER_ORDERS}",
                                          "file:secrets/billing-reader")


@pytest.mark.parametrize(("text", "expected"), [
    ("api:\n  readers:\n    - {token: '${SETL_R}', channels: [a]}\n",
     ["settings.yaml:3: api.readers: reader tokens restrict callers of an API that has a "
      "token: set api.token too (without it the API asks no caller for a token)"]),
    ("api:\n  token: file:secrets/api-token\n  readers:\n"
     "    - {token: s3cret, channels: []}\n"
     "    - {channels: [x], tokn: '${SETL_X}'}\n"
     "    - {token: 'file:secrets/api-token', channels: [c]}\n"
     "    - {token: '${SETL_A}', channels: [a]}\n"
     "    - {token: '${SETL_A}', channels: b}\n",
     ["settings.yaml:4: api.readers[0].token: expected a reference, ${SETL_NAME} (an "
      "environment variable) or file:/path (a file holding the secret), not the secret "
      "itself",
      "settings.yaml:4: api.readers[0].channels: expected the channels this token may read, "
      "got an empty list",
      "settings.yaml:5: api.readers[1].token: required field is missing",
      "settings.yaml:5: api.readers[1].tokn: unknown key; did you mean 'token'?",
      "settings.yaml:6: api.readers[2].token: the same reference as api.token: give each "
      "reader a token of its own (one reader may list several channels)",
      'settings.yaml:8: api.readers[4].channels: expected a non-empty list of channel '
      'names, got "b"']),
    ("api:\n  token: file:secrets/api-token\n  readers: {token: '${SETL_A}'}\n",
     ["settings.yaml:3: api.readers: expected a list of {token, channels}, got a mapping"]),
])
def test_subscription_reader_mistakes_name_file_line_and_field(tmp_path: Path, text: str,
                                                               expected: list[str]) -> None:
    path = write(tmp_path, text)
    assert errors(load_manager, path) == [line.replace("settings.yaml", str(path))
                                          for line in expected]


def test_a_node_has_no_subscription_readers(tmp_path: Path) -> None:
    path = write(tmp_path, "api:\n  token: file:secrets/t\n  readers: []\n")
    assert errors(load_node, path) == [
        f"{path}:3: api.readers: unknown key; known keys: tls, token"]

