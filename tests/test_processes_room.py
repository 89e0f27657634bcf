"""The Processes room's modules as a house (issue 31): they depend on each other one way only,
counting the imports made for mypy alone (a type named across modules is a dependency too:
the cycle process_list <-> signals <-> screens <-> context <-> job_view hid there), and no
module reaches into another's private names (`desk._notes()`, `owner._refresh()`): each
uses the small public interface the other offers.  Read from the source with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

from test_imports import ROOT, cycles, module_name

ROOM = ROOT / "ui" / "processes"
CONTEXT = ROOT / "ui" / "context.py"


def imports_with_types(path: Path, modules: set[str], me: str | None = None) -> set[str]:
    """Every gputui module `path` imports, `if TYPE_CHECKING:` ones included."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.update(
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                for a in node.names
            )
    me = module_name(path) if me is None else me
    return {m for m in out if m in modules and m != me}


def room_files() -> list[Path]:
    return sorted([*ROOM.glob("*.py"), CONTEXT])


def test_the_room_has_no_import_cycle_even_through_types() -> None:
    modules = {module_name(p) for p in ROOT.rglob("*.py")}
    graph = {module_name(p): imports_with_types(p, modules) for p in room_files()}
    assert cycles(graph) == []


def private_reaches(path: Path) -> list[str]:
    """`x._name` where x is not `self`, `cls` or `super()`: a private name of another object."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
        ):
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls"):
            continue
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
            continue
        out.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_module_of_the_room_reaches_into_another_objects_private_names() -> None:
    assert [line for p in room_files() for line in private_reaches(p)] == []


def test_the_checks_see_a_type_cycle_and_a_private_reach(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gputui.ui.context import X\n")
    assert imports_with_types(a, {"gputui.ui.context"}, me="a") == {"gputui.ui.context"}
    a.write_text("def f(desk):\n    desk._notes()\n    self._ok()\n    super()._fine()\n")
    assert private_reaches(a) == ["a.py:2: desk._notes"]
