"""Silver table names: plain names stay readable, every name is distinct and fits a directory.

Found by the chaos run's hostile input: a 5,000-character table name stopped the silver job
(the Delta log path exceeded 255 bytes), and ``a\\nb`` / ``a\\x00b`` shared one silver table.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from silver.job import silver_table_name


def test_plain_names_are_kept() -> None:
    assert silver_table_name("shop", "public.items") == "shop__public__items"
    assert silver_table_name("my", "inventory.Order_Lines2") == "my__inventory__Order_Lines2"


def test_names_that_sanitise_alike_stay_apart() -> None:
    names = {
        silver_table_name("h", f"public.{table}")
        for table in ("a b", "a_b", "a-b", "a\nb", "a\x00b", "a__b", "A b")
    }
    assert len(names) == 7
    assert silver_table_name("a__b", "c") != silver_table_name("a", "b__c")


def test_a_name_of_any_length_fits_a_directory() -> None:
    name = silver_table_name("h", "public." + "x" * 5000)
    assert len(name.encode()) < 255
    assert name.startswith("h__public__x")


@given(st.text(min_size=1, max_size=300), st.text(min_size=1, max_size=300))
def test_distinct_tables_get_distinct_names(a: str, b: str) -> None:
    if a != b and "." not in a + b:
        assert silver_table_name("s", f"p.{a}") != silver_table_name("s", f"p.{b}")
    for table in (a, b):
        name = silver_table_name("s", f"p.{table.replace('.', '_')}")
        assert len(name.encode()) < 255
        assert all(c.isascii() and (c.isalnum() or c == "_") for c in name)
