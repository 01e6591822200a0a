"""Model ↔ protobuf: a lossless, deterministic round trip."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from shared import codec
from shared.definitions import load_file
from shared.model import (
    BinlogPosition,
    Channel,
    DataSource,
    Definitions,
    MediaPair,
    Pipeline,
    PipelineParams,
    StartupMode,
    VirtualColumn,
)
from shared.rpc import model_pb2

CONF = Path(__file__).resolve().parents[2] / "conf" / "channels"


@pytest.fixture(scope="module")
def full() -> Definitions:
    return load_file(CONF / "example-full.yaml")


def test_every_channel_round_trips(full: Definitions) -> None:
    assert full.channels
    for channel in full.channels:
        message = codec.to_proto(channel)
        assert isinstance(message, model_pb2.Channel)
        assert codec.from_proto(message, Channel) == channel


def test_every_source_round_trips(full: Definitions) -> None:
    assert len(full.sources) == 3
    for source in full.sources:
        assert codec.from_proto(codec.to_proto(source), DataSource) == source


def test_round_trip_through_bytes(full: Definitions) -> None:
    for channel in full.channels:
        stored = model_pb2.StoredChannel(channel=codec.to_proto(channel), version=3)
        parsed = codec.channel_from_bytes(stored.SerializeToString(deterministic=True))
        assert parsed.version == 3
        assert codec.from_proto(parsed.channel, Channel) == channel
    source = full.sources[1]
    stored_source = model_pb2.StoredSource(source=codec.to_proto(source), version=1)
    parsed_source = codec.source_from_bytes(stored_source.SerializeToString())
    assert codec.from_proto(parsed_source.source, DataSource) == source


def test_encode_is_deterministic(full: Definitions) -> None:
    for value in (*full.channels, *full.sources):
        first = codec.encode(value)
        assert first == codec.encode(value)
        assert first  # not empty
        assert codec.encode(codec.from_proto(codec.to_proto(value), type(value))) == first


def test_encode_differs_when_the_model_differs(full: Definitions) -> None:
    channel = full.channels[0]
    changed = Channel(channel.name, channel.pipelines, "another description")
    assert codec.encode(changed) != codec.encode(channel)


def test_fields_are_stored_as_written(full: Definitions) -> None:
    message = codec.to_proto(full.channels[0])
    pairs = message.pipelines[0].pairs
    assert pairs[1].source.table == "orders_[00-15]"
    assert pairs[2].source.table == "re:audit_\\d{6}"
    assert pairs[3].shard.algorithm == model_pb2.SHARD_ALGORITHM_MODULO
    assert pairs[0].column_mode == model_pb2.COLUMN_MODE_INCLUDE
    assert message.pipelines[0].params.startup == model_pb2.STARTUP_MODE_LATEST
    source = codec.to_proto(full.sources[0])
    assert source.password == "${SETL_SHOP_DB_PASSWORD}"


def test_optional_none_fields_stay_none(full: Definitions) -> None:
    source = DataSource("plain", "db1")
    assert source.password is None
    message = codec.to_proto(source)
    assert not message.HasField("password")
    assert codec.from_proto(message, DataSource).password is None

    plain_pair = full.channels[0].pipelines[0].pairs[0]
    assert (plain_pair.processor, plain_pair.shard) == (None, None)
    pair_message = codec.to_proto(plain_pair)
    assert not pair_message.HasField("processor") and not pair_message.HasField("shard")
    back = codec.from_proto(pair_message, MediaPair)
    assert (back.processor, back.shard) == (None, None)

    params = full.channels[0].pipelines[0].params
    assert params.start_position is None
    assert codec.from_proto(codec.to_proto(params), PipelineParams).start_position is None


def test_virtual_column_keeps_which_filler_is_set() -> None:
    for column in (VirtualColumn("v", value=""), VirtualColumn("v", expression="a + 1"),
                   VirtualColumn("v", processor="m:f")):
        assert codec.from_proto(codec.to_proto(column), VirtualColumn) == column


@pytest.mark.parametrize("params", [
    PipelineParams(startup=StartupMode.POSITION, start_position=BinlogPosition("b.000003", 4)),
    PipelineParams(startup=StartupMode.GTID, start_position=BinlogPosition(gtid="0-11-100")),
    PipelineParams(parallelism=64, batch_size=1, ddl_sync=True, dry_run=True, max_retries=0),
])
def test_params_round_trip(params: PipelineParams) -> None:
    assert codec.from_proto(codec.to_proto(params), PipelineParams) == params


def test_node_lists_round_trip(full: Definitions) -> None:
    pipeline = full.channels[0].pipelines[0]
    with_nodes = Pipeline(pipeline.name, pipeline.source, pipeline.target, pipeline.pairs,
                          (1, 3), pipeline.params)
    back = codec.from_proto(codec.to_proto(with_nodes), Pipeline)
    assert back.nodes == (1, 3)
    assert back == with_nodes


def test_a_record_stored_before_a_field_existed_reads_as_its_default() -> None:
    """A definition stored by an older setl lacks the fields added since: they read as their
    defaults (4 snapshot chunks at once), not as zero (none at all)."""
    older = model_pb2.PipelineParams(parallelism=3, batch_size=100)
    params = codec.from_proto(older, PipelineParams)
    assert (params.parallelism, params.batch_size) == (3, 100)
    assert params.snapshot_parallelism == PipelineParams().snapshot_parallelism == 4
    assert params.snapshot_chunk_size == PipelineParams().snapshot_chunk_size
    source = codec.from_proto(model_pb2.DataSource(name="old", host="db1"), DataSource)
    assert (source.port, source.primary, source.switch_after_s) == (3306, "read_only", 10)
    zero = codec.from_proto(codec.to_proto(replace(PipelineParams(), load_data_min_rows=0)),
                            PipelineParams)
    assert zero.load_data_min_rows == 0  # a zero given is kept
