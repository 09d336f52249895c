"""The layering ARCHITECTURE.md §1 states, read from the source.

Every import counts: module level, inside functions (the lazy ones) and under
``if TYPE_CHECKING:``. The whole tree — ``mmctl/``, ``bench/``, ``scripts/`` —
must have no import circle, and no mmctl module may import one of a higher
layer. Reading the source (not ``sys.modules`` after an import) sees the
imports a run does not take.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = ("mmctl", "bench", "scripts")

#: The layers, lowest first (the data flows up: media → preprocessing → prompt →
#: models → request → transport → client → the commands). A module may import
#: its own layer's modules (without a circle) and lower layers' only.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "mmctl.errors",
        "mmctl.choices",
        "mmctl.settings",
        "mmctl.fileio",
        "mmctl.timing",
        "mmctl.schemas",
    ),
    ("mmctl._version",),
    ("mmctl.media", "mmctl.checkpoint", "mmctl.dataset"),
    ("mmctl.values", "mmctl.modality"),
    ("mmctl.preprocessing",),
    ("mmctl.prompt",),
    ("mmctl.models",),
    ("mmctl.wire",),
    ("mmctl.request",),
    ("mmctl.transport",),
    ("mmctl.client", "mmctl.signals"),
    ("mmctl.offline", "mmctl.worker", "mmctl.bench", "mmctl.run_batch", "mmctl.demo"),
    ("mmctl.request_file",),
    ("mmctl.cli",),
    ("mmctl", "mmctl._entry", "mmctl.__main__"),
)


def modules() -> dict[str, Path]:
    found = {}
    for tree in TREES:
        for path in (ROOT / tree).rglob("*.py"):
            if "_gen" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The modules of the tree ``name`` imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            # ``from pkg import sub`` imports the submodule; ``from m import name``, m.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            found = _known(target, known)
            if found is None and not name.startswith("mmctl"):
                # bench/ and scripts/ import their siblings by file name (sys.path).
                sibling = f"{package}.{target}"
                found = sibling if sibling in known else None
            if found is not None and found != name:
                yield found


def _known(target: str, known: dict[str, Path]) -> str | None:
    """The tree's module ``target`` is (or is inside, for ``from m import name``)."""
    if not target.startswith(TREES):
        return None
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imports(name, path, known)) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
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
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def layer(name: str) -> int | None:
    """The layer of an mmctl module (the longest matching prefix); ``None`` outside mmctl."""
    best: tuple[int, int] | None = None
    for rank, members in enumerate(LAYERS):
        for prefix in members:
            inside = name == prefix or name.startswith(prefix + ".")
            if inside and (best is None or len(prefix) > best[1]):
                best = (rank, len(prefix))
    return None if best is None else best[0]


def test_the_tree_has_no_import_circle():
    assert circles(graph()) == []


def test_no_module_imports_a_higher_layer():
    edges = graph()
    unplaced = sorted(m for m in edges if m.startswith("mmctl") and layer(m) is None)
    assert unplaced == [], "every mmctl module belongs to a layer (add it to LAYERS)"
    upward = sorted(
        f"{a} ({layer(a)}) -> {b} ({layer(b)})"
        for a, targets in edges.items()
        if a.startswith("mmctl")
        for b in targets
        if (layer(b) or 0) > (layer(a) or 0)
    )
    assert upward == []


def test_the_checks_see_what_they_claim():
    """A circle and a back-arrow planted in a copy of the graph are found."""
    edges = graph()
    planted = {k: set(v) for k, v in edges.items()}
    planted["mmctl.media.probe"].add("mmctl.models.family")
    planted["mmctl.models.family"].add("mmctl.media.probe")
    assert any({"mmctl.media.probe", "mmctl.models.family"} <= set(c) for c in circles(planted))
    assert layer("mmctl.media.probe") < layer("mmctl.models.family")  # type: ignore[operator]
    assert "mmctl.values.items" in edges["mmctl.models.family"]  # lazy and typing imports read
    typing_only = "mmctl.prompt.tokenizer"  # family.py imports it for the ModelView protocol
    assert typing_only in edges["mmctl.models.family"]
