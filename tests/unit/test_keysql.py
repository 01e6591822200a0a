"""Keys in a query's condition (:mod:`shared.keysql`)."""

from __future__ import annotations

import pytest

from shared.keysql import keys_in
from shared.textcodecs import Encoded


def test_a_composite_keys_text_goes_converted_in_its_columns_collation() -> None:
    """CONVERT gives the charset's default collation, as implicit as the column's: a
    utf8mb4_unicode_ci column met it with "Illegal mix of collations". The column's
    collation goes explicitly, after the value converted (text kept as its bytes too)."""
    sjis = Encoded("日本".encode("sjis"), "sjis")
    assert keys_in(("a", "b"), [("x", 1), (sjis, 2)], ["utf8mb4", None],
                   ["utf8mb4_unicode_ci", None]) == (
        "(`a`, `b`) IN ((CONVERT(%s USING utf8mb4) COLLATE utf8mb4_unicode_ci, %s), "
        "(CONVERT(_sjis X'93fa967b' USING utf8mb4) COLLATE utf8mb4_unicode_ci, %s))",
        ["x", 1, 2])
    # no collation known: converted only; one column: the server converts it itself
    assert keys_in(("a", "b"), [("x", 1)], ["latin1", None]) == (
        "(`a`, `b`) IN ((CONVERT(%s USING latin1), %s))", ["x", 1])
    assert keys_in(("a",), [("x",)], ["latin1"], ["latin1_general_cs"]) == (
        "`a` IN (%s)", ["x"])


@pytest.mark.parametrize(("charsets", "collations"), [
    (["utf8mb4) OR 1=1 -- ", None], None), (["latin1", None], ["latin1_general_cs, 1", None]),
    (["Latin1", None], None)])
def test_charset_and_collation_names_are_checked(charsets, collations) -> None:
    with pytest.raises(ValueError, match="not a charset or collation name"):
        keys_in(("a", "b"), [("x", 1)], charsets, collations)
