"""The binlog value readers that replace the library's: TIME2, dates with zero parts, charsets.
Bytes are made as the server writes them (MariaDB's compat56.cc), so no server is needed; the
schemas corpus checks the same against a real one."""

from __future__ import annotations

import datetime
import io
from types import SimpleNamespace

import pytest

from node.charsets import charset_to_encoding
from tests import librows


def event(data: bytes) -> SimpleNamespace:
    return SimpleNamespace(packet=io.BytesIO(data))


def time2_bytes(text: str, fsp: int) -> bytes:
    """TIME_to_longlong_time_packed + my_time_packed_to_binary."""
    negative = text.startswith("-")
    hms_text, _, frac_text = text.lstrip("-").partition(".")
    hour, minute, second = (int(part) for part in hms_text.split(":"))
    micro = int((frac_text + "000000")[:6])
    packed = ((((hour << 12) | (minute << 6) | second) << 24) + micro) * (-1 if negative else 1)
    if fsp >= 5:
        return (packed + 0x800000000000).to_bytes(6, "big")
    intpart = (0x800000 + (packed >> 24)).to_bytes(3, "big")
    frac = abs(packed) % (1 << 24) * (-1 if packed < 0 else 1)  # C's %: sign of the dividend
    if fsp == 0:
        return intpart
    if fsp <= 2:
        return intpart + (int(frac / 10000) % 256).to_bytes(1, "big")
    return intpart + (int(frac / 100) % 65536).to_bytes(2, "big")


@pytest.mark.parametrize(("text", "fsp"), [
    ("-23:45:56.7", 1), ("-733:00:00.001", 3), ("-838:59:58.999999", 6), ("-00:00:00.5", 1),
    ("-00:00:00.000001", 6), ("-12:00:00.99", 2), ("-1:02:03.4567", 4), ("-0:00:01.50000", 5),
    ("838:59:59.999999", 6), ("-838:59:59", 0), ("12:34:56.7", 1), ("00:00:00", 0),
    ("-00:00:01", 0), ("-00:00:01.000", 3)])
def test_time2_reads_every_sign_and_fraction_as_the_server_wrote_it(text: str, fsp: int) -> None:
    negative = text.startswith("-")
    hms, _, frac = text.lstrip("-").partition(".")
    hour, minute, second = (int(part) for part in hms.split(":"))
    want = datetime.timedelta(hours=hour, minutes=minute, seconds=second,
                              microseconds=int((frac + "000000")[:6]))
    got = librows.read_time2(event(time2_bytes(text, fsp)), SimpleNamespace(fsp=fsp))
    assert got == (-want if negative else want)


def date_bytes(year: int, month: int, day: int) -> bytes:
    return (year << 9 | month << 5 | day).to_bytes(3, "little")


def datetime2_bytes(year: int, month: int, day: int, hour: int, minute: int, second: int,
                    micro: int, fsp: int) -> bytes:
    ymd = ((year * 13 + month) << 5) | day
    packed = (ymd << 17) | (hour << 12) | (minute << 6) | second
    data = (packed + 0x8000000000).to_bytes(5, "big")
    size = (fsp + 1) // 2
    return data + (micro // 100 ** (3 - size)).to_bytes(size, "big") if fsp else data


@pytest.mark.parametrize(("parts", "want"), [
    ((2024, 2, 29), datetime.date(2024, 2, 29)), ((0, 0, 0), "0000-00-00"),
    ((1, 0, 0), "0001-00-00"), ((2020, 5, 0), "2020-05-00"), ((2021, 2, 31), "2021-02-31")])
def test_a_date_python_cannot_hold_comes_as_the_text_the_server_prints(
        parts: tuple[int, int, int], want: object) -> None:
    assert librows.read_date(event(date_bytes(*parts))) == want


@pytest.mark.parametrize(("parts", "fsp", "want"), [
    ((2020, 1, 2, 3, 4, 5, 600000), 1, datetime.datetime(2020, 1, 2, 3, 4, 5, 600000)),
    ((0, 0, 0, 14, 2, 10, 0), 0, "0000-00-00 14:02:10"),
    ((0, 0, 0, 14, 2, 10, 500000), 2, "0000-00-00 14:02:10.50"),
    ((2020, 0, 15, 1, 2, 3, 456000), 3, "2020-00-15 01:02:03.456"),
    ((2021, 4, 31, 10, 0, 0, 123456), 6, "2021-04-31 10:00:00.123456")])
def test_a_datetime_keeps_its_time_of_day_and_fraction_whatever_its_date(
        parts: tuple[int, ...], fsp: int, want: object) -> None:
    data = datetime2_bytes(*parts, fsp=fsp)
    assert librows.read_datetime2(event(data), SimpleNamespace(fsp=fsp)) == want


def test_the_old_datetime_format_keeps_zero_parts() -> None:
    assert librows.read_datetime(event((20200015010203).to_bytes(8, "little"))) == \
        "2020-00-15 01:02:03"
    assert librows.read_datetime(event((20200102030405).to_bytes(8, "little"))) == \
        datetime.datetime(2020, 1, 2, 3, 4, 5)


def test_mariadb_latin1_round_trips_every_byte() -> None:
    librows.install()
    every = bytes(range(256))
    codec = charset_to_encoding("cp1252")  # what the library calls latin1
    text = every.decode(codec)
    assert text[0x80] == "€" and text[0x81] == "\x81" and text[0xE9] == "é"
    assert text.encode(codec) == every


@pytest.mark.parametrize(("charset", "data"), [
    ("utf16", "é中😀".encode("utf-16-be")), ("utf16le", "é中😀".encode("utf-16-le")),
    ("utf32", "é中😀".encode("utf-32-be")), ("ucs2", "é中".encode("utf-16-be")),
    ("utf8", "é中".encode()), ("gbk", "中文".encode("gbk"))])
def test_wide_charsets_are_big_endian_as_the_server_stores_them(charset: str,
                                                                data: bytes) -> None:
    librows.install()
    assert data.decode(charset_to_encoding(charset)) in ("é中😀", "é中", "中文")
