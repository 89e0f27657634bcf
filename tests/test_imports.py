"""How gputui's modules import each other: no import cycles (a lazy import inside a function
counts: it is a cycle that only hides until the function runs), and no lower room imports
from a higher one (telemetry, control, export, diag and the config file know nothing of the
UI or of the command line).  Imports under `if TYPE_CHECKING:` are for mypy only and are
left out.  Read from the source with `ast`: nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "gputui"

#: room -> the rooms it must not import from.
HIGHER = {
    "gputui.telemetry": ("gputui.ui", "gputui.commands", "gputui.cli", "gputui.export", "gputui.diag"),
    "gputui.control": ("gputui.ui", "gputui.commands", "gputui.cli", "gputui.export", "gputui.diag"),
    "gputui.export": ("gputui.ui", "gputui.commands", "gputui.cli"),
    "gputui.diag": ("gputui.ui", "gputui.commands", "gputui.cli", "gputui.export"),
    "gputui.config": ("gputui.ui", "gputui.commands", "gputui.cli"),
    "gputui.options": ("gputui.ui", "gputui.commands", "gputui.cli"),
    "gputui.palette": ("gputui.ui", "gputui.commands", "gputui.cli"),
    "gputui.commands": ("gputui.cli",),  # cli loads them (importlib): a cycle the graph cannot see
    "gputui.serve": ("gputui.cli", "gputui.commands", "gputui.ui"),
    "gputui.rules": ("gputui",),  # standard library only: the diagnosis children load it by path
    "gputui.startvars": ("gputui",),  # the same
}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, modules: set[str], root: Path = ROOT) -> set[str]:
    """The gputui modules `path` imports, at run time (anywhere in it)."""
    tree = ast.parse(path.read_text(), str(path))
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for a in node.names:
                full = f"{base}.{a.name}"
                out.add(full if full in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in out if m in modules and m != me}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    paths = [p for p in root.rglob("*.py") if "__pycache__" not in p.parts]
    modules = {module_name(p, root) for p in paths}
    return {module_name(p, root): imports_of(p, modules, root) for p in paths}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


@pytest.mark.parametrize("room", sorted(HIGHER))
def test_no_lower_room_imports_a_higher_one(room: str) -> None:
    bad = [
        (module, target)
        for module, targets in import_graph().items()
        if module == room or module.startswith(room + ".")
        for target in targets
        if any(target == h or target.startswith(h + ".") for h in HIGHER[room])
    ]
    assert bad == []


def test_the_check_sees_a_lazy_cycle_and_skips_type_checking_imports(tmp_path: Path) -> None:
    """The check itself: a lazy import inside a function is seen, a TYPE_CHECKING one is
    not, and a cycle through it is found.  (On the code before this check existed it found
    ui/detail.py <-> ui/widgets/overview.py, and config.py importing ui/render.py.)"""
    pkg = tmp_path / "gputui"
    (pkg / "ui").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ui" / "__init__.py").write_text("")
    (pkg / "ui" / "a.py").write_text("from gputui.ui.b import X\n")
    (pkg / "ui" / "b.py").write_text("def f():\n    from gputui.ui import a\n")
    (pkg / "ui" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
    )
    graph = import_graph(pkg)
    assert graph["gputui.ui.c"] == set()
    assert cycles(graph) == [["gputui.ui.a", "gputui.ui.b"]]
