"""Reading the JSON and YAML documents users write (spec files, ASTRA-sim configurations): one
:class:`~chakra.errors.ChakraInputError` per mistake, naming the file and, for a syntax error, the
line and column.

YAML numbers follow YAML 1.2: ``989e12`` is a number (PyYAML alone, a YAML 1.1 reader, takes it for
text), as ASTRA-sim's yaml-cpp reads it.

Example:
    >>> parse_yaml("peak: 989e12", "spec.yaml", "spec")
    {'peak': 989000000000000.0}
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chakra.errors import ChakraInputError, PathLike

# PyYAML is imported when a YAML document is read: the readers of traces (``chakra info``) import
# this module for JSON comm groups files only.
if TYPE_CHECKING:
    import yaml

#: Plain YAML scalars that YAML 1.2 reads as numbers but PyYAML (YAML 1.1: a float needs a dot and a
#: signed exponent) reads as text, such as ``989e12`` or ``3.35e12``.
YAML12_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$")


@functools.cache
def _yaml12_loader() -> type[yaml.SafeLoader]:
    """The loader of :func:`parse_yaml`, built once, on first use."""
    import yaml

    class Yaml12Loader(yaml.SafeLoader):
        """PyYAML's safe loader (plain data only) reading ``989e12`` as a number, as YAML 1.2 does."""

    Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_EXPONENT_FLOAT, list("-+.0123456789"))
    return Yaml12Loader


def read_text(path: PathLike, what: str) -> str:
    """The UTF-8 text of ``path``; ``what`` names the kind of file in errors (``"spec"``)."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ChakraInputError(
            f"no such {what} file", path=path, hint=f"pass the path of an existing {what} file"
        ) from None
    except IsADirectoryError:
        raise ChakraInputError(f"is a directory, not a {what} file", path=path) from None
    except OSError as exc:
        raise ChakraInputError(f"cannot read {what} file: {exc.strerror}", path=path) from None
    except UnicodeDecodeError as exc:
        raise ChakraInputError(f"{what} file is not UTF-8 text (byte {exc.start})", path=path) from None


def parse_json(text: str, path: PathLike, what: str, hint: str = "check commas and quotes") -> Any:
    """The JSON document ``text`` (of ``path``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ChakraInputError(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", path=path, hint=hint
        ) from None


def parse_yaml(text: str, path: PathLike, what: str, hint: str = "check indentation and colons") -> Any:
    """The YAML document ``text`` (of ``path``), numbers as YAML 1.2 reads them."""
    import yaml

    try:
        return yaml.load(text, Loader=_yaml12_loader())  # a SafeLoader: builds plain data only
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ChakraInputError(f"{what} is not valid YAML: {problem}{where}", path=path, hint=hint) from None
    except yaml.YAMLError as exc:
        raise ChakraInputError(f"{what} is not valid YAML: {exc}", path=path, hint=hint) from None
