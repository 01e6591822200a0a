"""The load side of each kind of target, chosen by the target's ``type`` (its source
definition's): MySQL and MariaDB are one kind."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kazoo.client import KazooClient

from node.target.base import TargetLoader, TargetTables
from node.target.delta.loader import LakeLoader
from node.target.delta.tables import (
    CHANGELOG,
    LakeTables,
    refuse_cascades,
    refuse_partial_rows,
    refuse_undecodable,
)
from node.target.mysql.facts import TargetFacts
from node.target.mysql.loader import Loader
from node.target.mysql.twoway import LoopGuard
from node.target.subscription.loader import SubscriptionLoader
from shared.errors import ConfigError
from shared.model import DataSource, PipelineParams
from shared.zk import ZkPaths

# a DataSource's type → its kind of target
KINDS = {"mysql": "mysql", "mariadb": "mysql", "delta": "delta",
         "subscription": "subscription"}


def kind_of(pipeline_id: str, targets: Mapping[str, DataSource]) -> str:
    """The one kind of target a pipeline writes (a pipeline's pairs write one kind)."""
    found = {name: KINDS.get(target.type or "mysql") for name, target in targets.items()}
    unknown = sorted(name for name, kind in found.items() if kind is None)
    if unknown:
        raise ConfigError(f"pipeline {pipeline_id}: target {unknown[0]} has type "
                          f"{targets[unknown[0]].type!r}; setl writes "
                          f"{', '.join(sorted(KINDS))}")
    if len(set(found.values())) > 1:
        raise ConfigError(f"pipeline {pipeline_id} writes targets of different kinds "
                          f"({', '.join(f'{n}: {k}' for n, k in sorted(found.items()))}); "
                          "give each kind its own pipeline")
    return next(iter(found.values()), "mysql")


def loader(kind: str, pipeline_id: str, targets: dict[str, DataSource],
           params: PipelineParams, epoch: int, stop: threading.Event, run: str,
           two_way: tuple[str, bool] | None = None,
           zk: tuple[KazooClient, ZkPaths] | None = None) -> TargetLoader:
    """The load side for one running pipeline; ``two_way``: the channel's name and whether
    this pipeline wins conflicts; ``zk``: where a subscription keeps its position."""
    if kind == "subscription":
        if params.dry_run:
            raise ConfigError(f"pipeline {pipeline_id} feeds a subscription: its reader's "
                              "acknowledgements are its position, so a dry run would move "
                              "it; leave dry_run out of the pipeline")
        if two_way or zk is None:
            raise ConfigError(f"pipeline {pipeline_id}: a two-way channel cannot feed a "
                              "subscription; give it a one-way channel")
        return SubscriptionLoader(pipeline_id, targets, params, epoch, stop, run, *zk)
    if kind == "delta":
        if two_way:
            raise ConfigError(f"pipeline {pipeline_id}: a two-way channel cannot write a "
                              "lake; give the lake a one-way channel")
        return LakeLoader(pipeline_id, targets, params, epoch, stop=stop, run=run)
    loop = LoopGuard(two_way[0], pipeline_id, wins_conflicts=two_way[1]) if two_way else None
    return Loader(pipeline_id, targets, params, epoch, loop, stop=stop, run=run)


def check_source(kind: str, compiled: Any, source: DataSource) -> None:
    """What the source and the pairs must not hold for this kind of target (checked at each
    start)."""
    if kind == "delta":
        refuse_partial_rows(compiled)
    if kind in ("delta", "subscription"):
        refuse_cascades(compiled, source, "a lake table" if kind == "delta" else
                        "a subscription's reader")
    if kind == "delta":
        refuse_undecodable(compiled, source)


def tables(kind: str, targets: dict[str, DataSource], compiled: Any = None) -> TargetTables:
    """What a kind of target's rendering needs to know of its tables; a lake's come from
    the pairs of ``compiled`` (the pipeline's CompiledPipeline) and the source's table maps."""
    if kind == "delta":
        return LakeTables(compiled)
    if kind == "subscription":  # the columns' types, as a lake's; any table, keyed or not
        return LakeTables(compiled, mode=CHANGELOG)
    return TargetFacts(targets)
