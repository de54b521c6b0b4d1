"""Types of the C row-image decoder (capture/mysql/_rowdecode.c)."""

from collections.abc import Callable
from typing import Any, Final

CALL: Final[int]
INT: Final[int]
UINT: Final[int]
FLOAT: Final[int]
TEXT: Final[int]
BYTES: Final[int]
DATETIME2: Final[int]
TIMESTAMP2: Final[int]
DATE: Final[int]

class Decoder:
    """The row images of one table map (see the C file)."""

    def __init__(
        self,
        columns: tuple[
            tuple[
                int,
                int,
                str | None,
                Callable[[bytes, int], tuple[Any, int]],
                Callable[[], str] | None,
            ],
            ...,
        ],
        names: tuple[str, ...],
        label: str,
        null_reason: str,
        bitmap_reason: str,
        error: type[BaseException],
    ) -> None: ...
    def rows(
        self, data: bytes, pos: int, end: int, paired: bool
    ) -> list[tuple[list[Any], dict[int, str] | None]]: ...
    @property
    def fallbacks(self) -> int: ...

def scan(
    buffer: bytes,
    at: int,
    seq: int,
    checksum: bool,
    maps: dict[bytes, Any],
    table_map: dict[int, Any],
) -> tuple[int, int, bytes | None, int]: ...
def frame_rows(
    buffer: bytes | bytearray, pos: int, seq: int
) -> tuple[bytes, int, int, int, int]: ...
def split_rows(
    data: bytes, starts: Any, ends: Any, width: int
) -> list[tuple[bytes, bytes | None, int]]: ...
