"""Password references: ${ENV} and file:/path; the value is never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.confinement import Confinement
from shared.errors import ConfigError, SecretError
from shared.secrets import SecretRef

REFUSED = ("passwords are references, not values: write ${ENV_VAR} or file:/path/to/file")


def test_env_reference_resolves_from_the_given_environ() -> None:
    ref = SecretRef.parse("${SETL_DB_PASSWORD}")
    assert ref.resolve({"SETL_DB_PASSWORD": "s3cret", "OTHER": "x"}) == "s3cret"


def test_env_reference_keeps_the_value_as_is() -> None:
    assert SecretRef.parse("${SETL_PW}").resolve({"SETL_PW": " spaced \n"}) == " spaced \n"


def test_env_reference_defaults_to_the_process_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETL_TEST_SECRET", "from-os")
    assert SecretRef.parse("${SETL_TEST_SECRET}").resolve() == "from-os"


def test_missing_env_var_names_the_variable() -> None:
    with pytest.raises(SecretError) as caught:
        SecretRef.parse("${SETL_DB_PASSWORD}").resolve({"SETL_DB_PASS": "close but no"})
    assert caught.value.issues[0].message == (
        "password reference ${SETL_DB_PASSWORD}: environment variable SETL_DB_PASSWORD is not set; "
        "export it where this process runs")
    assert isinstance(caught.value, ConfigError)


def test_file_reference_reads_and_strips_the_trailing_newline(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    assert SecretRef.parse(f"file:{secret}").resolve({}, Confinement((tmp_path,))) == "s3cret"


def test_file_reference_strips_crlf_but_keeps_inner_whitespace(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_bytes(b" a b\r\n")
    assert SecretRef.parse(f"file:{secret}").resolve({}, Confinement((tmp_path,))) == " a b"


def test_file_reference_without_newline(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("exact")
    assert SecretRef.parse(f"file:{secret}").resolve({}, Confinement((tmp_path,))) == "exact"


def test_a_file_every_user_may_read_is_said_once_and_a_closed_one_not(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    open_file, closed = tmp_path / "open", tmp_path / "closed"
    for secret, mode in ((open_file, 0o644), (closed, 0o640)):
        secret.write_text("pw\n")
        secret.chmod(mode)
    rules = Confinement((tmp_path,))
    with caplog.at_level("WARNING", logger="setl.secrets"):
        for _ in range(2):
            assert SecretRef.parse(f"file:{open_file}").resolve({}, rules) == "pw"
            assert SecretRef.parse(f"file:{closed}").resolve({}, rules) == "pw"
    said = [record.getMessage() for record in caplog.records]
    assert said == [f"event=secret_file_open path={open_file} mode=0o644: every user of this "
                    "machine can read this password; chmod 600 (or 640 with a group of setl's "
                    "own)"]


def test_missing_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "absent"
    with pytest.raises(SecretError) as caught:
        SecretRef.parse(f"file:{path}").resolve({}, Confinement((tmp_path,)))
    assert caught.value.issues[0].message == (
        f"password reference file:{path}: cannot read {path}: No such file or directory")


def test_unreadable_file_is_reported(tmp_path: Path) -> None:
    # a directory cannot be read as a file, even by root (a chmod 000 file can)
    with pytest.raises(SecretError) as caught:
        SecretRef.parse(f"file:{tmp_path}").resolve({}, Confinement((tmp_path,)))
    assert caught.value.issues[0].message == (
        f"password reference file:{tmp_path}: cannot read {tmp_path}: Is a directory")


def test_binary_file_is_reported(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_bytes(b"\xff\xfe")
    with pytest.raises(SecretError) as caught:
        SecretRef.parse(f"file:{secret}").resolve({}, Confinement((tmp_path,)))
    assert caught.value.issues[0].message == (
        f"password reference file:{secret}: {secret} is not UTF-8 text; write the password "
        "as UTF-8")


def test_str_and_repr_never_show_the_value(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("hunter2\n")
    for ref, value in ((SecretRef.parse("${SETL_PW}"), "topsecret"),
                       (SecretRef.parse(f"file:{secret}"), "hunter2")):
        resolved = ref.resolve({"SETL_PW": "topsecret"}, Confinement((secret.parent,)))
        assert resolved == value
        for shown in (str(ref), repr(ref), f"{ref}", f"{ref!r}", str([ref])):
            assert value not in shown
    assert str(SecretRef.parse("${SETL_PW}")) == "${SETL_PW}"
    assert repr(SecretRef.parse("${SETL_PW}")) == "SecretRef('${SETL_PW}')"


@pytest.mark.parametrize("text", ["hunter2", "", "file:", "${}", "${1ABC}", "$PW", "${PW",
                                  "${PW}x", "x${PW}", "env:PW"])
def test_parse_refuses_plain_text(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SecretRef.parse(text)
    assert [issue.message for issue in caught.value.issues] == [REFUSED]


@pytest.mark.parametrize("text", ["${PW}", "${_pw_2}", "file:/etc/setl/pw", "file:rel/pw"])
def test_parse_accepts_references(text: str) -> None:
    assert SecretRef.parse(text).text == text
