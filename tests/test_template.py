"""Every kata has one shape: the same files, README sections, stub form and level numbers.

`template_problems(kata_dir)` lists how a kata folder departs from the template (empty when it
follows it); the scratch katas built in `tmp_path` below prove that it notices each departure.

The template, in short:
- files: README.md, hints.md (the hint ladder, one `## ` rung each), solution.py, pictures the
  README shows (.svg, .png), optional cases.py, `test_<kata>_<n>_<level>.py` per level,
  optional `test_<kata>_gpu.py` and `test_<kata>_compile.py`, optional `__init__.py`, and
  runnable extras (scripts with an `if __name__ == "__main__":` block);
- README: `# Title`, then `## The story`, `## The task` (with `### Level N: ...` and `### Errors`),
  `## Targets`, `## Running the tests` (a `-k "<n>_<level>"` filter per level and a sentence on
  `tests/mutants/<kata>/`), `## Hints`; other `##` sections only after Hints;
- stub: every unimplemented function has a docstring, `# TODO(level N): ...` and
  `raise NotImplementedError("level N: <Name> is not implemented yet")`;
- levels numbered alike in README, stub, test file names (and the reference, where it names them);
- bad input checked through a table of `grading.judge.errors.BadCall` and `assert_value_error`.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from grading.judge.impl import KATAS_DIR, kata_names

SECTIONS = ["The story", "The task", "Targets", "Running the tests", "Hints"]
LEVEL_FILE = re.compile(r"test_(?P<kata>\w+?)_(?P<n>\d+)_(?P<level>[a-z][a-z0-9_]*)\.py")
RAISE = re.compile(r"level (?P<n>\d+): (?P<name>[\w.]+) is not implemented yet")
TODO = re.compile(r"#\s*TODO\b(?P<rest>.*)")
TODO_FORM = re.compile(r"\(level (?P<n>\d+)\): \S")


def level_files(kata_dir: Path) -> dict[int, str]:
    """{n: "<n>_<level>"} from the kata's `test_<kata>_<n>_<level>.py` files."""
    found = {}
    for path in kata_dir.glob("test_*.py"):
        match = LEVEL_FILE.fullmatch(path.name)
        if match and match["kata"] == kata_dir.name:
            found[int(match["n"])] = f"{match['n']}_{match['level']}"
    return found


def _file_problems(kata_dir: Path) -> list[str]:
    kata = kata_dir.name
    problems = [
        f"missing {name}"
        for name in ("README.md", "hints.md", "solution.py")
        if not (kata_dir / name).is_file()
    ]
    fixed = {
        "README.md",
        "hints.md",
        "solution.py",
        "cases.py",
        "__init__.py",
        f"test_{kata}_gpu.py",
        f"test_{kata}_compile.py",
    }
    for path in sorted(kata_dir.iterdir()):
        name = path.name
        if name.startswith(".") or name == "__pycache__" or name in fixed:
            continue
        if path.suffix in (".svg", ".png"):  # pictures the README shows
            continue
        if name.startswith("test_"):
            match = LEVEL_FILE.fullmatch(name)
            if not match or match["kata"] != kata:
                problems.append(
                    f"{name}: test files are named test_{kata}_<n>_<level>.py, "
                    f"test_{kata}_gpu.py or test_{kata}_compile.py"
                )
        elif not (path.suffix == ".py" and 'if __name__ == "__main__":' in path.read_text()):
            problems.append(
                f"{name}: not a file of the template (helpers belong in cases.py; a runnable "
                'extra has an `if __name__ == "__main__":` block)'
            )
    levels = sorted(level_files(kata_dir))
    if levels != list(range(1, len(levels) + 1)):
        problems.append(f"test file levels {levels} should be 1, 2, ... without gaps")
    return problems


