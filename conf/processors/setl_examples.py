"""Two example processors for setl pairs (``processor: setl_examples:mask_email``).

A processor gets one row change as a dict — ``{"schema", "table", "type": "I"|"U"|"D",
"keys", "before", "after"}`` — and returns it (changed or not), a list of changes, or None
to drop it. Copy this file next to your own processors in ``conf/processors/``.
"""

from __future__ import annotations

import hashlib
from typing import Any


def mask_email(change: dict[str, Any]) -> dict[str, Any]:
    """Replace the local part of ``email`` by a stable hash: joins still work, people
    cannot be read off the copy."""
    for image in (change["before"], change["after"]):
        email = image.get("email") if image else None
        if email and "@" in email:
            local, domain = email.split("@", 1)
            image["email"] = hashlib.sha256(local.encode()).hexdigest()[:12] + "@" + domain
    return change


def skip_test_rows(change: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]] | None:
    """Leave out rows whose ``name`` starts with ``test_``. An update that renames a row
    into that set deletes it from the target (the target has the row as it was), and one
    that renames it out of the set inserts it (the target never had it): dropping those
    updates would leave the target's row behind, or never write it."""
    was, now = _test_row(change["before"]), _test_row(change["after"])
    if change["type"] != "U" or was == now:
        return None if (was if change["type"] == "D" else now) else change
    if now:  # leaves the replicated rows
        return {**change, "type": "D", "after": None}
    return {**change, "type": "I", "before": None}  # joins them


def _test_row(image: dict[str, Any] | None) -> bool:
    name = (image or {}).get("name")
    return isinstance(name, str) and name.startswith("test_")


def without_photo(change: dict[str, Any]) -> dict[str, Any]:
    """Leave the (large) ``photo`` column out of the change; a column group
    ``[photo, photo_type]`` on the pair then looks it up from the source when needed."""
    for image in (change["before"], change["after"]):
        if image:
            image.pop("photo", None)
    return change


def price_with_tax(row: dict[str, Any]) -> Any:
    """A virtual-column processor: ``price`` plus 20 % tax, or None."""
    price = row.get("price")
    return None if price is None else round(price * 12 / 10, 2)
