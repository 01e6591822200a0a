"""What a lake target's definition may make a node reach: only the object-store options setl
passes on (no proxy, metadata endpoint or unverified certificates), one unambiguous
endpoint among the operator's hosts, credentials in clear over plain http only to this
machine, and a location under ``lake_locations`` by its segments — checked where the lake
is opened (the node's rules), and at apply. No object store is reached: each refusal comes
before any request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared import confinement, definitions, lakes, lakestore
from shared.confinement import Confinement, Credential
from shared.errors import ConfigError, DatabaseHostError

KEY = "file:{secrets}/shop"


@pytest.fixture
def secrets(tmp_path: Path) -> Iterator[Path]:
    """A secret directory holding ``shop`` (a database password), under the rules in force
    for the test; the rules before it are put back after."""
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "shop").write_text("the-database-password")
    before = confinement.current()
    confinement.confine(Confinement((folder,)))
    yield folder
    confinement.confine(before)


def credentials(secrets: Path) -> list[str]:
    ref = KEY.format(secrets=secrets)
    return [f"AWS_ACCESS_KEY_ID={ref}", f"AWS_SECRET_ACCESS_KEY={ref}", "AWS_REGION=us-east-1"]


def bound_to(secrets: Path, hosts: tuple[str, ...], ports: tuple[int, ...] = ()) -> None:
    confinement.confine(Confinement((secrets,), database_hosts=hosts, credentials=(
        Credential(f"file:{secrets}/shop*", hosts, ports),)))


@pytest.mark.parametrize("key", [
    "AWS_PROXY_URL", "proxy_url", "aws_proxy_ca_certificate", "AWS_ALLOW_INVALID_CERTIFICATES",
    "AWS_METADATA_ENDPOINT", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_S3_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ENDPOINT_URL_DYNAMODB", "FOO_TOKEN"])
def test_an_option_setl_does_not_pass_on_is_refused_by_name(secrets: Path, key: str) -> None:
    """The reviewer's leak: the endpoint passes the password's binding (db1.internal:3306)
    and a proxy option, unchecked, would have carried the password (as the access key id)
    to a host of the definition's choosing. Any option not on the list is refused."""
    bound_to(secrets, ("db1.internal",), (3306,))
    storage = ["AWS_ENDPOINT_URL=https://db1.internal:3306", f"{key}=http://evil.example:80",
               *credentials(secrets)]
    with pytest.raises(ConfigError) as caught:
        lakes.Lake("s3://bucket/p", storage, "evil")
    message = str(caught.value)
    assert message.startswith(f"lake target evil: storage {key}: setl does not pass this "
                              "option to the object store"), message
    assert f"Leave {key} out" in message and "AWS_ENDPOINT_URL" in message
    assert "the-database-password" not in message


@pytest.mark.parametrize("second", ["endpoint=https://evil.example", "aws_endpoint=https://x.example",
                                    "AWS_ENDPOINT=https://db1.internal:3306"])
def test_a_second_endpoint_option_is_refused(secrets: Path, second: str) -> None:
    """object_store takes ``endpoint``, ``aws_endpoint``… as the endpoint too: which one
    wins is not for setl to guess, so two are refused, naming both."""
    bound_to(secrets, ("db1.internal",), (3306,))
    storage = ["AWS_ENDPOINT_URL=https://db1.internal:3306", second, *credentials(secrets)]
    with pytest.raises(ConfigError, match=f"storage {second.split('=')[0]}.*"
                       "AWS_ENDPOINT_URL both give the store's endpoint; keep one"):
        lakes.Lake("s3://bucket/p", storage, "evil")


@pytest.mark.parametrize("url", ["https://evil.example\\@db1.internal:3306",
                                 "https://evil.example#@db1.internal:3306",
                                 "https://user@db1.internal:3306", "db1.internal:3306",
                                 "https://db1%2einternal:3306", "https://db1.internal:99999"])
def test_an_endpoint_read_two_ways_is_refused(secrets: Path, url: str) -> None:
    """Python's URL reader finds db1.internal in these; a WHATWG reader (object_store's)
    can find evil.example. Only http(s)://host[:port] is taken."""
    bound_to(secrets, ("db1.internal",), (3306,))
    with pytest.raises(ConfigError, match="write the store's endpoint as http"):
        lakes.Lake("s3://bucket/p", [f"AWS_ENDPOINT_URL={url}", *credentials(secrets)], "x")


@pytest.mark.parametrize("given", [True, False])
def test_credentials_in_clear_go_only_to_this_machine(secrets: Path, given: bool) -> None:
    """Plain http to another host would carry the access key id (a password, here) and
    session token in clear: refused, with the definition's credentials or the machine's
    own; loopback (as tests use) is taken."""
    bound_to(secrets, ("10.0.0.0/8", "127.0.0.0/8"))
    storage = ["AWS_ALLOW_HTTP=true", *(credentials(secrets) if given else [])]
    with pytest.raises(ConfigError, match=r"AWS_ENDPOINT_URL http://10.1.2.3:9000: plain "
                       r"http to a host other than this machine .* use https"):
        lakes.Lake("s3://bucket/p", ["AWS_ENDPOINT_URL=http://10.1.2.3:9000", *storage])
    lake = lakes.Lake("s3://bucket/p", ["AWS_ENDPOINT_URL=http://127.0.0.1:9000", *storage])
    assert lake.options.get("AWS_ACCESS_KEY_ID", "") == ("the-database-password" if given
                                                         else "")


