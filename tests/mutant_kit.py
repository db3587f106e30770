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

from grading.judge.impl import REPO_ROOT

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


def _pytest_args(mutant: Mutant, impl: Path, junit: Path, extra: tuple[str, ...]) -> list[str]:
    """pytest's arguments for the tests named in CAUGHT_BY against `impl`, stopping at the first
    failure (each selected test is one written to catch the mutant)."""
    selected = test_ids(mutant.kata, mutant.caught_by)
    if len(selected) < len(mutant.caught_by):  # a name no test has: let pytest say so
        selected = [f"katas/{mutant.kata}", "-k", " or ".join(mutant.caught_by)]
    elif all("_gpu.py::" in test for test in selected):  # rehearsed on the CPU
        selected = [*selected, "-x", "--rehearse"]
    else:
        selected = [*selected, "-x"]
    return [
        *selected, "-q", "-p", "no:cacheprovider", f"--impl={impl}", f"--junitxml={junit}",
        "--hypothesis-profile=judge", *extra,
    ]  # fmt: skip


# What every judged run sees: the derandomised `ci` examples (the `judge` profile, which does not
# shrink a failure), one thread, no bytecode files.
JUDGE_ENV = {"CI": "1", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
# A judged run is limited in CPU seconds, which do not depend on how loaded the machine is; the
# wall-clock limit, this many times longer, only stops a run that waits without computing.
WALL_PER_CPU_SECOND = 10


def limit_cpu(seconds: float) -> None:
    """Kill this process (SIGXCPU) once it has computed for `seconds`."""
    import math
    import resource

    limit = math.ceil(seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit))


def judge(mutant: Mutant, workdir: Path, *extra: str, timeout: float = 600) -> Verdict:
    """Run the tests named in CAUGHT_BY against the mutant, in a fresh pytest process, for at most
    `timeout` CPU seconds. GPU tests are rehearsed on the CPU (`--rehearse`): a bug on a GPU-only
    path is caught before any GPU runs it."""
    import os
    import subprocess
    import sys

    impl = write_mutant(mutant, workdir)
    junit = workdir / f"{mutant.path.stem}.xml"
    command = [sys.executable, "-m", "pytest", *_pytest_args(mutant, impl, junit, extra)]
    done = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=dict(os.environ, **JUDGE_ENV),
        capture_output=True,
        text=True,
        timeout=WALL_PER_CPU_SECOND * timeout,
        preexec_fn=lambda: limit_cpu(timeout),
    )
    return Verdict(done.returncode, _failed_tests(junit), done.stdout + done.stderr)


class WarmJudge:
    """`judge`, without paying for PyTorch's import once per mutant.

    A server process (`python tests/mutant_kit.py --serve`) imports PyTorch and Triton once, then
    forks a child for each mutant. The child runs the same pytest command `judge` runs, in-process,
    and exits; it starts from a copy of the server, which has imported libraries and run nothing,
    so it shares no state with the children before it: its verdict is a fresh process's.
    """

    def __init__(self) -> None:
        import os
        import subprocess
        import sys

        self.server = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve"],
            cwd=REPO_ROOT,
            env=dict(os.environ, **JUDGE_ENV),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def judge(self, mutant: Mutant, workdir: Path, *extra: str, timeout: float = 600) -> Verdict:
        import json

        impl = write_mutant(mutant, workdir)
        junit = workdir / f"{mutant.path.stem}.xml"
        output = workdir / f"{mutant.path.stem}.out"
        request = {"args": _pytest_args(mutant, impl, junit, extra), "output": str(output)}
        self.server.stdin.write(json.dumps({**request, "timeout": timeout}) + "\n")
        self.server.stdin.flush()
        answer = self.server.stdout.readline()
        if not answer:
            raise RuntimeError(f"the mutant judge server stopped (exit code {self.server.poll()})")
        text = output.read_text() if output.exists() else ""
        return Verdict(json.loads(answer)["returncode"], _failed_tests(junit), text)

    def close(self) -> None:
        self.server.stdin.close()  # the server's loop ends, and with it the server
        self.server.wait(timeout=60)
        self.server.stdout.close()


def serve() -> None:
    """The server of WarmJudge: one request per line on stdin, one answer per line on stdout."""
    import json
    import os
    import shutil
    import sys
    import tempfile
    import time

    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else printed goes to stderr, never into the answers
    from grading.devices import use_triton_interpreter_without_gpu

    use_triton_interpreter_without_gpu()  # as grading.judge.plugin does, before Triton is imported
    import pytest  # noqa: F401  (the slow imports every child would repeat; not pytest's
    import torch  # noqa: F401  plugins, whose modules pytest must import itself to rewrite)
    import torch.utils.flop_counter  # noqa: F401
    import triton  # noqa: F401

    # The children's compiled modules, pytest's assertion rewrites included, go to a folder of the
    # server's own, so the second child reads what the first compiled, and the repository and
    # the environment stay without bytecode files.
    pycache = tempfile.mkdtemp(prefix="mutant-judge-")
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            sys.pycache_prefix, sys.dont_write_bytecode = pycache, False
            limit_cpu(request["timeout"])
            _run_child(request["args"], request["output"])
        deadline = time.monotonic() + WALL_PER_CPU_SECOND * request["timeout"]
        while (done := os.wait4(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        if done[0] == 0:  # waiting past its time: stop it, as subprocess.run's timeout would
            os.kill(pid, 9)
            done = os.wait4(pid, 0)
        returncode = os.waitstatus_to_exitcode(done[1])
        cpu_s = done[2].ru_utime + done[2].ru_stime
        protocol.write(json.dumps({"returncode": returncode, "cpu_s": cpu_s}) + "\n")
        protocol.flush()
    shutil.rmtree(pycache, ignore_errors=True)


def _run_child(args: list[str], output: str) -> None:
    """In a forked child: run pytest with `args`, its output to the file `output`; never return."""
    import os
    import sys
    import traceback

    code = 3
    try:
        out = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.chdir(REPO_ROOT)
        import pytest

        code = int(pytest.main(args))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """`python tests/mutant_kit.py [PATH ...]`: check mutants (all by default), one line each."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("paths", nargs="*", type=Path, help="mutant files or kata folders")
    parser.add_argument("--serve", action="store_true", help="be WarmJudge's server")
    args = parser.parse_args(argv)
    if args.serve:
        serve()
        return 0
    paths: list[Path] = []
    for p in args.paths or [MUTANTS_DIR]:
        paths += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    escaped = 0
    warm = WarmJudge()
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            try:
                mutant = read_mutant(path)
                verdict = warm.judge(mutant, Path(tmp))
            except StaleMutant as exc:
                print(f"STALE    {path}: {exc}")
                escaped += 1
                continue
            ok = verdict.caught_by(mutant.caught_by)
            escaped += not ok
            status = "caught " if ok else "ESCAPED"
            print(f"{status}  {mutant.name}: {mutant.bug} (failed: {', '.join(verdict.failed)})")
    warm.close()
    return 1 if escaped else 0


if __name__ == "__main__":
    raise SystemExit(main())