def _readme_problems(kata_dir: Path, levels: dict[int, str]) -> tuple[list[str], set[int]]:
    path = kata_dir / "README.md"
    if not path.is_file():
        return [], set()
    lines = path.read_text().splitlines()
    problems = []
    if not lines or not re.fullmatch(r"# \S.*", lines[0]):
        problems.append("README.md must start with '# <Title>'")
    sections: dict[str, list[str]] = {}
    current, fenced = None, False
    for line in lines[1:]:
        if line.startswith("```"):
            fenced = not fenced
        if fenced:  # code, not headings
            if current is not None:
                sections[current].append(line)
            continue
        if line.startswith("# "):
            problems.append(f"README.md has a second title: {line!r}")
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    order = list(sections)
    if order[: len(SECTIONS)] != SECTIONS:
        problems.append(
            f"README.md sections {order} should begin with {SECTIONS} in that order "
            "(others only after Hints)"
        )
    task = sections.get("The task", [])
    readme_levels = {int(m[1]) for line in task if (m := re.match(r"### Level (\d+): \S", line))}
    if "### Errors" not in [line.strip() for line in task]:
        problems.append(
            "README.md: '## The task' needs a '### Errors' subsection (the error contract)"
        )
    if not readme_levels:
        problems.append("README.md: '## The task' needs '### Level N: ...' subsections")
    running = "\n".join(sections.get("Running the tests", []))
    for n, name in sorted(levels.items()):
        if f'-k "{name}"' not in running:
            problems.append(
                f"README.md: '## Running the tests' needs a filter for level {n}: -k \"{name}\""
            )
    if f"tests/mutants/{kata_dir.name}/" not in running:
        problems.append(
            f"README.md: '## Running the tests' should say that tests/mutants/{kata_dir.name}/ "
            "is a catalogue of the mistakes the tests catch"
        )
    return problems, readme_levels


def _stub_problems(kata_dir: Path) -> tuple[list[str], set[int]]:
    path = kata_dir / "solution.py"
    if not path.is_file():
        return [], set()
    source = path.read_text()
    lines = source.splitlines()
    problems, levels = [], set()
    for number, line in enumerate(lines, 1):
        todo = TODO.search(line)
        if todo and not TODO_FORM.match(todo["rest"]):
            problems.append(
                f"solution.py:{number}: write TODOs as '# TODO(level N): <what to do>', "
                f"not {line.strip()!r}"
            )

    def visit(body: list[ast.stmt], prefix: str, class_doc: bool = False) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.", ast.get_docstring(node) is not None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                check_function(node, f"{prefix}{node.name}", class_doc and node.name == "__init__")

    def check_function(node: ast.FunctionDef, qualname: str, documented: bool) -> None:
        raises = [
            n
            for n in ast.walk(node)
            if isinstance(n, ast.Raise)
            and n.exc is not None
            and "NotImplementedError" in ast.unparse(n.exc)
        ]
        if not raises:
            return
        where = f"solution.py: {qualname}"
        if ast.get_docstring(node) is None and not documented:  # __init__: the class's
            problems.append(f"{where} needs a docstring with the math and shapes")
        shown = qualname.removesuffix(".__init__")
        accepted = {qualname, shown}
        raise_levels = set()
        for r in raises:
            args = getattr(r.exc, "args", [])
            message = args[0].value if args and isinstance(args[0], ast.Constant) else None
            match = RAISE.fullmatch(message) if isinstance(message, str) else None
            if not match or match["name"] not in accepted:
                problems.append(
                    f'{where} should raise NotImplementedError("level N: {shown} is not '
                    f'implemented yet"), not {ast.unparse(r.exc)}'
                )
            else:
                raise_levels.add(int(match["n"]))
        body = lines[node.lineno - 1 : node.end_lineno]
        todo_levels = {
            int(m["n"])
            for line in body
            if (t := TODO.search(line)) and (m := TODO_FORM.match(t["rest"]))
        }
        if not todo_levels:
            problems.append(f"{where} needs a '# TODO(level N): <what to do>' line")
        elif raise_levels and not raise_levels <= todo_levels:
            problems.append(
                f"{where}: its TODO says level {sorted(todo_levels)}, its raise says "
                f"{sorted(raise_levels)}"
            )
        levels.update(raise_levels | todo_levels)

    visit(ast.parse(source).body, "")
    return problems, levels


