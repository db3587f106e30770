"""Find and load the implementation under test; the katas, and the part of a kata a test is in.

`--impl` is the public contract shared by learners, graders and outside tools:

    (absent) or `solution`  -> katas/<kata>/solution.py   (the learner's file)
    `reference`             -> reference/<kata>.py
    any other value         -> a path to a Python file, inside or outside the repository
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[2]  # grading/judge/impl.py
KATAS_DIR = REPO_ROOT / "katas"


def repo_relative(path: str | Path) -> str:
    """`path` as a report names it: relative to the repository when inside it (a report read on
    another machine names no folder of the machine that wrote it), else as given."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


class ImplError(Exception):
    """The implementation under test could not be found or imported."""


def kata_names() -> list[str]:
    """Every kata in the repository: the folders of `katas/` that hold a `solution.py`."""
    return sorted(p.parent.name for p in KATAS_DIR.glob("*/solution.py"))


def kata_of(test_file: str | Path) -> str:
    """The kata a test file belongs to: the first folder below `katas/`."""
    path = Path(test_file).resolve()
    try:
        return path.relative_to(KATAS_DIR).parts[0]
    except (ValueError, IndexError):
        raise ImplError(
            f"{path} is not inside {KATAS_DIR}; kata tests live in katas/<kata>/"
        ) from None


def resolve_impl(kata: str, choice: str | None) -> Path:
    """The file that `--impl choice` names for `kata`."""
    if choice in (None, "", "solution"):
        path = KATAS_DIR / kata / "solution.py"
    elif choice == "reference":
        path = REPO_ROOT / "reference" / f"{kata}.py"
    else:
        path = Path(choice).expanduser().resolve()
    if not path.is_file():
        raise ImplError(
            f"--impl {choice!r}: no file at {path}. Use `solution` (the default), `reference`, "
            "or a path to a .py file."
        )
    return path


def load_module(path: Path, name: str) -> ModuleType:
    """Import the Python file at `path` as a fresh module called `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImplError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    # Registered so that dataclasses, pickling and typing inside the file can find their module.
    sys.modules[name] = module
    from grading.judge.refusals import no_threads_or_processes  # imports torch: only when loading

    try:
        with no_threads_or_processes():  # a thread started now would work unobserved later
            spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ImplError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def load_impl(kata: str, choice: str | None) -> ModuleType:
    """Load the implementation of `kata` that `--impl choice` names."""
    path = resolve_impl(kata, choice)
    return load_module(path, f"impl_under_test.{kata}")


def level_of(test_id: str, kata: str) -> int:
    """The level a test belongs to, from its file name `test_<kata>_<n>_<level>.py` (else 0).

    `test_id` is a pytest node id or a JUnit class name (dots for slashes)."""
    match = re.search(rf"test_{re.escape(kata)}_(\d+)_", test_id)
    return int(match.group(1)) if match else 0


def part_of(test_id: str, kata: str) -> str:
    """The part of a kata a test belongs to: its level ("2") from `test_<kata>_<n>_<level>.py`,
    else the rest of its file's name ("compile" for `test_<kata>_compile.py`, "gpu")."""
    match = re.search(rf"test_{re.escape(kata)}_(\d+)_", test_id)
    if match:
        return match.group(1)
    match = re.search(rf"test_{re.escape(kata)}_([a-z]\w*?)(?:\.py|::|$)", test_id)
    return match.group(1) if match else "other"


def part_name(part: str) -> str:
    """How a part is named to a person: "level 2", "compile tests"."""
    return f"level {part}" if part.isdigit() else f"{part} tests"


def by_part(item) -> tuple:
    """Sort key for parts (or (part, value) pairs): levels by number, then the others."""
    part = item[0] if isinstance(item, tuple) else item
    return (0, int(part), "") if part.isdigit() else (1, 0, part)
