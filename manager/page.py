"""The status page, rendered on the server from what the manager last read: alarms,
pipelines (state, owner, position, delay with its recent history as an SVG chart, rows/s,
window, last error), channels and nodes. A little script fetches ``/fragment`` (the same
content) every poll and swaps it in; without scripts the page still shows, and a reload
refreshes it. No build step, nothing from elsewhere (the page works offline)."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

from manager.monitor import Observation, Sample
from shared.rpc import manager_pb2, model_pb2

CHART_W, CHART_H = 180, 36


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _status(value: int) -> str:
    return model_pb2.ChannelStatus.Name(value).removeprefix("CHANNEL_STATUS_")


def _position(position: model_pb2.BinlogPosition) -> str:
    if not position.file and not position.gtid:
        return "-"
    text = f"{position.file}:{position.pos}" if position.file else ""
    return f"{text} {position.gtid}".strip()


def delay_text(delay_ms: int) -> str:
    return f"{delay_ms} ms" if delay_ms < 10_000 else f"{delay_ms / 1000:.1f} s"


def _clock(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else "-"


def _span(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def chart(samples: Sequence[Sample], span_s: float, now: float) -> str:
    """The delay over the history kept (at most ``span_s`` seconds, from the first sample:
    a young pipeline's chart fills the width too) as an inline SVG line, scaled to its
    highest point (given in the title)."""
    if not samples:
        return '<svg class="chart" role="img" aria-label="no history yet"></svg>'
    start = max(samples[0].at, now - span_s)
    covered = max(now - start, 1e-6)
    top = max(max(sample.delay_ms for sample in samples), 1)
    points = [(CHART_W * (s.at - start) / covered,
               CHART_H - 2 - (CHART_H - 4) * s.delay_ms / top) for s in samples]
    if len(points) == 1:
        points = [(0.0, points[0][1]), (float(CHART_W), points[0][1])]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    label = (f"delay over the last {_span(covered)}: highest {delay_text(top)}, "
             f"now {delay_text(samples[-1].delay_ms)}")
    return (f'<svg class="chart" viewBox="0 0 {CHART_W} {CHART_H}" width="{CHART_W}" '
            f'height="{CHART_H}" role="img" aria-label="{_e(label)}"><title>{_e(label)}'
            f'</title><rect width="{CHART_W}" height="{CHART_H}" class="frame"/>'
            f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" '
            f'points="{line}"/></svg>')


def _alarms(alarms: Sequence[manager_pb2.Alarm]) -> str:
    if not alarms:
        return '<p class="ok">No alarms.</p>'
    rows = "".join(
        f'<tr class="{_e(a.state)}" data-alarm="{_e(a.rule)}/{_e(a.subject)}">'
        f"<td>{_e(a.state)}</td><td>{_e(a.rule)}</td><td>{_e(a.subject)}</td>"
        f"<td>{_clock(a.since_ms)}</td><td>{_clock(a.resolved_ms)}</td>"
        f"<td>{_e(a.message)}</td></tr>" for a in alarms)
    return ("<table><thead><tr><th>state</th><th>rule</th><th>subject</th><th>since</th>"
            f"<th>resolved</th><th>message</th></tr></thead><tbody>{rows}</tbody></table>")


def _pipelines(seen: Observation, history: dict[str, list[Sample]], span_s: float) -> str:
    rows = []
    for info in seen.channels:
        for state in info.pipelines:
            running = bool(state.owner_node)
            window = f"{state.window_used}/{state.window_size}" if state.window_size else "-"
            error = state.last_error.splitlines()[0] if state.last_error else ""
            rows.append(
                f'<tr data-pipeline="{_e(state.pipeline_id)}" data-state="{_e(state.state)}">'
                f"<td>{_e(state.pipeline_id)}</td><td>{_status(info.status)}</td>"
                f"<td>{_e(state.state or '-')}{_skipped(state)}</td>"
                f"<td>{state.owner_node or '-'}</td>"
                f"<td>{_e(_position(state.position))}</td>"
                f'<td class="delay" data-ms="{state.delay_ms if running else ""}">'
                f"{delay_text(state.delay_ms) if running else '-'}</td>"
                f"<td>{chart(history.get(state.pipeline_id, []), span_s, seen.at)}</td>"
                f"<td>{f'{state.rows_per_second:.0f}' if running else '-'}</td>"
                f"<td>{window}</td><td class=\"error\" title=\"{_e(state.last_error)}\">"
                f"{_e(error)}</td></tr>")
    if not rows:
        return "<p>No pipelines: define a channel in YAML and run <code>setl apply -f " \
               "FILE</code>.</p>"
    return ("<table><thead><tr><th>pipeline</th><th>channel</th><th>state</th><th>owner</th>"
            "<th>position</th><th>delay</th><th>delay, last "
            f"{_span(span_s)} at most</th><th>rows/s</th><th>window</th><th>last error</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _skipped(state: manager_pb2.PipelineState) -> str:
    """Rows the target refused and skip_load_exception skipped, when there are any."""
    if not state.rows_skipped:
        return ""
    return (f'<br><span class="error" data-skipped="{state.rows_skipped}" title="see '
            f'event=row_skipped in its node\'s log">{state.rows_skipped:,} rows skipped'
            "</span>")


def _channels(seen: Observation) -> str:
    def ends(info: manager_pb2.ChannelInfo) -> str:
        return ", ".join(f"{p.name} ({p.source} → {p.target})" for p in info.channel.pipelines)
    rows = "".join(
        f'<tr data-channel="{_e(info.channel.name)}"><td>{_e(info.channel.name)}</td>'
        f"<td>{_status(info.status)}</td><td>{info.version}</td>"
        f"<td>{_e(ends(info))}</td></tr>" for info in seen.channels)
    return ("<table><thead><tr><th>channel</th><th>status</th><th>version</th>"
            f"<th>pipelines</th></tr></thead><tbody>{rows}</tbody></table>") if rows else \
        "<p>No channels.</p>"


def _nodes(seen: Observation) -> str:
    rows = "".join(
        f'<tr data-node="{node.id}"><td>{node.id}</td><td>{_e(node.address)}</td>'
        f"<td>{_e(node.host)}</td><td>{node.pid}</td>"
        f"<td>{_e(node.metrics_address or '-')}</td>"
        f"<td>{_e(', '.join(node.running_pipelines) or '-')}</td></tr>" for node in seen.nodes)
    return ("<table><thead><tr><th>node</th><th>address</th><th>host</th><th>pid</th>"
            f"<th>metrics</th><th>running</th></tr></thead><tbody>{rows}</tbody></table>") \
        if rows else "<p>No nodes registered: start one with <code>setl-node --id 1</code>.</p>"


def fragment(seen: Observation, history: dict[str, list[Sample]], span_s: float,
             alarms: Sequence[manager_pb2.Alarm], role: str) -> str:
    """Everything the page shows that changes (what the script fetches)."""
    read = time.strftime("%H:%M:%S", time.localtime(seen.at)) if seen.at else "not yet"
    problem = (f'<p class="problem">ZooKeeper could not be read: {_e(seen.error)} '
               "(showing the last state read)</p>") if seen.error else ""
    firing = sum(1 for alarm in alarms if alarm.state == "firing")
    return (f'<p class="meta">{_e(role)} · state read at <time>{read}</time> · '
            f'{len(seen.nodes)} node(s) · <span class="{"bad" if firing else "ok"}">'
            f"{firing} alarm(s) firing</span></p>{problem}"
            f"<h2>Alarms</h2>{_alarms(alarms)}"
            f"<h2>Pipelines</h2>{_pipelines(seen, history, span_s)}"
            f"<h2>Channels</h2>{_channels(seen)}"
            f"<h2>Nodes</h2>{_nodes(seen)}")


def page(body: str, refresh_s: float, title: str = "setl status") -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title>"
            f'<link rel="stylesheet" href="/page.css"></head>'
            f'<body data-refresh-s="{refresh_s:g}"><header><h1>setl</h1>'
            f'<a href="/metrics">metrics</a></header><main id="content">{body}</main>'
            f'<script src="/page.js"></script></body></html>')


def login(problem: str = "") -> str:
    shown = f'<p class="problem">{_e(problem)}</p>' if problem else ""
    return page(f'<h2>Token</h2><p>This manager requires its API token (api.token).</p>'
                f'{shown}<form method="post" action="/login"><input type="password" '
                f'name="token" autocomplete="current-password" aria-label="token" autofocus> '
                f'<button type="submit">Show the status</button></form>', 0, "setl: token")


SCRIPT = """\
"use strict";
(function () {
  const seconds = parseFloat(document.body.dataset.refreshS || "0");
  if (!seconds) return;
  let refreshed = 0;
  async function refresh() {
    try {
      const answer = await fetch("/fragment", {credentials: "same-origin", cache: "no-store"});
      if (answer.ok) {
        document.getElementById("content").innerHTML = await answer.text();
        document.body.dataset.refreshed = String(++refreshed);
      } else if (answer.status === 401) {
        window.location.reload();
      }
    } catch (error) {
      document.body.dataset.refreshError = String(error);
    }
    window.setTimeout(refresh, seconds * 1000);
  }
  window.setTimeout(refresh, seconds * 1000);
})();
"""

STYLE = """\
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 1.5em 2em; color: #1d232a; }
header { display: flex; align-items: baseline; gap: 1.5em; }
h1 { font-size: 1.4em; margin: .6em 0 0; } h2 { font-size: 1.1em; margin: 1.4em 0 .4em; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .25em .6em; border-bottom: 1px solid #dde1e6;
         vertical-align: middle; }
th { font-weight: 600; background: #f3f5f7; }
td.delay { font-variant-numeric: tabular-nums; white-space: nowrap; }
td.error { color: #a4161a; max-width: 32em; overflow: hidden; text-overflow: ellipsis;
           white-space: nowrap; }
.chart { color: #1f6feb; display: block; } .chart .frame { fill: #f3f5f7; }
tr.firing td { background: #fde2e1; } tr.resolved td { color: #57606a; }
.meta { color: #57606a; } .ok { color: #1a7f37; } .bad { color: #a4161a; font-weight: 600; }
.problem { background: #fff4ce; padding: .4em .6em; }
code { background: #f3f5f7; padding: 0 .2em; }
"""
