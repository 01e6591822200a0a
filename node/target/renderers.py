"""The worker side of each kind of target: a part's target changes turned into the target's
own form (:class:`node.jobs.Unit` s), in the Spark worker that ran Extract/Transform.

Only this side of a target is imported by Extract; its load side (:mod:`node.target.kinds`)
runs in the node.
"""

from __future__ import annotations

from collections.abc import Callable

from node.changes import TargetChange
from node.jobs import JobSpec, Unit
from node.target.delta import units as delta
from node.target.mysql import units as mysql
from node.target.subscription import units as subscription

RENDERERS: dict[str, Callable[[list[TargetChange], JobSpec, bool], list[Unit]]] = {
    "mysql": mysql.render,
    "delta": delta.render,
    "subscription": subscription.render,
}


def render(changes: list[TargetChange], spec: JobSpec, big: bool = True) -> list[Unit]:
    """The changes merged and in the form of ``spec.target``'s kind, a unit per table."""
    return RENDERERS[spec.target](changes, spec, big)
