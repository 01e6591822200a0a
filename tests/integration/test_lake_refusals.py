"""What a lake target refuses before it could hold other rows than the source's, on real
servers: each refusal names the pipeline, the table or pair and what to do, and the lake
holds nothing the source does not."""

from __future__ import annotations

import pytest

from tests.devcluster import Cluster, Database, make_schema, wait_for
from tests.integration.lakes import ended, lake_channel, lake_sources, rows

pytestmark = pytest.mark.integration


def test_a_text_column_setl_cannot_decode_is_refused_at_start(sandbox, tmp_path):
    """swe7's 'KÄra' is the bytes of 'K[ra': copied, the lake would hold the wrong text."""
    source, target = Database(sandbox, "source"), Database(sandbox, "target")
    schema = make_schema(source, target, "CREATE TABLE `{schema}`.names (id INT PRIMARY KEY, "
                         "name VARCHAR(9) CHARACTER SET swe7, note VARCHAR(9))")
    location = tmp_path / "lake"
    cluster = Cluster(sandbox, tmp_path, "lake-swe7")
    try:
        cluster.start_manager()
        cluster.start_node(1)
        cluster.apply([lake_channel("lw", schema, [{"table": "names"}])],
                      lake_sources(cluster, location))
        cluster.set_status("lw", "START")
        wait_for(lambda: "a charset setl cannot decode" in
                 cluster.pipeline_state("lw").last_error, 60, "the pipeline to refuse swe7")
        error = cluster.pipeline_state("lw").last_error
        assert f"pair source:{schema}.names: column name of {schema}.names is text in swe7" \
            in error, error
        assert "columns: {exclude: [name]}" in error
        # left out, the rest of the table goes to the lake
        cluster.apply([lake_channel("lw", schema, [{"table": "names", "columns": {
            "exclude": ["name"]}}])], lake_sources(cluster, location))
        cluster.set_status("lw", "START")
        cluster.wait_running("lw")
        source.execute(f"INSERT INTO `{schema}`.names VALUES (1, 'K\u00c4ra', 'ok')")
        wait_for(lambda: rows(location, schema, "names", ["id", "note"]).get((1, "ok")), 60,
                 "the row without its swe7 column")
    finally:
        ended(cluster, source, target)
