"""The pytest plugin a graded run loads (`-p grading.grade.plugin`), inside the sandbox process.

It does four things the grader relies on:

- reports every test's outcome, as JSON lines, to the results file the grader named in
  KATAS_GRADE_RESULTS, and ends the file with a closing line only when the session really ends
  (a run that dies or calls `os._exit` leaves no closing line, and the grader notices);
- registers the `grade` Hypothesis profile: more examples than `ci`, no example database, and the
  grader's seed from `--hypothesis-seed`, so a grade can be replayed and cannot be tuned to the
  public examples;
- installs an audit hook (which Python code cannot remove) once the libraries are imported: the
  submission may not open its own kata's reference, write, delete or rename files outside the
  sandbox, or start processes;
- ends the run at the first test that breaks a rule the harness checks on every call (a
  GuardFailure): that scores the kata zero whatever the other tests say.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

from grading.judge.limits import arm, disarm, timed_out

settings.register_profile(
    "grade",
    max_examples=int(os.environ.get("KATAS_GRADE_EXAMPLES", "60")),
    database=None,
    deadline=None,
    print_blob=True,
    report_multiple_bugs=False,
    # No "explain" phase (extra runs of a failing example to say which parts mattered): it can
    # cost a failing test seconds, and a graded run's time is limited.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow],
)

# A failure whose text names one of these broke a rule the harness checks on every call
# (grading.judge.guards' GuardFailure, grading.judge.refusals' OffTheBooks).
GUARD_SIGNS = ("GuardFailure", "OffTheBooks")
MESSAGE_LIMIT = 8000  # characters of a failure's text kept (its end: the assertion's message)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_FILE_EVENTS = {
    "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.chown", "os.link",
    "os.symlink", "os.mkdir", "shutil.rmtree", "shutil.move", "shutil.copyfile",
}  # fmt: skip
_PROCESS_EVENTS = {
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
    "os.forkpty", "pty.spawn", "os.kill", "os.killpg",
}  # fmt: skip


def _process_allowed(event: str, args: tuple) -> bool:
    """The processes the katas' own tests start: the ahead-of-time kernel compiler
    (`python -m grading.gpu.aot_worker`) and the CUDA tools that ship with Triton (ptxas,
    cuobjdump), which that worker runs under these same rules. Both events carry (program, argv,
    ...):
    subprocess uses os.posix_spawn where it can (Triton runs ptxas so)."""
    if event not in ("subprocess.Popen", "os.posix_spawn") or len(args) < 2:
        return False
    argv = [os.fsdecode(a) for a in args[1]] if isinstance(args[1], (list, tuple)) else []
    if not argv:
        return False
    if argv[0] == sys.executable and argv[1:3] == ["-m", "grading.gpu.aot_worker"]:
        return True
    try:
        import triton
    except ImportError:
        return False
    tools = Path(triton.__file__).resolve().parent / "backends" / "nvidia" / "bin"
    return Path(argv[0]).resolve().parent == tools


def _forbidden(event: str, args: tuple, sandbox: Path, kata: str) -> str | None:
    """Why this audit event breaks the grading rules, or None."""
    if event in _PROCESS_EVENTS:
        if _process_allowed(event, args):
            return None
        return f"starting or signalling processes is not allowed while grading ({_what(args)})"
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = Path(os.fsdecode(args[0]))
        name, parent = path.name, path.parent.name
        if (parent == "reference" and name == f"{kata}.py") or (
            parent == "__pycache__"
            and path.parent.parent.name == "reference"
            and name.startswith(f"{kata}.")
        ):
            return f"a submission may not read reference/{kata}.py"
        mode = args[1] if len(args) > 1 else "r"
        flags = args[2] if len(args) > 2 else 0
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS
        )
        if writing and not _inside(path, sandbox) and str(path) != os.devnull:
            return f"writing {path} (outside the sandbox) is not allowed"
    if event in _FILE_EVENTS:
        for arg in args:
            if isinstance(arg, (str, bytes, os.PathLike)):
                path = Path(os.fsdecode(arg))
                if not _inside(path, sandbox):
                    return f"{event} on {path} (outside the sandbox) is not allowed"
    return None


def _what(args: tuple) -> str:
    """The program an audit event names, for the report: `event(args)` shortened."""
    return " ".join(os.fsdecode(a) if isinstance(a, (str, bytes)) else repr(a) for a in args)[:200]


def _inside(path: Path, root: Path) -> bool:
    try:
        return Path(os.path.abspath(path)).is_relative_to(root)
    except (OSError, ValueError):
        return False


def _install_audit_hook(sandbox: Path, kata: str, report) -> None:
    """Refuse what breaks the rules, and tell the grader even if the submission swallows it."""

    def hook(event: str, args: tuple) -> None:
        if event in _PROCESS_EVENTS or event in _FILE_EVENTS or event == "open":
            why = _forbidden(event, args, sandbox, kata)
            if why is not None:
                report(kind="violation", message=why)
                raise PermissionError(f"grading sandbox: {why}")

    sys.addaudithook(hook)


def guard_worker_process() -> None:
    """The same rules in a helper process the tests start (grading.gpu.aot_worker runs the
    submission's code too): installed when the environment says a grade is running."""
    if "KATAS_GRADE_SANDBOX" not in os.environ:
        return
    results = open(os.environ["KATAS_GRADE_RESULTS"], "a", buffering=1)  # noqa: SIM115

    def report(**record) -> None:
        results.write(json.dumps(record) + "\n")

    sandbox = Path(os.environ["KATAS_GRADE_SANDBOX"]).resolve()
    _install_audit_hook(sandbox, os.environ["KATAS_GRADE_KATA"], report)


class GradeReporter:
    """Appends one JSON line per test outcome to the grader's results file."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "a", buffering=1)  # noqa: SIM115 - open for the whole session
        self.cpu_at_start = time.process_time()
        self.session: pytest.Session | None = None

    def write(self, **record) -> None:
        self.file.write(json.dumps(record) + "\n")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            self.write(kind="collected", id=item.nodeid)

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        self.write(kind="started", id=nodeid)
        self.cpu_at_start = time.process_time()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem):
        """Each test (its setup, the call and teardown) may use KATAS_GRADE_TEST_CPU seconds of
        CPU time, a limit the machine's load does not change; the clock's is pytest-timeout's."""
        limit = float(os.environ.get("KATAS_GRADE_TEST_CPU", "0"))
        if limit > 0:
            arm(signal.ITIMER_PROF, limit, timed_out(limit, " of CPU time"))
        try:
            return (yield)
        finally:
            if limit > 0:
                disarm(signal.ITIMER_PROF)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # The harness has imported torch and Triton by now; from here on the rules hold for
        # everything, the submission included.
        sandbox = Path(os.environ["KATAS_GRADE_SANDBOX"]).resolve()
        _install_audit_hook(sandbox, os.environ["KATAS_GRADE_KATA"], self.write)
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and report.passed:
            return  # setup and teardown that went well say nothing
        if report.when == "call":
            status = report.outcome
        else:
            status = "skipped" if report.skipped else "error"
        message = ""
        if report.failed:
            message = str(report.longrepr)[-MESSAGE_LIMIT:]
            if self.session is not None and any(sign in message for sign in GUARD_SIGNS):
                # A broken harness rule scores the kata zero (grading.grade.sandbox): no other test
                # can change that, so none is run.
                self.session.shouldstop = "a test broke a rule the harness checks on every call"
        elif report.skipped and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2])
        self.write(
            kind="test", id=report.nodeid, status=status, message=message,
            duration_s=round(report.duration, 3),
            cpu_s=round(time.process_time() - self.cpu_at_start, 3),
        )  # fmt: skip

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.write(kind="finished", exitstatus=int(exitstatus))


def pytest_configure(config: pytest.Config) -> None:
    path = Path(os.environ["KATAS_GRADE_RESULTS"])
    config.pluginmanager.register(GradeReporter(path), "grade-reporter")
