"""bronze.exact_json: integers beyond what orjson reads exactly come back as ints."""

from __future__ import annotations

from decimal import Decimal

import orjson
import pytest

from bronze.exact_json import dumps, exact, loads, stdlib_loads

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "number", [10**40, 2**64, -(2**63) - 1, -(10**30), 2**64 - 1, 2**63, -(2**63)]
)
def test_integer_literals_stay_integers(number: int) -> None:
    for text in (f'{{"id": {number}}}', f'{{"id": {number}}}'.encode()):
        assert loads(text) == {"id": number}
        assert type(loads(text)["id"]) is int


def test_orjson_reads_them_as_floats_which_is_why_this_exists() -> None:
    assert type(orjson.loads(str(10**40))) is float
    assert type(orjson.loads(str(-(2**63) - 1))) is float


def test_a_text_without_such_a_digit_run_is_orjsons_own_result() -> None:
    text = b'{"ts_ns": 1700000000000000000, "lsn": 24023928, "x": 1.5e300, "big": -1e30}'
    doc = orjson.loads(text)
    assert exact(doc, text) is doc  # 19 digits, not starting with 9 after a minus: exact
    assert loads(text) == doc


def test_a_digit_run_in_a_string_costs_a_second_parse_and_changes_nothing() -> None:
    text = b'{"sequence": "[\\"123456789012345678901\\"]", "f": 0.5, "t": "12345678.5"}'
    assert loads(text) == orjson.loads(text)


def test_a_long_fraction_is_read_again_exactly() -> None:
    text = b'{"f": 0.12345678901234567890123, "g": 0.30000000000000004}'
    assert loads(text) == {"f": Decimal("0.12345678901234567890123"), "g": 0.30000000000000004}


@pytest.mark.parametrize(
    "literal",
    [
        "12345678901234567890.123456789",
        "1.234567890123456789012345678901234567890E-30",
        "-0.12345678901234567",
        "1E+400",
        "1.2345678901234567e-320",
        "9007199254740993e0",  # no point: the digit run sits before the exponent
        "-1234567890123456789E3",
    ],
)
def test_decimals_no_double_holds_stay_their_literal(literal: str) -> None:
    text = f'{{"n": {literal}, "x": 1.5}}'
    doc = loads(text) if literal != "1E+400" else stdlib_loads(text)
    assert doc["n"] == Decimal(literal) and type(doc["n"]) is Decimal
    assert type(doc["x"]) is float  # what a double holds stays a float
    assert Decimal(dumps(doc).split(":")[1].split(",")[0]) == Decimal(literal)


def test_orjson_rounds_them_which_is_why_this_exists() -> None:
    assert orjson.loads("12345678901234567890.123456789") == 1.2345678901234567e19


def test_fifteen_digits_before_an_exponent_stay_orjsons_double() -> None:
    text = '{"n": 123456789012345e5}'  # every 15-digit mantissa reads back as itself
    assert loads(text) == {"n": 1.23456789012345e19} and type(loads(text)["n"]) is float


def test_dumps_writes_big_integers_and_decimals_as_literals() -> None:
    doc = {"id": 10**40, "n": [Decimal("1.50"), -(2**70)], "ok": 1}
    assert dumps(doc) == f'{{"id":{10**40},"n":[1.50,{-(2**70)}],"ok":1}}'
