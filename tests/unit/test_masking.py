"""Column masks applied to row images before bronze (capture/masking.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from capture.masking import ColumnMasker, java_serialized_string
from capture.postgresql.config import PostgresSourceConfig
from capture.source_config import ColumnRule, ColumnRuleKind
from pipeline.config import load_config
from pipeline.errors import ConfigError

pytestmark = pytest.mark.unit

SALT = "CzQMA0cB5K"
UNICODE = "na\u00efve \x00 \U0001f600 \u20ac"

# Digests computed by a JVM running Debezium's HashValueConverter algorithm:
# MessageDigest.update(salt.getBytes()); digest(V1: ObjectOutputStream bytes | V2: getBytes()).
JAVA_DIGESTS = {
    ("SHA-256", "Sally Thomas"): (
        "c52d535f7d1aeb9573ec6b1aadcd32d89f66d480ac00307c021659c9eedb96fd",
        "649ef7111a7e2b04bd5f69c067e2d22173abf15eb5f59462140ba4dac06860ae",
    ),
    ("SHA-256", ""): (
        "7b061bc77caec9afdc6b986ab6c4de894d58006b32ac0f7ea728404a5cf3a9e5",
        "38bc986eb4a5475fab16ac693f6c1b4c2445600da5c5aec3d04301e48d6d0d68",
    ),
    ("SHA-256", UNICODE): (
        "babdecddbdca8b1f9003ecf044126182cd127f10a5dc330c7596df692feaceb4",
        "18d7ed0bc8522af0c54679d9341061ffa69e371d30ca7680a03d77658fa162a4",
    ),
    ("MD5", "Sally Thomas"): (
        "93992ba1d81ddc6133b34edb8ee799b6",
        "d2810789895fe36cc64e86644a0fe15a",
    ),
    ("SHA-1", UNICODE): (
        "c6a218b30909978685f25a9f5a784f901432191b",
        "6c77a309e6baba286752caa371dbd021aab08ea1",
    ),
    ("SHA-512", "Sally Thomas"): (
        "ed8fd54e0bd1fe44629e5ad61656e1e2af94908f41b98215ac24c3cc89ac4609"
        "a1808e9094d9efb36c74ffcae741be226ca642de74a20a00bb2560b972a0f00e",
        "c79560c3220a1758fc94f1bc9283bafafd2611032bba7be515dee2905e75b595"
        "aec0f168ee6d154c24c452dfee5842a76ca255f0fd2fde52560061e8fe1363e2",
    ),
}


def rule(kind: ColumnRuleKind, *columns: str, **extra: Any) -> ColumnRule:
    return ColumnRule(key=f"test.{kind}", kind=kind, columns=columns, **extra)


def hash_rule(
    columns: str, salt: str = SALT, algorithm: str = "SHA-256", v2: bool = False
) -> ColumnRule:
    kind = ColumnRuleKind.HASH_V2 if v2 else ColumnRuleKind.HASH
    return rule(kind, columns, algorithm=algorithm, salt=salt)


@pytest.mark.parametrize(("algorithm", "value"), list(JAVA_DIGESTS))
def test_hashes_match_debezium(algorithm: str, value: str) -> None:
    v1, v2 = JAVA_DIGESTS[(algorithm, value)]
    masker = ColumnMasker(
        [
            hash_rule(r"inventory\.orders\.v1", algorithm=algorithm),
            hash_rule(r"inventory\.orders\.v2", algorithm=algorithm, v2=True),
        ]
    )
    row = {"v1": value, "v2": value, "id": 7}
    assert masker.apply("inventory.orders", row) == {"v1": v1, "v2": v2, "id": 7}
    assert row == {"v1": value, "v2": value, "id": 7}  # input untouched


def test_long_strings_use_java_long_string_encoding() -> None:
    value = "x" * 70_000  # more than 65535 bytes: TC_LONGSTRING with an 8-byte length
    assert java_serialized_string(value)[:13].hex() == "aced00057c0000000000011170"
    masker = ColumnMasker([hash_rule("db.t.c", salt="s")])
    assert masker.apply("db.t", {"c": value}) == {
        "c": "2f3f5d5633c7ded8d2a39011168147eb7e8973c4b1da618a4c009ed6b74ef63f"
    }


def test_hash_is_deterministic_and_salted() -> None:
    first = ColumnMasker([hash_rule("db.t.email")])
    again = ColumnMasker([hash_rule("db.t.email")])
    other_salt = ColumnMasker([hash_rule("db.t.email", salt="pepper")])
    row = {"email": "ann@example.com"}
    masked = first.apply("db.t", row)
    assert masked is not None and masked["email"] != row["email"]
    assert masked == first.apply("db.t", dict(row)) == again.apply("db.t", row)
    assert masked != other_salt.apply("db.t", row)
    assert first.apply("db.t", {"email": "bob@example.com"}) != masked


def test_mask_with_chars() -> None:
    masker = ColumnMasker(
        [
            rule(ColumnRuleKind.MASK, r"db\.t\.card", length=8),
            rule(ColumnRuleKind.MASK, r"db\.t\.pin", length=0),
        ]
    )
    assert masker.apply("db.t", {"card": "4111-1111", "pin": "1234", "x": "keep"}) == {
        "card": "********",
        "pin": "",
        "x": "keep",
    }


def test_truncate() -> None:
    masker = ColumnMasker([rule(ColumnRuleKind.TRUNCATE, r"db\.t\.notes", "db.t.blob", length=5)])
    assert masker.apply("db.t", {"notes": "abcdefgh", "blob": b"\x00\x01\x02\x03\x04\x05"}) == {
        "notes": "abcde",
        "blob": b"\x00\x01\x02\x03\x04",
    }
    short = {"notes": "abc"}
    assert masker.apply("db.t", short) == short


def test_regexes_are_anchored_and_case_insensitive() -> None:
    masker = ColumnMasker([rule(ColumnRuleKind.MASK, "inventory.orders.customerName", length=3)])
    row = {"customerName": "Ann", "customerNameX": "Bob", "xcustomerName": "Cy"}
    assert masker.apply("inventory.orders", row) == {
        "customerName": "***",
        "customerNameX": "Bob",
        "xcustomerName": "Cy",
    }
    assert masker.apply("INVENTORY.Orders", {"CUSTOMERNAME": "Ann"}) == {"CUSTOMERNAME": "***"}
    assert masker.apply("other.inventory.orders", {"customerName": "Ann"}) == {
        "customerName": "Ann"
    }
    # as in Debezium, an unescaped dot matches any character
    assert masker.applies_to("inventory_orders")
    assert masker.apply("inventory_orders", {"customerName": "Ann"}) == {"customerName": "***"}


def test_unmatched_collection_takes_the_fast_path() -> None:
    masker = ColumnMasker([rule(ColumnRuleKind.MASK, r"inventory\.customers\.email", length=3)])
    row = {"email": "ann@example.com"}
    assert not masker.applies_to("inventory.orders")
    assert masker.apply("inventory.orders", row) is row
    assert masker.applies_to("inventory.customers")
    # a collection with rules, but no rewritten column in this row: the same object too
    unmatched = {"id": 1}
    assert masker.apply("inventory.customers", unmatched) is unmatched
    assert not ColumnMasker().applies_to("inventory.customers")
    assert ColumnMasker().apply("inventory.customers", row) is row


def test_nulls_stay_null() -> None:
    masker = ColumnMasker([hash_rule("db.t.email"), rule(ColumnRuleKind.MASK, "db.t.c", length=2)])
    assert masker.apply("db.t", None) is None
    row = {"email": None, "c": None}
    assert masker.apply("db.t", row) == {"email": None, "c": None}


def test_first_matching_rule_wins_in_debezium_order(tmp_path: Path) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "sources:\n"
        "  - name: pg\n"
        "    connector: postgresql\n"
        "    database.hostname: h\n"
        "    database.user: u\n"
        "    database.dbname: d\n"
        "    column.mask.hash.SHA-256.with.salt.x: inventory.t.a\n"
        "    column.mask.with.4.chars: inventory.t.a, inventory.t.b\n"
        "    column.truncate.to.2.chars: inventory\\.t\\.(a|b|c)\n",
        encoding="utf-8",
    )
    source = load_config(config, env={}).source("pg")
    assert isinstance(source, PostgresSourceConfig)
    masker = ColumnMasker.from_source(source)
    assert [r.kind for r in masker.rules] == ["truncate", "mask", "hash"]
    assert masker.apply("inventory.t", {"a": "abcdef", "b": "abcdef", "c": "abc"}) == {
        "a": "ab",
        "b": "ab",
        "c": "ab",
    }


def test_escaped_comma_in_a_rule_value(tmp_path: Path) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "sources:\n"
        "  - name: files\n"
        "    connector: debezium_json\n"
        "    path: x\n"
        "    column.mask.with.1.chars: 'db\\.t\\.c{1\\,2}, db\\.t\\.z'\n",
        encoding="utf-8",
    )
    masker = ColumnMasker.from_source(load_config(config, env={}).source("files"))
    assert masker.apply("db.t", {"c": "x", "cc": "x", "ccc": "x", "z": "x"}) == {
        "c": "*",
        "cc": "*",
        "ccc": "x",
        "z": "*",
    }


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (42, "42"),
        (-1.5, "-1.5"),
        (True, "true"),
        (b"\x00\xff", "00ff"),
        ({"b": 1, "a": [2, None]}, '{"a":[2,null],"b":1}'),
        ([3, "x"], '[3,"x"]'),
    ],
)
def test_every_value_type_is_masked_from_its_canonical_text(value: Any, text: str) -> None:
    hashed = ColumnMasker([hash_rule("db.t.n", v2=True)])
    assert hashed.apply("db.t", {"n": value}) == hashed.apply("db.t", {"n": text})
    assert hashed.apply("db.t", {"n": value}) != {"n": value}
    masked = ColumnMasker([rule(ColumnRuleKind.MASK, "db.t.n", length=3)])
    assert masked.apply("db.t", {"n": value}) == {"n": "***"}
    truncated = ColumnMasker([rule(ColumnRuleKind.TRUNCATE, "db.t.n", length=2)])
    cut = value if isinstance(value, bytes) else text[:2]  # bytes are cut as bytes
    assert truncated.apply("db.t", {"n": value}) == {"n": cut}


def test_a_key_column_refuses_rules_that_would_merge_keys() -> None:
    ColumnMasker([hash_rule("db.t.id")]).check_key("db.t", "id")  # a hash keeps keys apart
    ColumnMasker([rule(ColumnRuleKind.MASK, "db.t.other", length=3)]).check_key("db.t", "id")
    for kind in (ColumnRuleKind.MASK, ColumnRuleKind.TRUNCATE):
        masker = ColumnMasker([rule(kind, "db.t.id", length=3)])
        with pytest.raises(ConfigError, match=r"db\.t\.id is a key column.*column\.mask\.hash"):
            masker.check_key("db.t", "id")


def test_sources_without_rules_get_a_no_op_masker() -> None:
    config = load_config(Path(__file__).resolve().parents[2] / "conf" / "pipeline.yaml", env={})
    masker = ColumnMasker.from_source(config.source("inventory"))
    assert not masker
    row = {"a": 1}
    assert masker.apply("inventory.customers", row) is row


# The collection-level shortcut must never skip a column that a rule matches.
_PART = st.sampled_from(["ab", "AB", "ba", "x", "X1", "ab-1"])
_NAME = _PART | st.builds(lambda a, sep, b: a + sep + b, _PART, st.sampled_from(".x"), _PART)
_PATTERN = st.sampled_from(
    [
        r"ab\.ab\.x",
        "ab.ab.x",
        r"ab\.a.*",
        r"a+b\..*",
        r".*\.x",
        r"ab\.(ab|ba)\.x",
        r"^ab\.ab\.x",
        r"[ab]b\.ab\..*",
        r"ab?\.ab\.x",
        "AB.Ab.X1",
        r"ab\-1\..*",
    ]
)


@given(patterns=st.lists(_PATTERN, min_size=1, max_size=3), collection=_NAME, column=_NAME)
@example(patterns=["ab.ab.x"], collection="abxab", column="x")
@example(patterns=[r"a+b\..*"], collection="aaab", column="x")
@example(patterns=[r"ab?\.ab\.x"], collection="a.ab", column="x")
@example(patterns=[r"ab\.(ab|ba)\.x"], collection="ab.ba", column="x")
@example(patterns=["AB.Ab.X1"], collection="ab.ab", column="x1")
def test_collection_shortcut_never_skips_a_match(
    patterns: list[str], collection: str, column: str
) -> None:
    masker = ColumnMasker([rule(ColumnRuleKind.MASK, *patterns, length=1)])
    qualified = f"{collection}.{column}"
    if any(re.fullmatch(p, qualified, re.IGNORECASE) for p in patterns):
        assert masker.applies_to(collection)
        assert masker.apply(collection, {column: "v"}) == {column: "*"}
    else:
        assert masker.apply(collection, {column: "v"}) == {column: "v"}
