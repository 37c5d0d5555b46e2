"""How much a command may write before it starts: the estimate check every bulk writer shares.

A mistyped size (``--num-npus 100000000``, a global batch of 10^20 sequences) would otherwise run
for hours filling the disk. Writers estimate their output from their inputs (an upper bound), and
refuse past ``max_bytes`` (default :data:`MAX_OUTPUT_BYTES`, ``--max-size`` on the command line),
saying how much they would write and the ``--max-size`` that allows it.

Example:
    >>> human_size(3 << 30)
    ('3.0 GiB', '3GiB')
"""

from __future__ import annotations

from chakra.errors import ChakraInputError, PathLike

#: What a bulk writer writes at most unless told otherwise: GPT-3 175B on 2,048 ranks with 48
#: micro-batches (2.8 GB) fits; a mistyped size does not.
MAX_OUTPUT_BYTES = 4 << 30
SIZE_SCALES = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def human_size(size_bytes: int) -> tuple[str, str]:
    """``size_bytes`` to read (``1.5 GiB``) and as a ``--max-size`` that covers it (``2GiB``)."""
    for unit, scale in SIZE_SCALES:
        if size_bytes >= scale:
            return f"{size_bytes / scale:,.1f} {unit}", f"{-(-size_bytes // scale)}{unit}"
    return f"{size_bytes} B", f"{size_bytes}B"


def check_output_size(
    estimate_bytes: int, max_bytes: int | None, what: str, *, path: PathLike | None = None, check: str = ""
) -> None:
    """Refuse (:class:`ChakraInputError` naming ``path``) when ``estimate_bytes`` is over ``max_bytes``
    (``None``: no limit). ``what`` says what would be written (``"2,048 files"``), ``check`` which
    input to look at first (``"--num-npus"``)."""
    if max_bytes is None or estimate_bytes <= max_bytes:
        return
    first = f"check {check}, or " if check else ""
    raise ChakraInputError(
        f"{what} would write about {human_size(estimate_bytes)[0]}, more than the {human_size(max_bytes)[0]} allowed",
        path=path,
        hint=f"{first}allow it with --max-size {human_size(estimate_bytes)[1]}",
    )
