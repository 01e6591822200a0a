"""``setl snapshot … --wait`` (manager/snapshotcli.py): its exit status, with no manager."""

from __future__ import annotations

import argparse

import pytest

from manager import snapshotcli
from shared.rpc import manager_pb2

RENAMED = ("pipeline shop.forward: shop.t was renamed to shop.t_old …; copy it again under "
           "that name: setl snapshot shop --table shop.t_old")


class Client:
    """Answers every Snapshot call with the copies listed (in the order they started)."""

    def __init__(self, *copies: manager_pb2.TableCopy) -> None:
        self.copies = copies

    def call(self, method: str, request: manager_pb2.SnapshotRequest
             ) -> manager_pb2.SnapshotResponse:
        return manager_pb2.SnapshotResponse(pipeline_id="shop.forward", copies=self.copies)


def run(client: Client, table: str) -> int:
    args = argparse.Namespace(what=["shop"], table=table, where="", pipeline="", wait=True)
    return snapshotcli.snapshot(args, client, "table")  # type: ignore[arg-type]


def test_a_copy_asked_again_after_a_rename_failed_the_old_one_exits_0_and_lists_both(
        capsys: pytest.CaptureFixture[str]) -> None:
    client = Client(manager_pb2.TableCopy(table="shop.t", state="failed", error=RENAMED),
                    manager_pb2.TableCopy(table="shop.t_old", state="done", chunks_done=2,
                                          chunks=2))
    assert run(client, "shop.t_old") == 0
    shown = capsys.readouterr().out
    assert shown.count("shop.t") >= 2  # both listed


def test_the_copy_asked_for_failing_exits_1() -> None:
    client = Client(manager_pb2.TableCopy(table="shop.a", state="done"),
                    manager_pb2.TableCopy(table="shop.t_old", state="failed", error="no key"))
    assert run(client, "shop.t_old") == 1


def test_a_table_copied_again_is_judged_by_its_newest_copy() -> None:
    """A replaced table's failed copy says to copy the same name again."""
    assert run(Client(manager_pb2.TableCopy(table="shop.t", state="failed"),
                      manager_pb2.TableCopy(table="shop.t", state="done")), "shop.t") == 0
    assert run(Client(manager_pb2.TableCopy(table="shop.t", state="done"),
                      manager_pb2.TableCopy(table="shop.t", state="failed")), "shop.t") == 1


def test_status_wait_still_exits_1_for_any_failed_copy() -> None:
    args = argparse.Namespace(what=["status", "shop"], table="", where="", pipeline="",
                              wait=True)
    client = Client(manager_pb2.TableCopy(table="shop.t", state="failed"),
                    manager_pb2.TableCopy(table="shop.u", state="done"))
    assert snapshotcli.snapshot(args, client, "table") == 1  # type: ignore[arg-type]
