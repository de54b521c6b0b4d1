"""The reconciler's own reading of Extended JSON (``gold/documents_canon.py``): equal values in
the spellings silver's writer and pymongo's use are one normal form; every distinction BSON
makes stays a difference, named by field path."""

from __future__ import annotations

import pytest

from gold.documents_canon import differences, normal_text, parse, render, without_path


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ('{"$numberDouble":"1.0E10"}', '{"$numberDouble":"10000000000.0"}'),  # Java vs Python
        ('{"$numberDouble":"NaN"}', '{"$numberDouble":"nan"}'),
        ('{"$date":"1970-01-01T00:00:01.5Z"}', '{"$date":{"$numberLong":"1500"}}'),
        ('{"$binary":"AQI=","$type":"00"}', '{"$binary":{"base64":"AQI=","subType":"00"}}'),
        ('{"$oid":"5F0000000000000000000001"}', '{"$oid":"5f0000000000000000000001"}'),
        ('{"$regex":"a","$options":"mi"}', '{"$regularExpression":{"pattern":"a","options":"im"}}'),
        ("5", '{"$numberInt":"5"}'),  # relaxed: an Int32
    ],
)
def test_equal_values_in_other_spellings_are_one(one: str, other: str) -> None:
    assert normal_text(parse(one)) == normal_text(parse(other))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ('{"$numberInt":"5"}', '{"$numberLong":"5"}'),
        ('{"$numberLong":"5"}', '{"$numberDouble":"5.0"}'),
        ('{"$numberDecimal":"1.50"}', '{"$numberDecimal":"1.5"}'),
        ('{"$numberDouble":"-0.0"}', '{"$numberDouble":"0.0"}'),
        ('"a"', '{"$symbol":"a"}'),
        (
            '{"$binary":{"base64":"AQI=","subType":"00"}}',
            '{"$binary":{"base64":"AQI=","subType":"04"}}',
        ),
        ('{"a":1,"b":2}', '{"b":2,"a":1}'),
    ],
)
def test_every_bson_distinction_is_kept(one: str, other: str) -> None:
    assert normal_text(parse(one)) != normal_text(parse(other))


def test_differences_are_named_by_path() -> None:
    source = parse('{"_id":1,"a":{"b":[{"c":1},{"c":2}]},"n":{"$numberLong":"7"},"x":1,"o":[1]}')
    silver = parse('{"_id":1,"a":{"b":[{"c":1},{"c":3}]},"n":{"$numberDouble":"7.0"},"y":1,"o":[]}')
    found = [(d.path, d.what) for d in differences(source, silver)]
    assert found == [
        ("a.b.1.c", "value"),
        ("n", "type"),
        ("x", "only in source"),
        ("o", "array length"),
        ("y", "only in silver"),
    ]
    (order,) = differences(parse('{"a":1,"b":2}'), parse('{"b":2,"a":1}'))
    assert (order.path, order.what) == ("(document)", "field order")
    assert render(parse('{"$numberDecimal":"1.50"}')) == '{"$numberDecimal":"1.50"}'
    assert list(differences(source, source)) == []


def test_without_path_takes_out_nested_fields_only() -> None:
    document = parse('{"a":{"b":1,"c":2},"b":3}')
    assert (
        render(without_path(document, "a.b"))
        == '{"a":{"c":{"$numberInt":"2"}},"b":{"$numberInt":"3"}}'
    )
    assert without_path(document, "z.q") == document
    listed = parse('{"i":[{"s":1,"n":2},[{"s":3}]]}')
    assert (
        render(without_path(listed, "i.s"))
        == '{"i":[{"n":{"$numberInt":"2"}},[{"s":{"$numberInt":"3"}}]]}'
    )


def test_invalid_wrappers_are_errors() -> None:
    for text in ('{"$numberInt":"x"}', '{"$numberInt":"3000000000"}', '{"$oid":"12"}', "{"):
        with pytest.raises(ValueError):
            parse(text)
