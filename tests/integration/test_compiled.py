"""The compiled modules of the stream path (node.compiled) against their pure-Python twins on
the schemas corpus: every type at its edges, odd names, keyless tables, under binlog_row_image
FULL, MINIMAL and NOBLOB. The same stretch of the binlog goes through Select's framing and a
worker's decode, Extract/Transform, merge and rendering once with the compiled modules and
once with the ``.py`` files (``tests/twin.py`` in two processes): the outputs must be
byte-equal (a part with a partial image is refused by both, with the same words), and the
compiled run must really have run compiled (``make setup`` builds it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from shared.identifiers import quote as q
from tests.devcluster import ROOT, Database
from tests.integration.test_decode import EXTRA, ROWS_CASES, master, run_cases, schemas_of

IMAGES = ("FULL", "MINIMAL", "NOBLOB")


def twin(request: Path, out: Path, pure: bool) -> list[str]:
    env = {**os.environ, "SETL_PURE_PYTHON": "1" if pure else "0"}
    done = subprocess.run([sys.executable, "-m", "tests.twin", str(request), str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out.read_text().splitlines()


def test_compiled_modules_make_what_their_pure_twins_make(sandbox, tmp_path) -> None:
    source = Database(sandbox, "source")
    cases = [case for case in [*ROWS_CASES, *EXTRA] if not case.pauses and not case.xfail]
    schemas, other = schemas_of("tw", cases, IMAGES)
    try:
        source.execute(f"CREATE DATABASE {q(other)}")
        start = master(source)
        run_cases(sandbox, source, schemas, cases, other)
        end = master(source)
        request = tmp_path / "request.json"
        request.write_text(json.dumps({
            "port": sandbox.servers()["source"].port, "secret_file": str(sandbox.secret_file),
            "start": [start.file, start.pos], "end": [end.file, end.pos],
            "tables": [(schemas[(case.id, image)], table, case.pair_options)
                       for case in cases for image in IMAGES if (case.id, image) in schemas
                       for table in case.tables]}))
        compiled = twin(request, tmp_path / "compiled.txt", pure=False)
        pure = twin(request, tmp_path / "pure.txt", pure=True)
    finally:
        source.script("SET GLOBAL mysql56_temporal_format = ON")
        for schema in [*schemas.values(), other]:
            source.execute(f"DROP DATABASE IF EXISTS {q(schema)}")
        source.close()
    states = json.loads(compiled[0]), json.loads(pure[0])
    assert set(states[0].values()) == {"compiled"}, states[0]  # make setup compiled them
    assert all(state.startswith("pure") for state in states[1].values()), states[1]
    # the compiled build read insert lines straight from the events where it could (its
    # twin never does: the decoded path is faster than the plain-Python reader)
    (_, lined), (_, not_lined) = json.loads(compiled.pop()), json.loads(pure.pop())
    assert lined > 0 and not_lined == 0
    assert len(compiled) == len(pure)
    for ours, theirs in zip(compiled[1:], pure[1:], strict=True):
        assert ours == theirs
    # the stretch was the corpus: its transactions, and parts that wrote rows both ways
    body = "\n".join(compiled[1:])
    assert sum(line.startswith('["select"') for line in compiled) > 300
    assert body.count('"Sql"') > 300 and "LOAD DATA LOCAL INFILE" in body
    assert "DELETE FROM" in body and "ON DUPLICATE KEY UPDATE" in body
    assert '["part", ["refused", ' in body and "binlog_row_image = FULL" in body