def template_problems(kata_dir: Path) -> list[str]:
    """How the kata in `kata_dir` departs from the template; [] when it follows it.

    The kata's reference is read from `<kata_dir>/../../reference/<kata>.py` when it exists.
    """
    kata_dir = Path(kata_dir)
    problems = _file_problems(kata_dir)
    files = level_files(kata_dir)
    readme, readme_levels = _readme_problems(kata_dir, files)
    stub, stub_levels = _stub_problems(kata_dir)
    problems += readme + stub
    named = {
        "README (### Level N)": readme_levels,
        "solution.py": stub_levels,
        "test file names": set(files),
    }
    reference = kata_dir.parent.parent / "reference" / f"{kata_dir.name}.py"
    if reference.is_file():
        comments = re.findall(r"#.*", reference.read_text())
        mentioned = {int(n) for c in comments for n in re.findall(r"\b[Ll]evel (\d+)\b", c)}
        if mentioned:
            named["reference"] = mentioned
    # README and test files list the same levels; the stub and the reference name only those (a
    # level may add to an earlier level's function, and a reference may group levels).
    readme_levels_set = named["README (### Level N)"]
    if named["test file names"] != readme_levels_set or any(
        not levels <= readme_levels_set for levels in named.values()
    ):
        problems.append(
            "level numbers disagree: " + ", ".join(f"{k} {sorted(v)}" for k, v in named.items())
        )
    tests = [p.read_text() for p in kata_dir.glob("test_*.py")]
    cases = kata_dir / "cases.py"
    tables = tests + ([cases.read_text()] if cases.is_file() else [])
    has_table = any("BadCall(" in t for t in tables)
    if not (has_table and any("assert_value_error(" in t for t in tests)):
        problems.append(
            "no bad-input table: list bad calls as grading.judge.errors.BadCall and check them "
            "with assert_value_error"
        )
    return problems


def duplicate_test_files(katas_dir: Path) -> dict[str, list[str]]:
    """Test file names used by more than one kata: {file name: [katas]}."""
    owners = defaultdict(list)
    for path in sorted(Path(katas_dir).glob("*/test_*.py")):
        owners[path.name].append(path.parent.name)
    return {name: katas for name, katas in owners.items() if len(katas) > 1}


# ----------------------------------------------------------------------------------------------
# the repository's katas


@pytest.mark.parametrize("kata", kata_names())
def test_kata_follows_the_template(kata):
    problems = template_problems(KATAS_DIR / kata)
    assert not problems, f"katas/{kata} departs from the template:\n- " + "\n- ".join(problems)


def test_test_file_names_are_unique_across_katas():
    duplicates = duplicate_test_files(KATAS_DIR)
    assert not duplicates, f"test file names shared by several katas: {duplicates}"


# ----------------------------------------------------------------------------------------------
# the check itself, on scratch katas

GOOD_README = """# Demo: a scratch kata

## The story

Once upon a time.

## The task

### Level 1: add

### Level 2: scale

### Errors

- `add`: `a` not a tensor.

## Targets

- Exact.

## Running the tests

    nox -s demo -- -k "1_add"
    nox -s demo -- -k "2_scale"

The files in `tests/mutants/demo/` are a catalogue of the mistakes these tests catch.

## Hints

1. Add.

## Further reading

A paper.
"""

GOOD_STUB = '''"""The demo kata."""


def add(a, b):
    """a + b, elementwise: [N] + [N] -> [N]."""
    # TODO(level 1): add them.
    raise NotImplementedError("level 1: add is not implemented yet")


class Scaler:
    """Multiplies by a factor."""

    def __init__(self, factor):
        # TODO(level 2): remember the factor.
        raise NotImplementedError("level 2: Scaler is not implemented yet")

    def scale(self, x):
        """factor * x: [N] -> [N]."""
        # TODO(level 2): multiply.
        raise NotImplementedError("level 2: Scaler.scale is not implemented yet")
'''

GOOD_TEST = """from grading.judge.errors import BadCall, assert_value_error

BAD = [BadCall("add(1, None)", "no tensor", lambda impl: impl.add(1, None), names="b")]


def test_bad_input(impl):
    assert_value_error(BAD[0], impl)
"""


def scratch_kata(root: Path, kata: str = "demo") -> Path:
    """A minimal kata that follows the template, at <root>/katas/<kata>, with its reference."""
    kata_dir = root / "katas" / kata
    kata_dir.mkdir(parents=True)
    (kata_dir / "README.md").write_text(GOOD_README.replace("demo", kata))
    (kata_dir / "solution.py").write_text(GOOD_STUB)
    (kata_dir / "hints.md").write_text("# Hints: demo\n\n## Hint 1\n\nAdd them.\n")
    (kata_dir / "cases.py").write_text('"""Strategies."""\n')
    (kata_dir / f"test_{kata}_1_add.py").write_text(GOOD_TEST)
    (kata_dir / f"test_{kata}_2_scale.py").write_text("def test_scale(impl):\n    pass\n")
    (kata_dir / f"test_{kata}_gpu.py").write_text("")
    (kata_dir / "experiment.py").write_text('if __name__ == "__main__":\n    print(1)\n')
    (root / "reference").mkdir(exist_ok=True)
    (root / "reference" / f"{kata}.py").write_text("# Level 1: add\n# Level 2: scale\n")
    return kata_dir


