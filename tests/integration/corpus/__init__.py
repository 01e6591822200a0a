"""The schemas corpus (issue 17): tables as they are in the wild, each with the statements a
real workload runs on them. ``test_schemas.py`` replicates every case through a real channel
and compares source and target byte by byte.

A case's statements are templates: ``{s}`` stands for its schema, quoted; ``{o}`` for a second
schema of the run that no channel copies. ``setup`` runs on the source and (unless the group
syncs DDL) on the target before the channel starts; ``work`` runs on the source, in one
session of its own, once every channel runs. Cases of one group share a channel: a case that
stops its pipeline today has a group of its own, so it cannot hide the others' results.

``xfail`` says what diverges today; the test is a strict xfail, so it fails loudly once fixed.
"""

from __future__ import annotations

from tests.integration.corpus.ddl import DDL
from tests.integration.corpus.model import Case, Group, crud
from tests.integration.corpus.shapes import FOREIGN_KEYS, GENERATED, KEYLESS, NAMES
from tests.integration.corpus.values import DECODING, VALUES

__all__ = ["CASES", "GROUPS", "OTHER_SETUP", "Case", "Group", "crud"]

GROUPS = [
    Group("values"), Group("enum-invalid"), Group("big-blob"),
    Group("ddl", {"ddl_sync": True}, templates=True),
    Group("ddl-like", {"ddl_sync": True}, templates=True),
    Group("ddl-ansi", {"ddl_sync": True}, templates=True),
]

CASES = [*VALUES, *NAMES, *KEYLESS, *GENERATED, *FOREIGN_KEYS, *DECODING, *DDL]
OTHER_SETUP = ("CREATE TABLE {o}.customers (id INT PRIMARY KEY, name VARCHAR(20)) "
               "DEFAULT CHARSET=latin1",)
