"""A run's figures against the last run of the same benchmark in ``bench/results/``, each
scenario against the newest report that ran it: any of setl's figures more than 20% worse
is flagged (printed as ``WORSE``, and kept in the report's ``against_last``), so a change
that slows a scenario is seen in the run that shows it.

Scenarios are matched by their text without the row counts a run happens to reach ("(1,155,388
rows)"): a scenario run with other options (another rate, other seconds) has another text and
is not compared. Only setl's figures are: the peers' (``native_*``, ``anchor_*``, the
``write_deltalake`` limit, the target's wall) say how the machine was, not how setl is. A
figure is better higher (rates, shares of a limit, an anchor or the wall) or lower (times,
delays, CPU), by the end of its name; a figure named otherwise (counts, ratios) is not
compared. Delays under 5 ms and drains under half a second are below what a run can tell
apart and are not flagged. Each flag says how the peers' figures of the same scenario moved
between the two runs: a machine that was slower that time moves them too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

THRESHOLD = 0.20
HIGHER = ("rows_per_s", "changes_per_s", "_of_limit", "_of_anchor", "_of_target_wall")
LOWER = ("_ms", "_seconds", "total_s", "drain_s", "cpu_s_per_100k_rows", "cpu_s_per_100k",
         "cpu_cores", "cpu_us_per_row", "cpu_us_per_event", "files_per_table")
PEERS = ("native", "anchor", "write_deltalake", "source_", "mydumper", "pt_table",
         "target_wall")
FLOORS = {"_ms": 5.0, "drain_s": 0.5}  # both runs below: noise, not a regression


def scenario_key(scenario: str) -> str:
    return re.sub(r"\s*\([\d,]+ (row changes|rows|row events|rows events)\)", "",
                  scenario).strip()


def direction(name: str) -> int:
    """+1: higher is better, -1: lower is better, 0: not compared."""
    if name.startswith(PEERS):
        return 0
    if name.endswith(HIGHER):
        return 1
    if name.endswith(LOWER):
        return -1
    return 0


def last_run(directory: Path, name: str) -> Path | None:
    """The newest report of benchmark ``name`` (smoke runs are not reports)."""
    found = runs(directory, name)
    return found[-1] if found else None


def runs(directory: Path, name: str) -> list[Path]:
    """The reports of benchmark ``name``, oldest first (their names carry the time)."""
    return sorted(directory.glob(f"{name}-[0-9]*-[0-9]*.json"))


def last_of_each(directory: Path, name: str, scenarios: set[str]
                 ) -> dict[str, tuple[str, dict[str, Any]]]:
    """For each scenario key, the newest report that ran it: its file name and the result
    (a run of some scenarios only is no report of the others)."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for path in reversed(runs(directory, name)):
        if len(found) == len(scenarios):
            break
        try:
            results = json.loads(path.read_text()).get("results", [])
        except (OSError, ValueError):
            continue
        for result in results:
            key = scenario_key(str(result.get("scenario", "")))
            if key in scenarios and key not in found:
                found[key] = (path.name, result)
    return found


def worse(last: list[dict[str, Any]], now: list[dict[str, Any]],
          threshold: float = THRESHOLD) -> list[str]:
    """Each of setl's figures in ``now`` more than ``threshold`` worse than in ``last``."""
    before = {scenario_key(str(result.get("scenario", ""))): result for result in last}
    found = []
    for result in now:
        scenario = scenario_key(str(result.get("scenario", "")))
        old = before.get(scenario)
        if old is None:
            continue
        for name, value in result.items():
            sign, was = direction(name), old.get(name)
            if not sign or not _number(value) or not _number(was) or was == 0:
                continue
            floor = next((v for suffix, v in FLOORS.items() if name.endswith(suffix)), None)
            if floor is not None and max(value, was) < floor:
                continue
            change = (value - was) / abs(was)
            if sign * change < -threshold:
                found.append(f"{scenario}: {name} {was} → {value} ({change:+.0%})"
                             + _peers(old, result))
    return found


def _peers(old: dict[str, Any], new: dict[str, Any]) -> str:
    """How the peers' figures of a scenario moved (those that are better higher or lower)."""
    moved = [f"{name} {(new[name] - was) / abs(was):+.0%}" for name, was in old.items()
             if name.startswith(PEERS) and direction(name[name.index("_") + 1:]) and
             _number(was) and was and _number(new.get(name))]
    return f"; the peers in the same runs: {', '.join(moved)}" if moved else ""


def against_last(directory: Path, name: str, results: list[dict[str, Any]]
                 ) -> dict[str, Any]:
    """What the report keeps: the runs it was compared with (each scenario with the newest
    report that ran it), and what got worse, each line naming the run it is worse than."""
    keys = [scenario_key(str(result.get("scenario", ""))) for result in results]
    last = last_of_each(directory, name, set(keys))
    newest = last_run(directory, name)
    lines = []
    for key, result in zip(keys, results, strict=True):
        if key in last:
            run, old = last[key]
            lines += [f"{line} (than {run})" for line in worse([old], [result])]
    return {"last_run": newest.name if newest else None,
            "compared_with": {key: run for key, (run, _) in last.items()}, "worse": lines}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
