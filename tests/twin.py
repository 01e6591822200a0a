"""setl's stream path over a stretch of a source's binlog, each stage's output written down:
run once with the compiled modules and once with their pure-Python twins
(``SETL_PURE_PYTHON``), the two outputs must be byte-equal (tests/integration/test_compiled.py).

    python -m tests.twin REQUEST.json OUT.txt

The request names the source (host, port, user, secret file), the stretch (start, end), and
the tables (schema, table, pair options). Stages written: Select's framing (each
transaction's position, GTID and rows events as bytes), then per batch of transactions what
a Spark worker makes of each part — decoded row changes, Extract/Transform, the merge, and
the target's statements (INSERTs, DELETEs, LOAD DATA lines) — with the facts of the tables
read from the source itself (they have the same definitions).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import yaml


def canonical(value: Any) -> Any:
    """``value`` as plain lists and reprs: equal values, equal text, whoever made them (no
    pickle memo of shared objects, no identity)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, *(canonical(getattr(value, f.name))
                                        for f in dataclasses.fields(value))]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return [type(value).__name__, *(canonical(item) for item in value)]
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    if isinstance(value, dict):
        return [[canonical(k), canonical(v)] for k, v in value.items()]
    if isinstance(value, set | frozenset):
        return sorted(repr(item) for item in value)
    return f"{type(value).__name__}:{value!r}"


def run(request: dict[str, Any], out: Any) -> int:
    """Writes each stage's output; returns the rows events whose insert lines were read
    straight from their bytes (node.extract.insertlines: the compiled build only)."""
    from node import compiled
    from node.changes import Batch
    from node.extract import insertlines
    from node.extract.etl import CompiledPipeline
    from node.extract.job import Planner, run_part
    from node.select.binlog import BinlogReader
    from node.target.mysql.facts import TargetFacts
    from shared import confinement
    from shared.definitions import load_text
    from shared.errors import SourceError
    from shared.identifiers import short_form
    from shared.model import BinlogPosition, DataSource, PipelineParams
    from shared.secrets import SecretRef

    out.write(json.dumps(compiled.status()) + "\n")
    lined, straight = [0], insertlines.lines

    def counting(*args: Any) -> tuple[int, int]:
        found: tuple[int, int] = straight(*args)
        lined[0] += found[0] >= 0
        return found

    insertlines.lines = counting  # as inserts calls it
    secret = Path(request["secret_file"])  # the sandbox's, which this process may read
    confinement.confine(dataclasses.replace(confinement.current(), secret_dirs=(secret.parent,)))
    source = DataSource("source", "127.0.0.1", request["port"], "setl",
                        SecretRef(f"file:{request['secret_file']}"))
    pairs = [{"source": short_form(schema, table), "target": short_form(schema, table),
              **options} for schema, table, options in request["tables"]]
    definitions = load_text(yaml.safe_dump({
        "sources": [{"name": name, "host": "127.0.0.1", "port": request["port"]}
                    for name in ("src", "dst")],
        "channels": [{"name": "twin", "pipelines": [{
            "name": "p", "source": "src", "target": "dst", "pairs": pairs}]}]}), "twin.yaml")
    pipeline = definitions.channels[0].pipelines[0]
    program = CompiledPipeline.compile("twin.p", 1, pipeline)
    schemas = {schema for schema, _, _ in request["tables"]}
    start, end = (BinlogPosition(*request[name]) for name in ("start", "end"))
    reader = BinlogReader(source, 7301, start, lambda schema, table: schema in schemas,
                          schemas.__contains__, ddl=False)
    facts = TargetFacts({"dst": dataclasses.replace(source, name="dst")})
    planner = Planner(program, reader.layouts, facts, lambda: reader.checksum,
                      PipelineParams(load_batch_size=7, load_data_min_rows=3), reader.learn)
    reader.begin()
    try:
        process_id, txns = 0, []
        while True:
            txn = reader.take(30.0)
            if txn is None:
                raise RuntimeError(f"the reader stopped before {end}")
            framed = dataclasses.replace(txn, read_at_ms=0)  # when it was read: not the same
            out.write(json.dumps(["select", canonical(framed)]) + "\n")
            txns.append(txn)
            done = (txn.end.file, txn.end.pos) >= (end.file, end.pos)
            if len(txns) == 5 or done:  # batches of a few transactions, as Select cuts them
                process_id += 1
                batch = Batch("twin.p", process_id, txns)
                parts = planner.parts(batch, 2)
                spec = planner.spec(batch, parts)
                for part in parts:
                    try:
                        made = canonical(run_part(program, spec, part))
                    except SourceError as exc:  # a partial row image: refused by both alike
                        made = ["refused", str(exc)]
                    out.write(json.dumps(["part", made]) + "\n")
                txns = []
            if done:
                return lined[0]
    finally:
        reader.stop()
        facts.close()


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    with open(argv[1], "w") as out:
        lined = run(request, out)
        out.write(json.dumps(["lined", lined]) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
