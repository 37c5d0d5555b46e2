"""DataFrame views of analysis results, for the ``to_pandas()`` methods (pandas is optional)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from chakra.errors import ChakraInputError


def to_frame(rows: Iterable[Mapping[str, Any]], columns: list[str] | None = None) -> Any:
    """A ``pandas.DataFrame`` of ``rows`` (one dict per row; ``columns`` fixes their order).

    Raises :class:`ChakraInputError` when pandas is not installed.
    """
    try:
        import pandas as pd
    except ImportError:
        raise ChakraInputError(
            "to_pandas() needs pandas, which is not installed", hint="pip install 'chakra-et[pandas]'"
        ) from None
    return pd.DataFrame(list(rows), columns=columns)
