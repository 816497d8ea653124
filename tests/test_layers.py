"""The import layers of tgfx, read from the source with `ast` (nothing is imported): module-level and function-local
imports alike.

    config, dtypes, counters, diskcache, forksafe  <-  ir  <-  devices  <-  lowering  <-  everything else (tensor,
    function, transforms/, nn/, ...)  <-  tgfx/__init__.py

A module may import its own layer and the layers below it, never one above. Inside `tgfx/devices` no modules
import each other in a cycle, and `hcq.py`, the interface a backend implements, imports no other devices module.
"""
from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "tgfx"

LAYERS = ["base", "ir", "devices", "lowering", "front end", "tgfx/__init__.py"]
BASE = {"tgfx.config", "tgfx.dtypes", "tgfx.counters", "tgfx.diskcache", "tgfx.forksafe"}

# Known violations, each (importing module, imported module): none left.
ALLOWED: set[tuple[str, str]] = set()


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def layer(module: str) -> int:
    """The layer index of a tgfx module (LAYERS)."""
    if module == "tgfx":
        return 5
    if module in BASE:
        return 0
    sub = module.split(".")[1]
    return {"ir": 1, "devices": 2, "lowering": 3}.get(sub, 4)


def resolve(importer: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The tgfx modules an import statement loads: `from tgfx.x import y` is the module tgfx.x.y when that exists
    (a submodule), else tgfx.x (a name defined in it)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == "tgfx" or alias.name.startswith("tgfx."):
                yield alias.name
        return
    if node.level:      # a relative import: resolved against the importing package
        is_pkg = MODULES[importer].name == "__init__.py"
        base = importer.split(".")[:len(importer.split(".")) - node.level + (1 if is_pkg else 0)]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    if mod != "tgfx" and not mod.startswith("tgfx."):
        return
    for alias in node.names:
        sub = f"{mod}.{alias.name}"
        yield sub if sub in MODULES else mod


def imports(module: str) -> Iterator[tuple[str, int]]:
    """(imported tgfx module, line) for every import statement in `module`, at any depth."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in dict.fromkeys(resolve(module, node)):     # once per statement, in order
                if target != module:
                    yield target, node.lineno


def where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(ROOT)}:{line}"


def test_every_module_imports_only_its_own_layer_and_below() -> None:
    bad, stale = [], set(ALLOWED)
    for module in MODULES:
        for target, line in imports(module):
            if layer(target) > layer(module):
                if (module, target) in ALLOWED:
                    stale.discard((module, target))
                    continue
                bad.append(f"{where(module, line)}: {module} ({LAYERS[layer(module)]}) imports {target} "
                           f"({LAYERS[layer(target)]})")
    assert not bad, "imports from a layer above:\n" + "\n".join(bad)
    assert not stale, f"allowed violations that no longer exist (delete them from ALLOWED): {sorted(stale)}"


def test_devices_import_no_cycle_and_the_interface_imports_no_other_devices_module() -> None:
    devices = [m for m in MODULES if layer(m) == 2]
    edges: dict[str, list[tuple[str, int]]] = {m: [(t, line) for t, line in imports(m) if layer(t) == 2]
                                               for m in devices}
    # the interface a backend implements: hcq.py with the host runtime and the memory and programs it is built on
    interface = ["tgfx.devices.hcq", "tgfx.devices.runtime", "tgfx.devices.programs"]
    outside = [f"{where(m, line)}: imports {t}" for m in interface for t, line in edges[m] if t not in interface]
    assert not outside, "hcq.py, runtime.py and programs.py are the interface a backend implements; they import no " \
        "other devices module:\n" + "\n".join(outside)

    # a cycle: a path from a module back to itself (depth-first, reporting the imports along it)
    def cycle_from(start: str) -> list[str] | None:
        stack = [(start, [])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for target, line in edges.get(node, []):
                step = [*path, f"{where(node, line)}: {node} imports {target}"]
                if target == start:
                    return step
                if target not in seen:
                    seen.add(target)
                    stack.append((target, step))
        return None

    cycles = [c for m in devices if (c := cycle_from(m)) is not None]
    assert not cycles, "import cycles in tgfx/devices:\n" + "\n\n".join("\n".join(c) for c in cycles)


def test_the_checker_sees_function_local_and_relative_imports(tmp_path: pathlib.Path) -> None:
    # the reader itself: an import inside a function counts, and `from tgfx.devices import native` is the submodule
    src = "def f():\n    from tgfx.lowering import execute\n    import tgfx.function\nfrom tgfx.devices import native\n"
    tree = ast.parse(src)
    found = [t for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
             for t in resolve("tgfx.ir.uop", node)]
    assert sorted(found) == ["tgfx.devices.native", "tgfx.function", "tgfx.lowering.execute"]
    assert [layer(t) for t in sorted(found)] == [2, 4, 3]
