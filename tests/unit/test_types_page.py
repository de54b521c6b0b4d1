"""Claims of docs/types.md that no other test states: where a value loses digits or its
representation before silver, and which failures skip C1 and quarantine the whole record."""

from __future__ import annotations

import base64
from decimal import Decimal

import pytest

from capture.column_types import Unrepresentable, ValueModes
from capture.db2.types import Db2Column
from capture.db2.types import column_type as db2_column_type
from capture.sqlserver.types import ColumnFacts, SqlServerHandling
from capture.sqlserver.types import column_type as sqlserver_column_type

pytestmark = pytest.mark.unit


def sqlserver(kind: str, text: str) -> object:
    facts = ColumnFacts("c", kind, fraction=7)
    converted = sqlserver_column_type(facts, SqlServerHandling())
    assert converted is not None
    return converted.convert(text)


def test_sqlserver_loses_the_100_ns_digit_before_the_envelope() -> None:
    # The 7th fraction digit (7) is gone: NanoTime and NanoTimestamp values end in 000.
    assert sqlserver("time", "15:13:16.9451047") == 54_796_945_104_000
    assert sqlserver("datetime2", "2018-06-20 15:13:16.9451047") == 1_529_507_596_945_104_000
    # datetimeoffset keeps it (the agent's output converter hands the driver's nanoseconds)
    assert sqlserver("datetimeoffset", "2018-06-20 15:13:16.9451047 +02:00") == (
        "2018-06-20T13:13:16.945104700Z"
    )


def decfloat(value: str) -> object:
    return db2_column_type(Db2Column("D", "DECFLOAT", 34), ValueModes()).convert(Decimal(value))


def unscaled(encoded: str) -> int:
    return int.from_bytes(base64.b64decode(encoded), "big", signed=True)


def test_db2_decfloat_keeps_the_value_not_its_exponent_or_the_sign_of_zero() -> None:
    thousand = decfloat("1E+3")
    assert isinstance(thousand, dict)
    assert (thousand["scale"], unscaled(thousand["value"])) == (0, 1000)
    zero = decfloat("-0")
    assert isinstance(zero, dict)
    assert (zero["scale"], unscaled(zero["value"])) == (0, 0)
    exact = decfloat("-1.250")
    assert isinstance(exact, dict)
    assert (exact["scale"], unscaled(exact["value"])) == (3, -1250)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "sNaN"])
def test_db2_decfloat_non_finite_is_a_conversion_error_not_c1(value: str) -> None:
    # Not Unrepresentable: CapturedTable turns it into a ValueConversionError, and the whole
    # record is quarantined in bronze (the contract suite's quarantine test, Db2 driver).
    with pytest.raises(ValueError, match="no Connect Decimal representation") as raised:
        decfloat(value)
    assert not isinstance(raised.value, Unrepresentable)
