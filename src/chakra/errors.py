"""Typed errors. Every error a user can cause names the file, the position and a fix.

The CLI turns a :class:`ChakraError` into one line on stderr and exit code 2; library users catch
the class they care about. Nothing here imports any other part of the package.
"""

from __future__ import annotations

import os

PathLike = str | os.PathLike[str]


class ChakraError(Exception):
    """Base of every error this package raises on purpose.

    ``path`` is the file involved (if any), ``hint`` a short suggestion how to fix the input.
    """

    def __init__(self, message: str, *, path: PathLike | None = None, hint: str | None = None):
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.hint = hint
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        fix = f" (hint: {self.hint})" if self.hint else ""
        return f"{where}{self.message}{fix}"


class ChakraFormatError(ChakraError):
    """A file is not a well-formed Chakra ET (bad framing, truncated or corrupt record).

    ``offset`` is the byte offset of the record in the decompressed stream and ``node_index`` the
    0-based index of the node (``None`` for the GlobalMetadata record).
    """

    def __init__(
        self,
        message: str,
        *,
        path: PathLike | None = None,
        offset: int | None = None,
        node_index: int | None = None,
        hint: str | None = None,
    ):
        self.offset = offset
        self.node_index = node_index
        super().__init__(message, path=path, hint=hint)

    def __str__(self) -> str:
        where = []
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        if self.node_index is not None:
            where.append(f"node #{self.node_index}")
        elif self.offset is not None:
            where.append("GlobalMetadata record")
        position = f" at {', '.join(where)}" if where else ""
        prefix = f"{self.path}{position}: " if self.path else (f"{position.strip()}: " if position else "")
        fix = f" (hint: {self.hint})" if self.hint else ""
        return f"{prefix}{self.message}{fix}"


class AttrKindError(ChakraError, TypeError):
    """A well-known attribute holds a value kind its consumers cannot read (e.g. a float size)."""


class ChakraInputError(ChakraError):
    """Any other bad input: missing files, unreadable JSON, arguments that do not fit together."""


class ChakraOutputError(ChakraInputError):
    """An output that could not be written (disk full, read-only, over quota): ``os_error`` is why.
    Writers of several files (a workload) catch it to name the whole output instead of one file."""

    def __init__(self, os_error: OSError, *, path: PathLike, hint: str | None = None):
        super().__init__(f"cannot write: {os_error.strerror or os_error}", path=path, hint=hint)
        self.os_error = os_error

    def __reduce__(self) -> tuple[object, ...]:
        # picklable, so a worker process can send it back (Exception pickles its message alone)
        return _output_error, (self.os_error, self.path, self.hint)


def _output_error(os_error: OSError, path: PathLike, hint: str | None) -> ChakraOutputError:
    return ChakraOutputError(os_error, path=path, hint=hint)