def test_only_a_credential_takes_a_reference(secrets: Path) -> None:
    ref = KEY.format(secrets=secrets)
    assert lakestore.storage_problem("AWS_ACCESS_KEY_ID", ref) is None
    assert lakestore.storage_problem("aws_session_token", "${SETL_TOKEN_X}") is None
    for key in ("AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP"):
        assert lakestore.storage_problem(key, ref) is not None, key


def test_the_integration_test_s_store_and_object_store_s_aliases_are_taken(
        secrets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/integration/test_lake_s3.py's options (moto on 127.0.0.1 over http, keys by
    ${SETL_…}), the defaults' rules; and object_store's other names for them."""
    monkeypatch.setenv("SETL_S3_KEY", "k")
    monkeypatch.setenv("SETL_S3_SECRET", "s")
    lake = lakes.Lake("s3://lake/setl", [
        "AWS_ENDPOINT_URL=http://127.0.0.1:45678", "AWS_ALLOW_HTTP=true",
        "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=${SETL_S3_KEY}",
        "AWS_SECRET_ACCESS_KEY=${SETL_S3_SECRET}"])
    assert lake.options["AWS_ACCESS_KEY_ID"] == "k" and lake.options["AWS_ALLOW_HTTP"] == "true"
    lake = lakes.Lake("s3://lake/setl", ["endpoint=https://minio.internal:9000",
                                         "region=auto", "access_key_id=${SETL_S3_KEY}"])
    assert lakestore.endpoint(lake.location, lake.options) == ("minio.internal", 9000)


def test_database_hosts_limit_the_store_a_credential_goes_to(secrets: Path) -> None:
    """Without ``credentials``, a reference goes where ``database_hosts`` allows: a lake's
    store is one of those hosts, as a database is."""
    confinement.confine(Confinement((secrets,), database_hosts=("db1.internal",)))
    with pytest.raises(DatabaseHostError) as caught:
        lakes.Lake("s3://bucket/p", ["AWS_ENDPOINT_URL=https://127.0.0.1:9000",
                                     *credentials(secrets)], "evil")
    assert str(caught.value).startswith(
        "lake target evil: object store 127.0.0.1:9000: host 127.0.0.1 is not among the "
        "database hosts this machine may connect to (db1.internal; its 'security' settings: "
        "database_hosts)")
    lake = lakes.Lake("s3://bucket/p", ["AWS_ENDPOINT_URL=https://db1.internal:9000",
                                        *credentials(secrets)])
    assert lake.options["AWS_SECRET_ACCESS_KEY"] == "the-database-password"


def test_the_machine_s_own_credentials_go_only_to_an_allowed_store(secrets: Path) -> None:
    """A lake that gives no credentials uses the node's own (its environment, its instance
    role): its endpoint (AWS's, by the region) must be allowed all the same."""
    confinement.confine(Confinement((secrets,), database_hosts=("s3.eu-west-1.amazonaws.com",
                                                                "10.0.0.0/8")))
    for storage in ([], ["AWS_ENDPOINT_URL=https://evil.example"],
                    ["AWS_REGION=us-east-1"]):
        with pytest.raises(DatabaseHostError, match="is not among the database hosts"):
            lakes.Lake("s3://bucket/p", storage, "evil")
    assert lakes.Lake("s3://bucket/p", ["AWS_REGION=eu-west-1"]).options == {
        "AWS_REGION": "eu-west-1"}
    assert lakes.Lake("s3://bucket/p", ["AWS_ENDPOINT_URL=https://10.1.2.3"]).options


def test_an_endpoint_the_node_s_environment_names_meets_the_rules(
        secrets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """object_store takes the endpoint (and region) from the node's environment where the
    options name none: the check assumed AWS's, and passed a credential bound to it on to
    another host."""
    bound_to(secrets, ("s3.us-east-1.amazonaws.com",))
    assert lakes.Lake("s3://b/p", credentials(secrets)).options
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://10.9.9.9:9000")
    with pytest.raises(DatabaseHostError, match=r"object store 10\.9\.9\.9:9000: host "
                                                r"10\.9\.9\.9 is not among"):
        lakes.Lake("s3://b/p", credentials(secrets))
    found = dict(option.partition("=")[::2] for option in credentials(secrets))
    assert lakestore.reach_problem(confinement.current(), "s3://b/p", found) is None  # at
    # apply: the manager's environment is not the node's
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://user@10.9.9.9/x?y")
    with pytest.raises(DatabaseHostError, match="the node's environment names object store"):
        lakes.Lake("s3://b/p", credentials(secrets))
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    with pytest.raises(DatabaseHostError, match=r"s3\.eu-west-1\.amazonaws\.com"):
        lakes.Lake("s3://b/p", credentials(secrets)[:2])  # no region in the options


def test_a_store_s_name_passes_only_as_listed_not_by_its_network(
        secrets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """object_store resolves the endpoint's name again: a name whose address lies in a
    listed network now could answer another address then (DNS rebinding). A store's name
    must be listed as it is; an address is taken by its network."""
    monkeypatch.setattr(confinement, "resolve", lambda host: (
        confinement.ipaddress.ip_address("10.1.2.3"),))
    bound_to(secrets, ("10.0.0.0/8",))
    with pytest.raises(DatabaseHostError, match=r"host rebind\.example is not among"):
        lakes.Lake("s3://b/p", ["AWS_ENDPOINT_URL=https://rebind.example",
                                *credentials(secrets)])
    assert lakes.Lake("s3://b/p", ["AWS_ENDPOINT_URL=https://10.1.2.3",
                                   *credentials(secrets)]).options


@pytest.mark.parametrize("location", [
    "s3://lakes/team-a/../team-b", "s3://lakes/team-a/%2e%2e/team-b",
    "s3://lakes/team-a/.%2E/team-b", "s3://lakes/team-a/./x", "s3://lakes/team-a//x",
    "s3://lakes/team-a\\..\\team-b", "s3://lakes/team-a?/../../team-b"])
def test_a_location_s_dot_segments_are_refused(location: str) -> None:
    """The reviewer's escape: compared as text, ``s3://lakes/team-a/../team-b`` lay under
    ``s3://lakes/team-a``; object_store reads it as ``team-b``."""
    rules = Confinement(lake_locations=("s3://lakes/team-a",))
    problem = rules.lake_problem(location)
    assert problem is not None and problem.startswith(f"location {location}: "), problem
    assert lakestore.location_problem(location) == problem


@pytest.mark.parametrize("location, allowed", [
    ("s3://lakes/team-a", True), ("s3://lakes/team-a/", True), ("s3://lakes/team-a/x/y", True),
    ("s3://lakes/team-ab", False), ("s3://lakes/team-b/team-a", False),
    ("s3a://lakes/team-a/x", False), ("s3://lakes2/team-a/x", False),
    ("s3://team-a/lakes", False)])
def test_a_location_is_under_a_lake_location_by_its_segments(location: str,
                                                             allowed: bool) -> None:
    rules = Confinement(lake_locations=("s3://lakes/team-a/",))
    assert (rules.lake_problem(location) is None) is allowed


def test_the_node_checks_its_own_lake_locations_where_it_opens_a_lake(tmp_path: Path) -> None:
    """A definition written into ZooKeeper is checked by nobody at apply: the node's rules
    are checked where a lake is opened (the loader, verify, positions)."""
    before = confinement.current()
    confinement.confine(Confinement(lake_locations=("s3://lakes/team-a", str(tmp_path / "a"))))
    try:
        for location in ("s3://lakes/team-b", str(tmp_path / "a" / ".." / "b"),
                         f"file://{tmp_path}/b"):
            with pytest.raises(DatabaseHostError, match=f"location {location} is not under "
                               "the lake locations this machine may write"):
                lakes.Lake(location, (), "lake")
        assert lakes.Lake(str(tmp_path / "a" / "x")).local
        assert lakes.Lake(f"file://{tmp_path}/a/x").local
        with pytest.raises(ConfigError, match="%2e%2e/b: '%' is not taken in a location URL"):
            lakes.Lake(f"file://{tmp_path}/a/%2e%2e/b")
    finally:
        confinement.confine(before)


def test_apply_refuses_what_the_node_would(secrets: Path) -> None:
    """The manager's check at apply, each at its line and field."""
    ref = KEY.format(secrets=secrets)
    text = ("sources:\n"
            "  - name: a\n    type: delta\n    location: s3://lakes/team-a/../team-b\n"
            "  - name: b\n    type: delta\n    location: s3://lakes/team-a/b\n"
            f"    storage: {{AWS_ENDPOINT_URL: 'https://db1.internal:3306', "
            f"AWS_PROXY_URL: 'http://evil.example', AWS_ACCESS_KEY_ID: '{ref}'}}\n"
            "  - name: c\n    type: delta\n    location: s3://lakes/team-a/c\n"
            "    storage: {AWS_ENDPOINT_URL: 'https://evil.example'}\n"
            "  - name: d\n    type: delta\n    location: s3://lakes/team-a/d\n")
    rules = Confinement((secrets,), database_hosts=("db1.internal",),
                        lake_locations=("s3://lakes/team-a",))
    with pytest.raises(ConfigError) as caught:
        definitions.load_text(text, "l.yaml", rules=rules)
    found = [(issue.line, issue.path, issue.message[:40]) for issue in caught.value.issues]
    assert found == [
        (4, "sources[0].location", "location s3://lakes/team-a/../team-b: an"),
        (8, "sources[1].storage.AWS_PROXY_URL", "AWS_PROXY_URL: setl does not pass this o"),
        (12, "sources[2].storage", "object store evil.example:443: host evil"),
        (15, "sources[3].location", "object store s3.us-east-1.amazonaws.com:")], found
