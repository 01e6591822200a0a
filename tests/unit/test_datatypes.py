"""How a column is selected to read it as the binlog gives it (shared.datatypes), the same
for the node's reads and ``setl backfill``'s keys."""

from __future__ import annotations

import subprocess
import sys

from shared.datatypes import read_expression


def test_a_key_is_selected_as_the_node_reads_it() -> None:
    assert read_expression("f", "float", None) == "CAST(`f` AS DOUBLE)"
    assert read_expression("b", "bit", None) == "`b` + 0"
    assert read_expression("s", "varchar", "sjis") == "CAST(`s` AS BINARY)"
    assert read_expression("t", "timestamp", None) == "`t`"
    assert read_expression("d", "double", None) == "`d`"
    assert read_expression("u`x", "varchar", "utf8mb4") == "`u``x`"


def test_latin1_text_is_read_as_text_where_the_node_registered_no_codec() -> None:
    """The manager never imports node.charsets, which registers MariaDB's latin1 codec: its
    keys must still be selected as the node selects them (as text, not bytes)."""
    code = ("import sys; from shared.datatypes import read_expression; "
            "assert 'node.charsets' not in sys.modules; "
            "print(read_expression('c', 'varchar', 'latin1'), "
            "read_expression('c', 'char', 'cp1252'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["`c`", "`c`"]
