"""A DDL pause says how to move past the statement with this pipeline's own commands, in the
order they work (a position is set on a stopped channel only) and with the statement's end
when Select carried it — whether the pause comes from Extract's checks or from the target
DDL it would make (ddl_sync on)."""

from __future__ import annotations

import pytest

from node.changes import ChangeType, RowChange
from node.ddlsession import POSITION
from node.extract.etl import extract_transform
from shared.errors import ConfigError
from tests.unit.etl_helpers import compiled
from tests.unit.test_ddl import PAIRS

ENDS = (POSITION, ("mariadb-bin.000003", 4321, "1@db", "0-1-9"))
KNOWN = ("setl channel stop shop --wait, then setl position set shop/fwd --file "
         "mariadb-bin.000003 --pos 4321, then setl channel start shop")


def paused(statement: str, options: str = "", ends: bool = True) -> str:
    change = RowChange("shop", "", ChangeType.DDL, ddl=statement,
                       session=(ENDS,) if ends else ())
    with pytest.raises(ConfigError) as caught:
        list(extract_transform(compiled(*PAIRS, options=options), [(4, change)]))
    return str(caught.value)


def test_a_truncate_not_replayed_names_the_commands_and_the_position() -> None:
    message = paused("TRUNCATE TABLE orders")
    assert KNOWN in message, message
    assert "and resume" not in message.split("or turn ddl_sync on")[0], message


def test_a_pause_of_the_target_ddl_names_this_pipeline_not_placeholders() -> None:
    message = paused("ALTER TABLE orders ADD COLUMN x INT; DROP TABLE users",
                     options="ddl_sync: true")
    assert "a second statement after a ';'" in message, message
    assert KNOWN in message and "CHANNEL" not in message, message


def test_without_the_statement_s_end_the_position_is_described() -> None:
    message = paused("TRUNCATE TABLE orders", ends=False)
    assert ("setl position set shop/fwd --file … --pos … (the next transaction's position), "
            "then setl channel start shop") in message, message
