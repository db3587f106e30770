"""A learner's commands: one hint at a time, a fresh stub, and tests that re-run on save.

    python -m grading.learner.tools hint KATA [--all]   # the next rung of the hint ladder
    python -m grading.learner.tools reset KATA          # the stub back, your solution backed up
    python -m grading.learner.tools watch KATA [-- pytest args]   # the tests again on every save

The nox sessions `hint`, `reset` and `watch` call these. State (hints shown, backups) lives in
.katas/ at the repository's root, which git ignores.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

from grading.judge.impl import KATAS_DIR, REPO_ROOT, kata_names
from grading.learner.progress import record_path

STATE_DIR = REPO_ROOT / ".katas"
UNTOUCHED = "not implemented yet"  # every stub function raises with these words


# ----------------------------------------------------------------------------------------------
# hint


def hint_ladder(kata: str) -> list[str]:
    """The rungs of the kata's hint ladder, from katas/<kata>/hints.md: one per `## ` heading."""
    path = KATAS_DIR / kata / "hints.md"
    if not path.exists():
        raise SystemExit(f"{kata} has no hints.md")
    parts = re.split(r"^(?=## )", path.read_text(), flags=re.M)
    return [part.strip() for part in parts if part.startswith("## ")]


def hint(kata: str, *, show_all: bool = False, state_dir: Path = STATE_DIR) -> str:
    """The next rung (or every rung shown so far, with `show_all`), remembering how far you got."""
    ladder = hint_ladder(kata)
    state_file = state_dir / "hints.json"
    shown = json.loads(state_file.read_text()) if state_file.exists() else {}
    seen = shown.get(kata, 0)
    if show_all:
        rungs = ladder[:seen] or ["No hints shown yet: `nox -s hint -- " + kata + "` shows one."]
        return "\n\n".join(rungs)
    if seen >= len(ladder):
        return f"That was the last of {len(ladder)} hints for {kata}: see reference/{kata}.py."
    shown[kata] = seen + 1
    state_file.parent.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps(shown, indent=1) + "\n")
    return f"Hint {seen + 1} of {len(ladder)} for {kata}:\n\n{ladder[seen]}"


# ----------------------------------------------------------------------------------------------
# reset


def pristine_stub(kata: str) -> str:
    """The newest version of the stub in git's history that is still untouched."""
    relative = f"katas/{kata}/solution.py"
    log = subprocess.run(
        ["git", "log", "--format=%H", "--", relative], cwd=REPO_ROOT, capture_output=True, text=True
    )
    for commit in log.stdout.split():
        text = subprocess.run(
            ["git", "show", f"{commit}:{relative}"], cwd=REPO_ROOT, capture_output=True, text=True
        ).stdout
        if UNTOUCHED in text:
            return text
    raise SystemExit(f"no untouched {relative} found in git's history")


def reset(kata: str, *, state_dir: Path = STATE_DIR) -> Path:
    """Put the stub back, keeping the current solution in .katas/backups/<kata>/ (returned)."""
    solution = KATAS_DIR / kata / "solution.py"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    backup = state_dir / "backups" / kata / f"solution-{stamp}.py"
    backup.parent.mkdir(parents=True, exist_ok=True)
    backup.write_text(solution.read_text())
    solution.write_text(pristine_stub(kata))
    record_path(kata, state_dir).unlink(missing_ok=True)  # progress starts again too
    return backup


# ----------------------------------------------------------------------------------------------
# watch


def watch(kata: str, pytest_args: list[str]) -> None:
    """Run the kata's tests now and again whenever a file of the kata is saved (Ctrl-C stops)."""
    try:
        from watchfiles import PythonFilter
        from watchfiles import watch as watch_files
    except ImportError:
        raise SystemExit(
            "watch needs watchfiles: pip install watchfiles (nox -s watch does)"
        ) from None
    command = [sys.executable, "-m", "pytest", f"katas/{kata}", *pytest_args]
    folder = KATAS_DIR / kata
    subprocess.run(command, cwd=REPO_ROOT)
    waiting = True
    changes_seen = watch_files(
        folder, watch_filter=PythonFilter(), yield_on_timeout=True, rust_timeout=500
    )
    for changes in changes_seen:
        if not changes:  # the watcher is ready, or nothing happened for a while
            if waiting:
                print(f"watching {folder.relative_to(REPO_ROOT)}/ for saves (Ctrl-C stops)")
                waiting = False
            continue
        names = sorted({Path(path).name for _, path in changes})
        print(f"\n--- {', '.join(names)} changed: re-running ---\n", flush=True)
        subprocess.run(command, cwd=REPO_ROOT)
        waiting = True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grading.learner.tools", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("hint", help="show the next hint")
    p.add_argument("kata", choices=kata_names())
    p.add_argument("--all", action="store_true", help="show every hint seen so far again")
    p = commands.add_parser("reset", help="restore the stub, keeping a backup")
    p.add_argument("kata", choices=kata_names())
    p = commands.add_parser("watch", help="re-run the tests on every save")
    p.add_argument("kata", choices=kata_names())
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments for pytest")
    args = parser.parse_args(argv)
    if args.command == "hint":
        print(hint(args.kata, show_all=args.all))
    elif args.command == "reset":
        backup = reset(args.kata)
        print(f"katas/{args.kata}/solution.py is the stub again; your version is in {backup}")
    else:
        watch(args.kata, [a for a in args.pytest_args if a != "--"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
