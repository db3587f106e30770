"""Mutants: wrong implementations written as small patches on a kata's reference.

A mutant is one bug a learner really makes. Its file, `tests/mutants/<kata>/<name>.py`, holds
only data, read without running it:

    \"\"\"Bug: the mistake in one line.

    Why learners make it, and what it breaks.
    \"\"\"

    CAUGHT_BY = ["test_crop_rolls_back_every_layer"]   # tests of the kata, one of which must fail
    EDITS = [                                          # text replacements on reference/<kata>.py
        ("self.lengths[:] = length", "self.lengths[0] = length"),
    ]
    REPLACE = {                                        # optional: whole definitions replaced
        "KVCache.crop": '''
            def crop(self, length):
                ...
        ''',
    }

Each `old` text must occur exactly once in the reference and each name in REPLACE must be a
top-level function or class (or `Class.method`) there; otherwise the mutant is stale and
`mutated_source` raises `StaleMutant`, so a change to the reference never silently turns a mutant
into a copy of the right answer. Triton kernels are patched the same way, as source text.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from grading.impl import REPO_ROOT

MUTANTS_DIR = REPO_ROOT / "tests" / "mutants"


class StaleMutant(Exception):
    """A mutant's edits no longer apply to the reference it patches."""


@dataclass(frozen=True)
class Mutant:
    path: Path
    kata: str
    doc: str
    caught_by: tuple[str, ...]
    edits: tuple[tuple[str, str], ...] = ()
    replace: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.kata}/{self.path.stem}"

    @property
    def bug(self) -> str:
        """The docstring's first line."""
        return self.doc.splitlines()[0] if self.doc else ""

    @property
    def reference(self) -> Path:
        return REPO_ROOT / "reference" / f"{self.kata}.py"


def all_mutants(kata: str | None = None) -> list[Path]:
    """Every mutant file, or those of one kata, sorted."""
    pattern = f"{kata}/*.py" if kata else "*/*.py"
    return sorted(p for p in MUTANTS_DIR.glob(pattern) if p.name != "__init__.py")


def read_mutant(path: Path) -> Mutant:
    """Parse a mutant file without running it."""
    path = Path(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in ("CAUGHT_BY", "EDITS", "REPLACE"):
                try:
                    values[target.id] = ast.literal_eval(node.value)
                except ValueError as exc:
                    raise StaleMutant(f"{path}: {target.id} must be a literal ({exc})") from None
    caught_by = values.get("CAUGHT_BY")
    if isinstance(caught_by, str):
        caught_by = [caught_by]
    if not caught_by:
        raise StaleMutant(f"{path}: CAUGHT_BY must name the test(s) that catch this bug")
    edits = tuple(tuple(edit) for edit in values.get("EDITS", ()))
    if any(len(edit) != 2 or not all(isinstance(s, str) for s in edit) for edit in edits):
        raise StaleMutant(f"{path}: EDITS must be a list of (old, new) string pairs")
    replace = dict(values.get("REPLACE", {}))
    if not edits and not replace:
        raise StaleMutant(f"{path}: a mutant needs EDITS or REPLACE")
    return Mutant(
        path=path,
        kata=path.parent.name,
        doc=ast.get_docstring(tree) or "",
        caught_by=tuple(caught_by),
        edits=edits,
        replace=replace,
    )


def read_adversary(path: Path) -> tuple[Mutant, str]:
    """A cheat of tests/adversarial/: the mutant format, plus KATA (the reference it patches),
    TESTS (the kata tests to run) and EXPECT (a piece of the message its guard must print)."""
    tree = ast.parse(Path(path).read_text())
    values = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }
    mutant = Mutant(
        path=Path(path),
        kata=values["KATA"],
        doc=ast.get_docstring(tree) or "",
        caught_by=tuple(values["TESTS"]),
        edits=tuple(tuple(e) for e in values.get("EDITS", ())),
        replace=dict(values.get("REPLACE", {})),
    )
    return mutant, values["EXPECT"]


def _definition(tree: ast.Module, qualname: str) -> ast.AST | None:
    """The top-level function or class `qualname` names, or a method as `Class.method`."""
    scope: list[ast.stmt] = tree.body
    node = None
    for part in qualname.split("."):
        node = next(
            (
                n
                for n in scope
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.name == part
            ),
            None,
        )
        if node is None:
            return None
        scope = getattr(node, "body", [])
    return node


