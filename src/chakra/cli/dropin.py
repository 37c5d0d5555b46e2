"""Commands named and flagged like upstream Chakra's, for scripts that call them.

``chakra_jsonizer --input_filename X --output_filename Y`` writes the same text as upstream
(each message's proto3 JSON, back to back). Bad input gives one line and exit code 2.
"""

from __future__ import annotations

import argparse
import sys

from chakra import jsonize as jsonize_lib
from chakra.errors import ChakraError

EXIT_BAD_INPUT = 2


def jsonizer_main(argv: list[str] | None = None) -> None:
    """Entry point of ``chakra_jsonizer``."""
    parser = argparse.ArgumentParser(
        prog="chakra_jsonizer",
        description="Convert a Chakra .et file to JSON, exactly as upstream chakra_jsonizer writes it. "
        "Example: chakra_jsonizer --input_filename llama.0.et --output_filename llama.0.json",
    )
    parser.add_argument("--input_filename", required=True, help="input .et file")
    parser.add_argument("--output_filename", required=True, help="output JSON file")
    args = parser.parse_args(argv)
    try:
        jsonize_lib.jsonize(args.input_filename, args.output_filename, upstream=True)
    except ChakraError as error:
        print(f"chakra_jsonizer: error: {error}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":
    jsonizer_main()
