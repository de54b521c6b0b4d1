"""Key-ordered reading past a key, for databases without row-value comparison.

SQL Server and Db2 cannot write ``(a, b) > (?, ?)``; the same order is
``(a > ?) OR (a = ? AND b > ?) ...``, with qmark parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["after_key"]


def after_key(
    keys: Sequence[str], after: Sequence[Any], quote: Callable[[str], str]
) -> tuple[str, list[Any]]:
    """The condition "the key is past ``after``" and its parameters.

    Args:
        keys: The key's column names, in key order.
        after: The key values to read past, in the same order.
        quote: The engine's identifier quoting.

    >>> after_key(["a", "b"], [1, 2], lambda n: f'"{n}"')
    ('("a" > ?) OR ("a" = ? AND "b" > ?)', [1, 1, 2])
    """
    terms = []
    params: list[Any] = []
    for i, key in enumerate(keys):
        equal = [f"{quote(k)} = ?" for k in keys[:i]]
        terms.append("(" + " AND ".join([*equal, f"{quote(key)} > ?"]) + ")")
        params += [*after[:i], after[i]]
    return " OR ".join(terms), params