def test_a_scratch_kata_that_follows_the_template_passes(tmp_path):
    assert template_problems(scratch_kata(tmp_path)) == []


def _edit(name: str, old: str, new: str):
    def apply(kata_dir: Path) -> None:
        path = kata_dir / name
        text = path.read_text()
        assert old in text, f"scratch kata: {old!r} not in {name}"
        path.write_text(text.replace(old, new, 1))

    return apply


def _rename(old: str, new: str):
    return lambda kata_dir: (kata_dir / old).rename(kata_dir / new)


def _swap(first: str, second: str):
    """Swap two README headings."""

    def apply(kata_dir: Path) -> None:
        path = kata_dir / "README.md"
        text = path.read_text().replace(first, "\0").replace(second, first)
        path.write_text(text.replace("\0", second))

    return apply


def _write(name: str, text: str):
    return lambda kata_dir: (kata_dir / name).write_text(text)


BREAKAGES = {
    # files
    "no README": (lambda d: (d / "README.md").unlink(), "missing README.md"),
    "a helper module beside cases.py": (_write("support.py", "X = 1\n"), "support.py"),
    "a test file without a level": (_rename("test_demo_1_add.py", "test_demo.py"), "test_demo.py"),
    "a test file named for another kata": (
        _rename("test_demo_2_scale.py", "test_other_2_scale.py"),
        "test_other_2_scale.py",
    ),
    "a gap in the test levels": (_rename("test_demo_2_scale.py", "test_demo_3_scale.py"), "gaps"),
    "a data file": (_write("weights.json", "{}"), "weights.json"),
    # README
    "no story": (_edit("README.md", "## The story", "## Background"), "sections"),
    "a section before the hints": (
        _edit("README.md", "## Running the tests", "## Background\n\n## Running the tests"),
        "sections",
    ),
    "sections out of order": (_swap("## Targets", "## Hints"), "sections"),
    "no error contract": (_edit("README.md", "### Errors", "### Mistakes"), "### Errors"),
    "no -k filter for a level": (_edit("README.md", '-k "2_scale"', "-x"), '-k "2_scale"'),
    "no word on the mutants": (_edit("README.md", "tests/mutants/demo/", "the mutants"), "mutants"),
    "a second title": (_edit("README.md", "## Hints", "# Hints"), "title"),
    # stub
    "an old TODO form": (
        _edit("solution.py", "# TODO(level 1): add them.", "# TODO: task 1"),
        "TODO",
    ),
    "a bare NotImplementedError": (
        _edit(
            "solution.py",
            'NotImplementedError("level 1: add is not implemented yet")',
            "NotImplementedError(TODO)",
        ),
        "add is not implemented yet",
    ),
    "the wrong name in the raise": (
        _edit("solution.py", "level 2: Scaler.scale is", "level 2: scale is"),
        "Scaler.scale",
    ),
    "TODO and raise at different levels": (
        _edit("solution.py", "# TODO(level 2): multiply.", "# TODO(level 1): multiply."),
        "TODO says level",
    ),
    "no docstring": (
        _edit("solution.py", '    """a + b, elementwise: [N] + [N] -> [N]."""\n', ""),
        "docstring",
    ),
    # levels
    "a README level the stub lacks": (
        _edit("README.md", "### Errors", "### Level 3: extra\n\n### Errors"),
        "disagree",
    ),
    "a reference level the README lacks": (
        lambda d: (d.parent.parent / "reference" / "demo.py").write_text("# Level 4: more\n"),
        "disagree",
    ),
    # bad input
    "no bad-input table": (
        _write("test_demo_1_add.py", "def test_add(impl):\n    pass\n"),
        "BadCall",
    ),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_a_scratch_kata_that_breaks_the_template_fails(tmp_path, breakage):
    kata_dir = scratch_kata(tmp_path)
    breaks, expected = BREAKAGES[breakage]
    breaks(kata_dir)
    problems = template_problems(kata_dir)
    assert any(expected in problem for problem in problems), (
        f"{breakage}: expected a problem mentioning {expected!r}, got {problems}"
    )


def test_test_file_names_shared_by_two_katas_are_found(tmp_path):
    scratch_kata(tmp_path, "demo")
    other = scratch_kata(tmp_path, "other")
    (other / "test_other_1_add.py").rename(other / "test_demo_1_add.py")
    assert duplicate_test_files(tmp_path / "katas") == {"test_demo_1_add.py": ["demo", "other"]}
