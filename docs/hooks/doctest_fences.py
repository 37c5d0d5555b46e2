"""Griffe extension for the API pages: the doctest examples of every docstring (``>>>`` lines and
their output, up to a blank line) fenced as ``pycon`` code, and the code of an ``Example:`` section
that is no doctest fenced as ``python``, so Markdown shows them as written instead of reading
``[1, 2]`` in them as a link."""

from __future__ import annotations

from typing import Any

import griffe

#: What starts a doctest line, and continues one.
PROMPT, CONTINUATION = ">>>", "..."


def fence_doctests(text: str) -> str:
    r"""``text`` with each run of doctest lines (and the output after them) inside a ``pycon`` fence.

    >>> fence_doctests("Example:\n    >>> 1 + 1\n    2\n\nDone.").splitlines()
    ['Example:', '    ```pycon', '    >>> 1 + 1', '    2', '    ```', '', 'Done.']
    """
    out: list[str] = []
    inside = False
    fenced = False
    indent = ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("```"):
            fenced = not fenced
        if not fenced and not inside and stripped.startswith(PROMPT):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
            inside = True
        elif inside and not stripped:
            out.append(f"{indent}```")
            inside = False
        out.append(line)
    if inside:
        out.append(f"{indent}```")
    return "\n".join(out)


def fence_examples(text: str) -> str:
    r"""``text`` with the indented code under each ``Example:`` header that is no doctest fenced.

    >>> print(fence_examples("Example:\n    x = f()[:3]\nDone."))
    Example:
        ```python
        x = f()[:3]
        ```
    Done.
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if line.strip() not in ("Example:", "Examples:"):
            continue
        header = len(line) - len(line.lstrip())
        end = i
        while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > header):
            end += 1
        block = lines[i:end]
        while block and not block[-1].strip():
            block.pop()
        first = next((b for b in block if b.strip()), "")
        if not block or first.lstrip().startswith((PROMPT, "```")):
            continue
        indent = first[: len(first) - len(first.lstrip())]
        out += [f"{indent}```python", *block, f"{indent}```"]
        i += len(block)
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fences the doctests of every object's docstring as it is loaded."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(fence_examples(obj.docstring.value))
