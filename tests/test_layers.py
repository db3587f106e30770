"""grading/ is layered by job, and its imports go one way: down.

    learner, gpu      the learner's tools; the GPU check, ahead-of-time compilation
    grade             grading submissions and classes
    judge             what runs inside every kata's pytest run
    model             the shared tiny Llama and what feeds it (grading.naive: its old name)
    devices           where code runs, how a call is timed

A module may import from its own package and from the layers below it, never from a layer above
or from a neighbour on its own layer; and no chain of imports comes back to where it started.
Every import counts, also one inside a function: moving an import into a function hides a
circle, it does not end it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from grading.judge.impl import REPO_ROOT

GRADING = REPO_ROOT / "grading"
LAYERS = {
    "grading.devices": 0,
    "grading.model": 1,
    "grading.judge": 2,
    "grading.grade": 3,
    "grading.learner": 4,
    "grading.gpu": 4,
}
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(GRADING.rglob("*.py"))}


def package_of(name: str) -> str:
    """The job a module belongs to: `grading.judge.guards` -> `grading.judge`."""
    package = ".".join(name.split(".")[:2])
    return "grading.model" if package == "grading.naive" else package  # its old import path


def imports(source: str, name: str, known: dict[str, Path], package: bool = False) -> set[str]:
    """The modules of grading/ (in `known`) that module `name`, whose text is `source`, imports
    anywhere in it (`package`: it is a package's __init__.py)."""
    here = name if package else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {
        name: imports(path.read_text(), name, known, path.name == "__init__.py")
        for name, path in known.items()
    }


def test_every_module_has_a_layer():
    unplaced = [m for m in modules() if m != "grading" and package_of(m) not in LAYERS]
    assert not unplaced, (
        f"{unplaced} sit in no layer of grading/: put each in the package of its job "
        f"({', '.join(LAYERS)}; see grading/README.md), or add its layer to LAYERS here"
    )


def test_imports_only_go_down():
    upward = []
    for module, targets in graph().items():
        if module == "grading":
            continue
        here = package_of(module)
        for target in sorted(targets):
            there = package_of(target)
            if target == "grading" or there == here or LAYERS[there] < LAYERS[here]:
                continue
            upward.append(f"{module} imports {target} ({there} is not below {here})")
    assert not upward, "imports that go up or sideways in grading/:\n" + "\n".join(upward)


def find_circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `edges` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_circles():
    circle = find_circle(graph())
    assert circle is None, "a circle of imports in grading/: " + " -> ".join(circle or [])


def test_the_circle_finder_finds_circles():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("source, expected", [
    ("from grading.judge import guards\n", {"grading.judge.guards", "grading.judge"}),
    ("def f():\n    from grading.grade.task import grade_task\n", {"grading.grade.task"}),
    ("from .llama import TinyLlama\n", {"grading.model.llama"}),
])  # fmt: skip
def test_imports_are_read_wherever_they_are(source, expected):
    assert imports(source, "grading.model.hf", modules()) == expected


def test_no_module_is_longer_than_500_lines():
    long = {
        str(p.relative_to(REPO_ROOT)): n
        for p in GRADING.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these by concern (at most {MAX_LINES} lines each): {long}"


def test_every_file_and_command_of_grading_named_in_the_docs_exists():
    """The READMEs, the docstrings and the noxfile name grading's files and commands by their
    paths: each must be there (a move that leaves a README pointing at a file gone fails here)."""
    texts = [*REPO_ROOT.glob("*.md"), *REPO_ROOT.glob("katas/*/*.md"), REPO_ROOT / "noxfile.py"]
    texts += [*GRADING.rglob("*.md"), *GRADING.rglob("*.py"), *REPO_ROOT.glob("katas/*/*.py")]
    missing = set()
    for file in texts:
        text = file.read_text()
        for path in re.findall(r"(?<![~/\w])grading/[\w/]+\.py\b", text):
            if not (REPO_ROOT / path).is_file():
                missing.add(f"{file.relative_to(REPO_ROOT)}: {path}")
        commands = r"""(?:-m["',\s]+|run_tool\(session, ")(grading(?:\.\w+)+)"""
        for module in re.findall(commands, text):
            path = REPO_ROOT.joinpath(*module.split("."))
            if not (path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()):
                missing.add(f"{file.relative_to(REPO_ROOT)}: python -m {module}")
    assert not missing, "named but not there:\n" + "\n".join(sorted(missing))
