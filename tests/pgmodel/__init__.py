"""A model of a PostgreSQL database and of Debezium's PostgreSQL connector, and silver's oracle.

Test support only (it needs ``hypothesis``, the ``dev`` extra); production packages never import
it. ``history`` is the one Debezium PostgreSQL generator: source histories, their ground truth,
and the records the connector emits for them, written as JSON lines. Two drivers choose the
operations: ``strategies`` (hypothesis: short histories that shrink, and at-least-once
deliveries) and ``streams`` (a seeded walk: long deterministic streams of a small shop for
fixtures and benchmarks). ``reference`` is the rule-by-rule model of what silver must hold after
a set of change events.
"""
