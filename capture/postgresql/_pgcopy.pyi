"""Types of the C extension ``capture.postgresql._pgcopy`` (see ``_pgcopy.c``)."""

class CopyDataError(ValueError):
    """Malformed text COPY data: ``args`` are ``(reason, row of the chunk, column or None)``."""

class CopyReceiveError(Exception):
    """The COPY failed: ``args`` are ``(message, SQLSTATE or None)``."""

class TextCopySplitter:
    """Text COPY rows split into Arrow string columns (see the module)."""

    def __init__(self, width: int) -> None: ...
    @property
    def rows(self) -> int:
        """Rows split so far."""

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Split the rows ``data`` completes."""

    def drain(self, pgconn_ptr: int) -> None:
        """Receive the connection's COPY in progress, to its end."""

    def finish(self) -> list[tuple[bytes, bytes, bytes]]:
        """``(validity, offsets, data)`` per column: the Arrow buffers of the rows."""

def bind_libpq(path: str) -> int:
    """Bind the libpq already loaded from ``path``; its ``PQlibVersion()``."""

def read_messages(pgconn_ptr: int, limit: int) -> tuple[list[bytes], int]:
    """The CopyData messages libpq already holds (at most ``limit``), without waiting; status 0
    (none left), -1 (the COPY ended) or -2 (an error)."""
