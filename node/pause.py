"""A pipeline failed for good pauses its channel: the channel as its runner knew it.

The status znode's version is read once, and PAUSE written over that version only. A write
ZooKeeper refuses (an outage) is tried again after a backoff until it is written or the
runner is stopped: a pause given up left the channel started and nothing ever retried it.
A status written meanwhile (the operator looked at the failure and started the channel
again, or stopped or paused it) is someone else's decision: a late retry never writes over
it.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any

from kazoo.exceptions import BadVersionError

from shared.catalog import Catalog
from shared.errors import NotFoundError, SetlError
from shared.model import ChannelStatus

log = logging.getLogger("setl.node.pipeline")


def pause_channel(ctx: Any, pipeline_id: str, stop: threading.Event) -> None:
    """Pause ``ctx.channel`` (a :class:`node.pipeline.PipelineContext`) for ``pipeline_id``,
    which failed for good, unless someone else decided first; give up once ``stop`` is set."""
    catalog = Catalog(ctx.client, ctx.paths)
    waits = itertools.chain(ctx.backoff.delays(), itertools.repeat(ctx.backoff.max_delay_s))
    over: int | None = None  # the status znode's version the pause is meant for
    for attempt in itertools.count(1):
        try:
            if over is None:
                over, why_not = meant_for(catalog, ctx)
                if over is None:
                    log.warning("event=pause_abandoned pipeline=%s reason=\"%s\"", pipeline_id,
                                why_not)
                    return
            catalog.set_status_over(ctx.channel.name, ChannelStatus.PAUSE, over)
            return
        except BadVersionError:
            log.warning("event=pause_abandoned pipeline=%s reason=\"the status of channel %s "
                        "changed after the failure (from version %d): someone else decided\"",
                        pipeline_id, ctx.channel.name, over)
            return
        except SetlError as exc:
            wait = next(waits)
            log.error("event=pause_failed pipeline=%s attempt=%d retry_in_s=%g error=%s",
                      pipeline_id, attempt, wait, exc)
        if stop.wait(wait):
            log.error("event=pause_abandoned pipeline=%s reason=\"the runner was stopped\" "
                      "hint=\"pause the channel: setl channel pause %s\"", pipeline_id,
                      ctx.channel.name)
            return


def meant_for(catalog: Catalog, ctx: Any) -> tuple[int | None, str]:
    """The status znode's version to write PAUSE over, or None and why there is nothing to
    pause: the channel is gone, redefined, or no longer started."""
    name = ctx.channel.name
    try:
        record = catalog.channel(name)
    except NotFoundError:
        return None, f"channel {name} was deleted"
    if record.version != ctx.version:
        return None, (f"channel {name} was redefined (version {record.version}, the failed "
                      f"runner's {ctx.version})")
    if record.status is not ChannelStatus.START:
        return None, f"channel {name} is {record.status.value} already"
    return record.status_version, ""
