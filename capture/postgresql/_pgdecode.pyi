"""Types of the C extension ``capture.postgresql._pgdecode`` (see ``_pgdecode.c``)."""

def plain_change(data: bytes, off: int) -> tuple[str, int, tuple[str | None, ...]] | None:
    """:func:`capture.postgresql.pgoutput.plain_change` in C."""
