"""The one identifier-quoting helper, against hostile names."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.sql import qualified, quote_identifier, quote_string_literal

pytestmark = pytest.mark.unit


def unquote_identifiers(text: str) -> list[str]:
    """Reference reader for Spark's quoted multi-part names: `a``b`.`c` -> ['a`b', 'c']."""
    parts = re.fullmatch(r"`(?:[^`]|``)*`(?:\.`(?:[^`]|``)*`)*", text)
    assert parts is not None, f"not a sequence of quoted identifiers: {text!r}"
    return [p[1:-1].replace("``", "`") for p in re.findall(r"`(?:[^`]|``)*`", text)]


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("orders", "`orders`"),
        ("pg__public__orders", "`pg__public__orders`"),
        ("Mixed Case", "`Mixed Case`"),
        ("a.b", "`a.b`"),
        ("we`ird", "`we``ird`"),
        ("`", "````"),
        ("``", "``````"),
        ("`; DROP TABLE x; --", "```; DROP TABLE x; --`"),
        ('it\'s "quoted"', '`it\'s "quoted"`'),
        (" leading and trailing ", "` leading and trailing `"),
        ("tab\tnew\nline", "`tab\tnew\nline`"),
        ("ünïcødé_表", "`ünïcødé_表`"),
        ("a`.`b", "`a``.``b`"),
    ],
)
def test_quote_identifier(name: str, quoted: str) -> None:
    assert quote_identifier(name) == quoted
    assert unquote_identifiers(quoted) == [name]


def test_quote_identifier_rejects_empty() -> None:
    with pytest.raises(ValueError, match="empty"):
        quote_identifier("")


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("bronze",), "`bronze`"),
        (("bronze", "events"), "`bronze`.`events`"),
        (("spark_catalog", "silver", "src__db__t"), "`spark_catalog`.`silver`.`src__db__t`"),
        (("silver", "a.b"), "`silver`.`a.b`"),
        (("sil`ver", "t` x"), "`sil``ver`.`t`` x`"),
        (("a`.`b", "c"), "`a``.``b`.`c`"),
    ],
)
def test_qualified(parts: tuple[str, ...], expected: str) -> None:
    assert qualified(*parts) == expected
    assert unquote_identifiers(expected) == list(parts)


def test_qualified_rejects_no_or_empty_parts() -> None:
    with pytest.raises(ValueError, match="at least one"):
        qualified()
    with pytest.raises(ValueError, match="empty"):
        qualified("bronze", "")


@given(st.lists(st.text(min_size=1), min_size=1, max_size=4))
def test_qualified_round_trips_any_names(parts: list[str]) -> None:
    # A dot or backtick inside a part never splits it or ends the identifier early.
    assert unquote_identifiers(qualified(*parts)) == parts


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("/lake/bronze/events", "'/lake/bronze/events'"),
        ("/lake/it's", "'/lake/it\\'s'"),
        ("C:\\lake", "'C:\\\\lake'"),
        ("\\'", "'\\\\\\''"),
        ("", "''"),
    ],
)
def test_quote_string_literal(value: str, literal: str) -> None:
    assert quote_string_literal(value) == literal


def test_quote_string_literal_rejects_nul() -> None:
    with pytest.raises(ValueError, match="NUL"):
        quote_string_literal("a\0b")