def _replace_definition(source: str, qualname: str, new: str, where: Path) -> str:
    node = _definition(ast.parse(source), qualname)
    if node is None:
        raise StaleMutant(f"{where}: REPLACE names {qualname!r}, which the reference lacks")
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = source.splitlines(keepends=True)
    indent = " " * node.col_offset
    body = textwrap.indent(textwrap.dedent(new).strip("\n") + "\n", indent)
    return "".join(lines[: first - 1]) + body + "".join(lines[node.end_lineno :])


def mutated_source(mutant: Mutant) -> str:
    """The reference's source with the mutant's edits applied; StaleMutant if they don't fit."""
    source = mutant.reference.read_text()
    for old, new in mutant.edits:
        count = source.count(old)
        if count != 1:
            raise StaleMutant(
                f"{mutant.path}: the text to replace occurs {count} times in "
                f"reference/{mutant.kata}.py (it must occur exactly once):\n{old}"
            )
        source = source.replace(old, new)
    for qualname, new in mutant.replace.items():
        source = _replace_definition(source, qualname, new, mutant.path)
    header = f"# Mutant {mutant.name}: {mutant.bug}\n"
    return header + source


def write_mutant(mutant: Mutant, directory: Path) -> Path:
    """Write the mutated reference as `<directory>/<name>.py`, ready for `--impl`."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{mutant.path.stem}.py"
    out.write_text(mutated_source(mutant))
    return out


@dataclass
class Verdict:
    """What the kata's tests said of one mutant."""

    returncode: int
    failed: list[str]  # test function names that failed or errored
    output: str

    def caught_by(self, names: tuple[str, ...]) -> bool:
        return self.returncode == 1 and bool(set(self.failed) & set(names))


def _failed_tests(junit: Path) -> list[str]:
    import xml.etree.ElementTree as ET

    if not junit.exists():
        return []
    failed = []
    for case in ET.parse(junit).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(case.get("name", "").split("[")[0])
    return failed


def test_ids(kata: str, names: tuple[str, ...]) -> list[str]:
    """Node ids (`katas/<kata>/<file>::<name>`) of the kata's tests with these function names."""
    ids = []
    for path in sorted((REPO_ROOT / "katas" / kata).glob("test_*.py")):
        text = path.read_text()
        for name in names:
            if re.search(rf"^\s*def {re.escape(name)}\(", text, flags=re.M):
                ids.append(f"katas/{kata}/{path.name}::{name}")
    return ids


def judge(mutant: Mutant, workdir: Path, *extra: str, timeout: float = 600) -> Verdict:
    """Run the tests named in CAUGHT_BY against the mutant, in a fresh pytest process, stopping at
    the first failure (each selected test is one written to catch it). GPU tests are rehearsed
    on the CPU (`--rehearse`): a bug on a GPU-only path is caught before any GPU runs it."""
    import os
    import subprocess
    import sys

    impl = write_mutant(mutant, workdir)
    junit = workdir / f"{mutant.path.stem}.xml"
    env = dict(os.environ, CI="1", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    selected = test_ids(mutant.kata, mutant.caught_by)
    if len(selected) < len(mutant.caught_by):  # a name no test has: let pytest say so
        selected = [f"katas/{mutant.kata}", "-k", " or ".join(mutant.caught_by)]
    elif all("_gpu.py::" in test for test in selected):  # rehearsed on the CPU
        selected = [*selected, "-x", "--rehearse"]
    else:
        selected = [*selected, "-x"]
    command = [
        sys.executable, "-m", "pytest", *selected, "-q", "-p", "no:cacheprovider",
        f"--impl={impl}", f"--junitxml={junit}", *extra,
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    return Verdict(done.returncode, _failed_tests(junit), done.stdout + done.stderr)


def main(argv: list[str] | None = None) -> int:
    """`python -m grading.mutants [PATH ...]`: check mutants (all by default), one line each."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("paths", nargs="*", type=Path, help="mutant files or kata folders")
    args = parser.parse_args(argv)
    paths: list[Path] = []
    for p in args.paths or [MUTANTS_DIR]:
        paths += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    escaped = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            try:
                mutant = read_mutant(path)
                verdict = judge(mutant, Path(tmp))
            except StaleMutant as exc:
                print(f"STALE    {path}: {exc}")
                escaped += 1
                continue
            ok = verdict.caught_by(mutant.caught_by)
            escaped += not ok
            status = "caught " if ok else "ESCAPED"
            print(f"{status}  {mutant.name}: {mutant.bug} (failed: {', '.join(verdict.failed)})")
    return 1 if escaped else 0


if __name__ == "__main__":
    raise SystemExit(main())
