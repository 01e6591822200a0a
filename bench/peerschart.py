"""The chart of a ``bench.peers`` report: bulk rows/s, delays, the copy and the catch-up,
setl beside each native peer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.peers import COLORS, COPIES, LABELS


def _short(scenario: str) -> str:
    """A delay scenario's name under its bars: noisy, full, or its rate (1k, 50)."""
    if scenario.startswith("noisy"):
        return "noisy"
    if not (rate := re.search(r"at (\d+) tx/s", scenario)):
        return "full"
    return f"{int(rate.group(1)) / 1000:g}k" if int(rate.group(1)) >= 1000 else rate.group(1)


def chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = {r["scenario"]: r for r in report["results"]}
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.5))
    streams = tuple(COPIES)  # one bar each, side by side
    step = len(streams) + 1  # a gap between groups of bars
    bulk = next((r for r in results.values() if "native_rows_per_s" in r), None)
    if bulk:
        axes[0].bar([LABELS[name].replace(" (", "\n(") for name in streams],
                    [bulk.get(f"{name}_rows_per_s") or 0 for name in streams],
                    color=[COLORS[name] for name in streams])
        axes[0].tick_params(axis="x", labelsize=8)
        axes[0].set_title("bulk insert, rows/s")
    delays = [r for r in results.values() if "setl_delay_p99_ms" in r]
    for offset, name in enumerate(streams):
        values = [r.get(f"{name}_delay_p{p}_ms") or 0 for r in delays for p in (50, 95, 99)]
        axes[1].bar([i * step + offset for i in range(len(values))], values,
                    color=COLORS[name], label=LABELS[name])
    axes[1].set_xticks([i * step + (len(streams) - 1) / 2 for i in range(len(delays) * 3)],
                       [f"{_short(r['scenario'])} p{p}"
                        for r in delays for p in (50, 95, 99)], fontsize=7, rotation=45)
    axes[1].set_yscale("symlog")
    axes[1].set_ylim(0, axes[1].get_ylim()[1] * 10)  # room for the legend above the bars
    axes[1].set_title("delay, ms (log scale)")
    axes[1].legend(fontsize=7)
    copy = next((r for r in results.values() if "mydumper_myloader_s" in r), None)
    if copy:
        axes[2].bar(["setl snapshot", "mydumper|myloader"],
                    [copy.get("setl_rows_per_s") or 0, copy["mydumper_myloader_rows_per_s"] or 0],
                    color=["#3b7dd8", "#999999"])
        axes[2].set_title("full copy, rows/s")
    else:
        axes[2].axis("off")
    catchup = next((r for r in results.values() if "setl_oltp_rows_per_s" in r), None)
    if catchup:
        for offset, name in enumerate(streams):
            axes[3].bar([offset, step + offset], [catchup.get(f"{name}_bulk_rows_per_s") or 0,
                                                  catchup.get(f"{name}_oltp_rows_per_s") or 0],
                        color=COLORS[name], label=LABELS[name])
        middle = (len(streams) - 1) / 2
        axes[3].set_xticks([middle, step + middle], ["bulk part", "oltp_write_only part"])
        axes[3].set_title("catch-up of a backlog, rows/s")
        axes[3].legend(fontsize=7)
    else:
        axes[3].axis("off")
    fig.suptitle(f"setl vs native MariaDB replication — {report['when']}, "
                 f"{report['machine']['cpus']} cores")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
