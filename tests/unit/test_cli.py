"""manager/cli.py: the global options go before or after a command's name, and the CLI
tells its version (parsing only: no manager is asked)."""

from __future__ import annotations

import argparse

import pytest

from manager import cli, render
from manager.client import wait_channel
from shared import codec, definitions
from shared.errors import ManagerUnavailableError
from shared.model import DataSource
from shared.rpc import manager_pb2
from shared.secrets import SecretRef
from shared.version import version


@pytest.mark.parametrize("argv", [
    ["-o", "json", "--manager", "127.0.0.1:7399", "channel", "list"],
    ["channel", "-o", "json", "list", "--manager", "127.0.0.1:7399"],
    ["channel", "list", "-o", "json", "--manager", "127.0.0.1:7399"],
])
def test_global_options_go_anywhere(argv: list[str]) -> None:
    args = cli._parser().parse_args(argv)
    assert (args.output, args.manager, args.command, args.action) == (
        "json", "127.0.0.1:7399", "channel", "list")


def test_global_options_keep_their_defaults_when_not_given() -> None:
    args = cli._parser().parse_args(["position", "show", "demo"])
    assert (args.output, args.manager, args.token) == ("table", None, None)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    assert capsys.readouterr().out.startswith("setl ")
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"setl {version()}"


def test_every_argument_of_every_command_has_help() -> None:
    def without(parser: argparse.ArgumentParser, path: str) -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += without(sub, f"{path} {name}")
            elif not action.help and action.dest != "help":
                found.append(f"{path} {action.option_strings or action.dest}")
        return found

    assert without(cli._parser(), "setl") == []


def test_control_characters_reach_the_terminal_escaped(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """A description or a server's error text may hold terminal sequences (OSC 52 sets the
    clipboard): the CLI shows them escaped, newlines and tabs kept."""
    assert cli.printable("a\x1b]52;c;ZXZpbA==\x07b\n\tc\x9bd") == \
        "a\\x1b]52;c;ZXZpbA==\\x07b\n\tc\\x9bd"
    code = cli.main(["--manager", "127.0.0.1:1\x1b[2J", "channel", "show", "x"])
    err = capsys.readouterr().err
    assert code != 0 and "127.0.0.1:1\\x1b[2J" in err and "\x1b" not in err, err


def test_a_replica_set_source_shown_as_yaml_applies_again() -> None:
    """``setl source list -o yaml`` spells a replica set by its hosts (the member read now is
    the ZooKeeper record's, not the definition's): the output is a definitions file."""
    source = DataSource("shop", "db2", 3307, "setl", SecretRef("${SETL_SHOP}"),
                        hosts=("db1:3306", "db2:3307"))
    one = DataSource("copy", "db3", 3306, "setl", SecretRef("${SETL_COPY}"))
    text = render.structured({"sources": [render.source_data(codec.to_proto(s))
                                          for s in (source, one)]}, "yaml")
    loaded = definitions.load_text(text)
    assert [s.hosts for s in loaded.sources] == [("db1:3306", "db2:3307"), ()]
    assert (loaded.sources[1].host, loaded.sources[1].port) == ("db3", 3306)


def test_a_wait_for_a_stop_ends_once_no_node_owns_the_pipeline() -> None:
    """A runner publishes "stopped" just before its node gives the pipeline up; what follows
    a stop (setl position set) needs it given up, so --wait waits for that."""
    def state(name: str, owner: int) -> manager_pb2.ChannelInfo:
        return manager_pb2.ChannelInfo(pipelines=[
            manager_pb2.PipelineState(pipeline_id="c.p", state=name, owner_node=owner)])

    class Scripted:
        def __init__(self, answers: list[manager_pb2.ChannelInfo]) -> None:
            self.answers, self.calls = answers, 0

        def call(self, method: str, request: object) -> object:
            self.calls += 1
            return self.answers.pop(0)

    gone = state("not running", 0)
    client = Scripted([state("running", 1), state("stopped", 1), gone])
    assert wait_channel(client, "c", "stop", 10) is gone  # type: ignore[arg-type]
    assert client.calls == 3
    failed = state("failed", 1)
    assert wait_channel(Scripted([failed]), "c", "pause", 10) is failed  # type: ignore[arg-type]


def test_wait_goes_on_through_a_manager_that_does_not_answer_for_a_moment() -> None:
    """``--wait`` waits through a manager failing over (or too busy to answer one poll)
    until its timeout; after it, the manager's absence is the error."""
    running = manager_pb2.ChannelInfo(pipelines=[
        manager_pb2.PipelineState(pipeline_id="c.p", state="running", owner_node=1)])

    class Flaky:
        def __init__(self, answers: list[object]) -> None:
            self.answers, self.calls = answers, 0

        def call(self, method: str, request: object) -> object:
            self.calls += 1
            answer = self.answers.pop(0) if self.answers else ManagerUnavailableError("gone")
            if isinstance(answer, Exception):
                raise answer
            return answer

    flaky = Flaky([ManagerUnavailableError("gone"), ManagerUnavailableError("gone"), running])
    assert wait_channel(flaky, "c", "start", 10) is running  # type: ignore[arg-type]
    assert flaky.calls == 3
    with pytest.raises(ManagerUnavailableError):
        wait_channel(Flaky([]), "c", "start", 0.6)  # type: ignore[arg-type]
