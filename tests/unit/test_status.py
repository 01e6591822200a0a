"""node/status.py ``delay_ms``: how far behind the source status says a pipeline is."""

from __future__ import annotations

from node.status import delay_ms

NOW = 1_700_000_600_000  # ten minutes after the commits below


def test_a_new_runner_with_a_backlog_reads_its_delay_before_its_first_load() -> None:
    """After a failover the new runner has loaded nothing: its delay read 0 however deep
    the backlog (its DELAY alarm never fired). It reads from the first batch selected."""
    assert delay_ms(NOW, True, 0, 1_700_000_000_000) == 599_500
    assert delay_ms(NOW, True, 1_700_000_300_000, 1_700_000_000_000) == 299_500  # loaded
    assert delay_ms(NOW, False, 0, 1_700_000_000_000) == 0  # caught up: nothing to do
    assert delay_ms(NOW, True, 0, 0) == 0  # nothing read yet: not known
