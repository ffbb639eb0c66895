"""The layout's one-way data flow, from the modules' own import statements (top level: a lazy
import inside a function is how a stage loads torch only when it runs): no import cycles, and
each folder imports only the folders below it (DESIGN.md, "Layout")."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: folder -> the folders its modules may import at the top level (tools/ and mind/ may import all)
ALLOWED = {
    "ir": {"ir"},
    "dialects": {"ir", "dialects"},
    "parser": {"ir", "parser"},
    "analysis": {"ir", "dialects", "analysis"},
    "interpreters": {"ir", "dialects", "interpreters"},
    "codegen": {"ir", "dialects", "analysis", "codegen"},
    "target": {"ir", "dialects", "target"},
    "passes": {"ir", "dialects", "analysis", "codegen", "passes"},
    "runtime": {"ir", "runtime"},
}


def module_of(path: Path) -> str:
    parts = [p for p in path.relative_to(ROOT).with_suffix("").parts if p != "__init__"]
    return ".".join(parts[1:] if parts[0] == "mind" else parts)


def imports(path: Path) -> set[str]:
    """The mind modules a file imports at its top level, as `folder.module` names."""
    module = module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mind."):
            target = node.module.removeprefix("mind.")
        else:
            continue
        for alias in node.names:
            name = f"{target}.{alias.name}" if target else alias.name
            found.add(name if _exists(name) else target)
    return found


def _exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def graph() -> dict[str, set[str]]:
    files = [p for folder in [*ALLOWED, "tools"] for p in (ROOT / folder).rglob("*.py")]
    return {module_of(p): imports(p) for p in files}


def test_each_folder_imports_only_the_folders_below_it():
    wrong = [
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if module.split(".")[0] in ALLOWED
        and target.split(".")[0] not in ALLOWED[module.split(".")[0]]
    ]
    assert wrong == []


def test_no_import_cycles():
    edges, state, cycles = graph(), {}, []

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in edges.get(module, ()):
            if state.get(target) == "open":
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in edges:
        if module not in state:
            visit(module, [module])
    assert cycles == []
