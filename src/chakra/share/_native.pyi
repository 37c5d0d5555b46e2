"""Types of the C module chakra.share._native (src/chakra/share/_native.c and its parts)."""

from chakra.share.rules import Rules

#: A record that does not parse: (record index, prefix offset, message).
_Error = tuple[int, int, str] | None

class Fingerprints:
    def __init__(self, exact: bool = False) -> None: ...
    def add(self, data: bytes) -> None: ...
    def search(self, buf: bytes, mark: int) -> list[tuple[int, int]]: ...
    def search_records(
        self, buf: bytes, pos: int, first_record: int, eof: bool, generated: Fingerprints | None, mark: int
    ) -> tuple[int, int, list[tuple[int, int, int, int, int, bool]]]: ...
    @property
    def max_len(self) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, data: object) -> bool: ...

class Rewriter:
    def __init__(
        self,
        plan: Rules,
        inputs: Fingerprints,
        shift_us: int,
        noise: float,
        seed: int,
        keep_kinds: bool,
        counters: tuple[int, ...],
        cache_limit: int,
    ) -> None: ...
    def rewrite(
        self, buf: bytes, pos: int, end: int, keep_bounds: bool
    ) -> tuple[int, int, _Error, bytes, bytes | None]: ...
    def counts(self) -> list[int]: ...

def first_start(buf: bytes, pos: int, end: int) -> tuple[int, int, _Error, int]: ...
