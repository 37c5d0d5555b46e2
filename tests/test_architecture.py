"""The layout keeps its rules (ARCHITECTURE.md): the core imports no front end or consumer, no import
cycle, one decoder of node attributes, no module far over the size limit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "chakra"
#: The core: what every producer and consumer builds on.
CORE = (
    "errors",
    "documents",
    "io",
    "_columns",
    "wire",
    "attrs",
    "chunks",
    "table",
    "groups",
    "paths",
    "output_size",
    "trace",
    "workload_writer",
    "graph",
    "validate",
    "jsonize",
    "parallel",
    "workload",
    "schedule",
    "units",
    "conversion",
    "class_layout",
    "class_expansion",
)
#: Modules allowed past the size limit, with why: tables of rules.
RULE_TABLES = {"pytorch.flops": "FLOP and byte formulas per ATen operator"}
#: The limit of the house ("no module over about 600 lines"), with the slack "about" allows.
MAX_LINES = 650


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "schema" not in p.parts}


def imports_of(path: Path, name: str) -> set[str]:
    """The chakra modules ``path`` imports, at module level and inside functions alike."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("chakra."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(["chakra", *package.split(".")][: len(package.split(".")) + 2 - node.level]) + (
                    "." + base if base else ""
                )
            if base == "chakra":
                found.update(f"chakra.{a.name}" for a in node.names)
            elif base.startswith("chakra."):
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)
    known = {f"chakra.{m}" if m else "chakra" for m in modules()}
    return {m.removeprefix("chakra.") for m in found if m in known} - {name}


def graph() -> dict[str, set[str]]:
    return {name: imports_of(path, name) for name, path in modules().items()}


def top(name: str) -> str:
    return name.split(".")[0]


def test_the_core_imports_no_front_end_or_consumer():
    outside = {
        name: sorted(m for m in deps if top(m) not in CORE and m != "")
        for name, deps in graph().items()
        if top(name) in CORE
    }

    assert {name: deps for name, deps in outside.items() if deps} == {}


def test_there_is_no_import_cycle():
    deps = graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in sorted(deps.get(name, ())):
            if dep in path:
                cycles.append([*path[path.index(dep) :], dep])
            elif state.get(dep) != 2 and dep in deps:
                visit(dep, [*path, dep])
        state[name] = 2

    for name in sorted(deps):
        if state.get(name) != 2:
            visit(name, [name])
    # a package's __init__ re-exporting its own submodules is not a cycle
    real = [c for c in cycles if not all(m.startswith(c[0].split(".")[0]) and c[0].count(".") == 0 for m in c[1:])]
    assert real == []


def reads_attribute_values(path: Path) -> bool:
    """Whether the code (not the docstrings) of ``path`` reads attribute members itself."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            called = node.func
            name = (
                called.attr if isinstance(called, ast.Attribute) else called.id if isinstance(called, ast.Name) else ""
            )
            if name in ("WhichOneof", "flag_value", "int_value"):
                return True
    return False


def test_only_the_table_decodes_attribute_values():
    # reading values out of AttributeProto members belongs to chakra.attrs and the table's decoder
    decoders = {"attrs", "chunks", "table"}
    offenders = [name for name, path in modules().items() if name not in decoders and reads_attribute_values(path)]
    assert sorted(offenders) == sorted(ALLOWED_MESSAGE_READERS)


#: Modules that read whole messages for their own format, not consumer values: the JSON mapping
#: writes every member as it is (the TensorFlow front end reads TensorFlow's own oneofs in C:
#: chakra._tf_graph, chakra._xplane); the anonymizer's rules rewrite every
#: member of an attribute the C rewriter hands them (the registry's values read by
#: chakra.attrs.read_value, the rest as text to tokenize or drop), and the leakage check names the
#: text member of the output that holds a hit.
ALLOWED_MESSAGE_READERS = (
    "jsonize.encode", "share.leakage", "share.rules",
)  # fmt: skip


@pytest.mark.parametrize("name", sorted(modules()))
def test_no_module_is_far_over_the_size_limit(name):
    lines = modules()[name].read_text().count("\n")

    assert lines <= MAX_LINES or name in RULE_TABLES, f"{name}: {lines} lines"


#: The front ends: they turn other formats into ETs and check what they wrote with the core alone.
FRONT_ENDS = ("pytorch", "kineto", "xla", "tensorflow", "flexflow", "text", "msccl", "generate")
#: What a front end never imports (issue 34): the consumers of what it writes.
CONSUMERS_OF_FRONT_ENDS = ("analyze", "sim", "replay", "share")


def test_front_ends_import_no_consumer():
    crossing = {
        name: sorted(m for m in deps if top(m) in CONSUMERS_OF_FRONT_ENDS)
        for name, deps in graph().items()
        if top(name) in FRONT_ENDS
    }

    assert {name: deps for name, deps in crossing.items() if deps} == {}


def test_the_simulator_and_the_replay_import_no_analysis():
    crossing = {
        name: sorted(m for m in deps if top(m) == "analyze")
        for name, deps in graph().items()
        if top(name) in ("sim", "replay")
    }

    assert {name: deps for name, deps in crossing.items() if deps} == {}


def _is_overload(node: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "overload" for d in node.decorator_list)


def public_definitions() -> dict[str, list[str]]:
    """Each public class and function defined at a module's top level -> the modules defining it."""
    found: dict[str, list[str]] = {}
    for name, path in modules().items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and _is_overload(node):
                continue
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(name)
    return found


def test_no_public_class_or_function_name_is_defined_twice():
    twice = {name: where for name, where in public_definitions().items() if len(where) > 1}

    assert twice == {}


def _imported_names(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``from chakra... import name`` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("chakra"):
            found.extend((node.module or "", alias.name) for alias in node.names)
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_the_cli_imports_only_public_names_of_the_library():
    private = {
        name: sorted(f"{module}.{imported}" for module, imported in _imported_names(path)
                     if _private(imported) or any(_private(part) for part in module.split(".")))
        for name, path in modules().items()
        if top(name) == "cli"
    }  # fmt: skip

    assert {name: found for name, found in private.items() if found} == {}
