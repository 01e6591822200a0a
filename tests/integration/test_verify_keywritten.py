"""``setl verify`` and ``--repair`` on real servers where a virtual column writes the key
(``id: id + 1000``, the recipe that keeps gathered tables' keys apart): each source row is
compared with the target row at the key its transformed image writes, not at its own key;
rows no source row gives are not looked for there (the report says why), and a repair's
request (by source key) mends the right row."""

from __future__ import annotations

from typing import Any

from tests.devcluster import Cluster, Database, make_schema, one_way, wait_for
from tests.integration.test_verify import found, start, verify

ROWS = ("CREATE TABLE `{schema}`.rows_ (id INT PRIMARY KEY, v INT, note VARCHAR(20))")


def keyed_channel(name: str, schema: str) -> dict[str, Any]:
    channel = one_way(name, schema, ["rows_"])
    channel["pipelines"][0]["pairs"][0]["virtual_columns"] = [
        {"name": "id", "expression": "id + 1000"}]
    return channel


def filled(source: Database, target: Database, schema: str, rows: int) -> None:
    source.execute(f"INSERT INTO `{schema}`.rows_ VALUES " + ", ".join(
        f"({i}, {i % 100}, 'n{i % 100}')" for i in range(1, rows + 1)))
    wait_for(lambda: target.rows(f"SELECT COUNT(*), MIN(id), MAX(id) FROM `{schema}`.rows_")
             == [(rows, 1001, 1000 + rows)], 90, f"{rows} rows at id + 1000")


def test_an_in_step_target_whose_key_a_virtual_column_writes_is_equal(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    schema = make_schema(source, target, ROWS)
    start(cluster, keyed_channel("v-keyw", schema))
    filled(source, target, schema, 3000)
    code, report = verify(cluster, capsys, "v-keyw", "--chunk-size", "500")
    [verdict] = report["reports"][0]["tables"]
    assert code == 0, report
    assert verdict["rows"] == 3000 and not verdict.get("differences"), verdict
    assert any("written by virtual columns" in note for note in verdict["notes"]), verdict
    cluster.set_status("v-keyw", "STOP")


def test_a_changed_row_under_a_written_key_is_found_and_repaired(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """v and note repeat every 100 rows: compared by its own key, source row 150 would meet
    target row 150 (written by source row 50, alike but for the key), and a changed row
    could pass."""
    schema = make_schema(source, target, ROWS)
    start(cluster, keyed_channel("v-keyw2", schema))
    filled(source, target, schema, 300)
    t, table = f"`{schema}`.rows_", f"{schema}.rows_"
    target.execute(f"UPDATE {t} SET note = 'changed' WHERE id = 1150")  # source row 150
    code, report = verify(cluster, capsys, "v-keyw2", "--chunk-size", "50")
    assert code == 1, report
    assert found(report, table) == {"missing": set(), "extra": set(),
                                    "different": {((150,), table)}}, report
    code, report = verify(cluster, capsys, "v-keyw2", "--chunk-size", "50", "--repair")
    [verdict] = report["reports"][0]["tables"]
    assert code == 0 and verdict["repaired"] == 1, report
    wait_for(lambda: target.rows(f"SELECT note FROM {t} WHERE id = 1150") == [("n50",)], 30,
             "row 150 repaired at id 1150")
    assert target.rows(f"SELECT COUNT(*), MIN(id), MAX(id) FROM {t}") == [(300, 1001, 1300)]
    assert verify(cluster, capsys, "v-keyw2", "--chunk-size", "50")[0] == 0
    cluster.set_status("v-keyw2", "STOP")


def test_two_tables_gathered_into_one_kept_apart_by_a_written_key(
        cluster: Cluster, source: Database, target: Database, capsys: Any) -> None:
    """docs/configuration.md's recipe: a and b into one table m, b's keys moved by
    ``id + 1000``. Each source table compares with its own rows there; a changed row of b
    is b's difference, at b's own key, and repair mends it."""
    ddl = "CREATE TABLE `{schema}`.%s (id INT PRIMARY KEY, v INT, note VARCHAR(20))"
    schema = make_schema(source, target, *(ddl % name for name in ("a", "b", "m")))
    start(cluster, {"name": "v-keyw3", "pipelines": [{
        "name": "forward", "source": "source", "target": "target", "pairs": [
            {"source": f"{schema}.a", "target": f"{schema}.m"},
            {"source": f"{schema}.b", "target": f"{schema}.m",
             "virtual_columns": [{"name": "id", "expression": "id + 1000"}]}]}]})
    for name in ("a", "b"):
        source.execute(f"INSERT INTO `{schema}`.{name} VALUES " + ", ".join(
            f"({i}, {i % 10}, '{name}{i % 10}')" for i in range(1, 201)))
    m = f"`{schema}`.m"
    wait_for(lambda: target.rows(f"SELECT COUNT(*) FROM {m}") == [(400,)], 90, "400 rows")
    assert verify(cluster, capsys, "v-keyw3", "--chunk-size", "50")[0] == 0
    target.execute(f"UPDATE {m} SET v = 99 WHERE id = 1020")  # b's row 20
    code, report = verify(cluster, capsys, "v-keyw3", "--chunk-size", "50")
    m_name = f"{schema}.m"
    assert code == 1, report
    assert found(report, f"{schema}.b") == {"missing": set(), "extra": set(),
                                            "different": {((20,), m_name)}}, report
    assert not any(found(report, f"{schema}.a").values()), report
    code, report = verify(cluster, capsys, "v-keyw3", "--repair")
    assert code == 0, report
    wait_for(lambda: target.rows(f"SELECT v FROM {m} WHERE id = 1020") == [(0,)], 30,
             "b's row 20 repaired at id 1020")
    assert target.rows(f"SELECT v FROM {m} WHERE id = 20") == [(0,)]  # a's row 20 untouched
    assert target.rows(f"SELECT COUNT(*) FROM {m}") == [(400,)]
    cluster.set_status("v-keyw3", "STOP")
