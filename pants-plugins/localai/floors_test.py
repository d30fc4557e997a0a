"""Imports point down: every plugin module imports only its own room or rooms on lower floors.

The floors are README.md's ("Floors"); a room is a folder of the plugin or a module at its top.
Rule requests follow the imports (a rule can only ask for a type it imports), so an upward
request shows here as an upward import. Tests and testutil.py may import anything.
"""
from __future__ import annotations

import ast
from pathlib import Path

PLUGIN = Path(__file__).parent

# Bottom first. Rooms on one floor do not import each other.
FLOORS = (
    ("errors",),
    ("scripts", "platforms"),
    ("target_types",),
    ("model",),
    ("native", "oci"),
    ("package",),
    ("goals",),
    ("lint",),
    ("register",),
)
FLOOR_OF = {room: i for i, rooms in enumerate(FLOORS, start=1) for room in rooms}  # numbered as in README.md


def room_of(module: str) -> str:
    """`localai.model.variant` -> `model`; `localai.errors` -> `errors`."""
    return module.split(".")[1]


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "localai":  # `from localai import register`: the names are modules
                found += [(node.lineno, f"localai.{a.name}") for a in node.names]
            elif node.module.startswith("localai."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("localai.")]
    return found


def upward_imports(plugin: Path) -> list[str]:
    """One line per import that points to a room on the same or a higher floor, or to a room the
    floors do not list."""
    lines = []
    for path in sorted(plugin.rglob("*.py")):
        rel = path.relative_to(plugin)
        if path.name.endswith("_test.py") or rel.parts[0] in ("testutil.py", "macros.py", "__init__.py"):
            continue
        room = rel.parts[0].removesuffix(".py")
        for lineno, module in imported_modules(ast.parse(path.read_text(), str(path))):
            target = room_of(module)
            if target == room:
                continue
            if room not in FLOOR_OF or target not in FLOOR_OF:
                lines.append(f"{rel}:{lineno}: imports {module}; add the room '{room if room not in FLOOR_OF else target}' to FLOORS and README.md")
            elif FLOOR_OF[target] >= FLOOR_OF[room]:
                lines.append(f"{rel}:{lineno}: {room} (floor {FLOOR_OF[room]}) imports {module} (floor {FLOOR_OF[target]}): imports point down")
    return lines


def test_the_plugin_imports_point_down() -> None:
    assert upward_imports(PLUGIN) == []


def test_an_upward_or_sideways_import_is_named(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "variant.py").write_text("from localai.package.backend import X\n")
    (tmp_path / "oci").mkdir()
    (tmp_path / "oci" / "image.py").write_text("import localai.native.rules\nfrom localai.model import variant\n")
    (tmp_path / "errors.py").write_text("from localai import register\n")
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "x.py").write_text("from localai.errors import LocalAIError\n")
    assert upward_imports(tmp_path) == [
        "errors.py:1: errors (floor 1) imports localai.register (floor 9): imports point down",
        "extra/x.py:1: imports localai.errors; add the room 'extra' to FLOORS and README.md",
        "model/variant.py:1: model (floor 4) imports localai.package.backend (floor 6): imports point down",
        "oci/image.py:1: oci (floor 5) imports localai.native.rules (floor 5): imports point down",
    ]


def test_every_room_is_on_a_floor() -> None:
    rooms = {p.name for p in PLUGIN.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms <= set(FLOOR_OF), sorted(rooms - set(FLOOR_OF))
