"""Fakes for the supervisor's tests, unit (tests/unit/test_supervisor.py) and on a real
ZooKeeper (tests/integration/test_source_redefined.py, test_channel_pause.py): a runner
that reads no source, and the one channel they define."""

from __future__ import annotations

import threading

from node.pipeline import PipelineContext

SHOP = """\
  - name: shop
    pipelines:
      - name: forward
        source: s
        target: t
        pairs:
          - {source: shop.orders, target: shop.orders}
"""


def definitions(channels: str = SHOP, source_host: str = "h1", more_sources: str = "") -> str:
    """Definitions text: source ``s`` on ``source_host``, target ``t`` on h2, the source
    lines ``more_sources``, and the channel lines ``channels`` (channel ``shop``)."""
    return (f"sources:\n  - {{name: s, host: {source_host}}}\n  - {{name: t, host: h2}}\n"
            f"{more_sources}channels:\n{channels}")


class Runner:
    """Stands in for a pipeline runner (no source to read): it keeps the definition it was
    given and runs until it is asked to stop, or fails."""

    def __init__(self, context: PipelineContext) -> None:
        self.ctx, self.pipeline_id, self.state = context, context.pipeline_id, "running"
        self.ended = threading.Event()

    def start(self) -> None:
        pass

    def request_stop(self) -> None:
        self.state = "stopped"
        self.ended.set()

    def join(self, wait_s: float) -> bool:
        return self.ended.wait(wait_s)

    @property
    def alive(self) -> bool:
        return not self.ended.is_set()

    def publish(self) -> None:
        pass

    def fail_for_good(self) -> None:
        self.state = "failed"
        self.ended.set()
