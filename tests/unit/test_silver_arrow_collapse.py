"""The Arrow road's pieces without Spark: each key's last change, and the key-order text.

Against Spark itself: tests/integration/test_silver_arrow_road.py.
"""

from __future__ import annotations

import pyarrow as pa

from silver.merge import key_order_of
from silver.merge_driver import last_changes


def test_the_last_change_per_key_is_the_highest_position_as_unsigned_bytes() -> None:
    rows = pa.table(
        {
            "k": ["a", "b", "a", "c", "b", "a", "c"],
            # b"\x80" > b"\x7f\x00" (first byte, unsigned); b"\x01" < b"\x01\x00" (a prefix)
            "p": [b"\x7f\x00", b"\x01", b"\x80", b"\x05", b"\x01\x00", b"\x00\xff", b"\x05"],
            "v": [1, 2, 3, 4, 5, 6, 4],
        }
    )
    last = last_changes(rows, key="k", position="p")
    assert last.to_pydict() == {
        "k": ["a", "b", "c"],
        "p": [b"\x80", b"\x01\x00", b"\x05"],
        "v": [3, 5, 4],
    }
    assert last_changes(rows.slice(0, 0), key="k", position="p").num_rows == 0


def test_key_order_texts() -> None:
    nines = "n" + "9" * 18 + "8"  # -1: nines' complement of 0...01
    assert key_order_of('{"id":"1"}') == "p" + "0" * 18 + "1"
    assert key_order_of('{"id":"-1"}') == nines
    assert key_order_of('{"a":"x","b":null,"c":"007"}') == "sx\u0001z\u0001p" + "0" * 16 + "007"
    assert key_order_of('{"id":"12345678901234567890"}') == "s12345678901234567890"
    assert key_order_of("{}") == ""
    # A scalar key is its own JSON text, one field.
    assert key_order_of('"406c"') == 's"406c"'
    assert key_order_of("42") == "p" + "0" * 17 + "42"
    # Left to Spark: shapes a canonical key never has, and texts where the parsers might differ.
    assert key_order_of('{"id":-5,"n":"x"}') == "n" + "9" * 18 + "4\u0001sx"
    odd = ('{"id":1.0}', '{"id":true}', '{"a":"1","a":"2"}', "007", "1.5", "[1]", "{oops")
    for key in (*odd, '{"id":"1\\n"}'):
        assert key_order_of(key) is None, key
    assert key_order_of('{"id":"\\ud800"}') is None
