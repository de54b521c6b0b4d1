"""bronze.exact_json: integers beyond what orjson reads exactly come back as ints."""

from __future__ import annotations

import orjson
import pytest

from bronze.exact_json import exact, loads

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
    text = b'{"sequence": "[\\"123456789012345678901\\"]", "f": 0.12345678901234567890123}'
    assert loads(text) == orjson.loads(text)
