"""The stream's columnar road writes positions and origins at once, byte for byte what
``PostgresPosition.encode()`` and ``format_pg_lsn`` write one by one (edge LSNs included)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bronze.position_base import Phase
from capture.postgresql.position import PostgresPosition, format_pg_lsn
from capture.postgresql.stream_columns import _encoded_positions, _origins
from tests.property_profiles import examples

pytestmark = pytest.mark.unit

_LSN = st.one_of(
    st.sampled_from([0, 1, 0xF, 0x10, 0xFFFFFFFF, 0x100000000, 2**64 - 1, 0x16B3748]),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**36),
)


@settings(max_examples=examples(30, 500))
@given(st.lists(st.tuples(_LSN, _LSN, st.integers(0, 2**32 - 1)), min_size=1, max_size=40))
def test_positions_and_origins_at_once_equal_one_by_one(
    changes: list[tuple[int, int, int]],
) -> None:
    commits, lsns, seqs = (list(c) for c in zip(*changes, strict=True))
    assert _origins(lsns).to_pylist() == [f"pg:{format_pg_lsn(lsn)}" for lsn in lsns]
    assert _encoded_positions(commits, lsns, seqs).to_pylist() == [
        PostgresPosition._new(c, Phase.STREAM, lsn, s).encode() for c, lsn, s in changes
    ]
