"""The pytest plugin every kata's tests run under (loaded by the repository's conftest.py).

It adds `--impl` and `--figures`, registers the Hypothesis profiles, switches Triton to its CPU
interpreter when there is no GPU, skips GPU tests on the CPU (or, with `--rehearse`, runs them there
at small sizes: `grading.judge.rehearsal`), puts the guards of `grading.judge.guards` around the
implementation under test (and checks after each test that the judge was left alone), and turns "not
implemented yet" failures into one short line each.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from grading.devices import (
    REHEARSAL,
    has_cuda,
    interpreter_limit,
    use_triton_interpreter_without_gpu,
)

# Before anything imports Triton (torch.utils.flop_counter does, under the guards).
use_triton_interpreter_without_gpu()

from grading.judge.figures import FigureLog  # noqa: E402
from grading.judge.guards import GuardFailure, JudgeSnapshot, guard_module  # noqa: E402
from grading.judge.impl import KATAS_DIR, ImplError, kata_of, load_impl  # noqa: E402
from grading.judge.limits import TEST_LIMIT, TestTimedOut, arm, disarm, timed_out  # noqa: E402
from grading.judge.observe import refuse_mode_switches  # noqa: E402
from grading.judge.rehearsal import (  # noqa: E402
    PLAN,
    GpuRun,
    PlannedTest,
    Tally,
    read_plan,
    triton_launch_counters,
    write_plan,
)
from grading.judge.source_check import check_source  # noqa: E402

# Before any implementation is imported: PyTorch's switches that turn the counters off are
# refused during a guarded call (a reference taken at import is already the stand-in).
refuse_mode_switches()

# dev: the learner's inner loop, derandomised: unchanged code gets the same examples and so the
# same verdict on every run, and no stored example from another run is replayed.
# ci: the same, with more examples. thorough: new random examples on every run, and failures are
# kept in the example database (.hypothesis/) and replayed first next time (see README.md).
# Every profile stops at the first failing example of a test and reports only that one, and
# skips the "explain" phase (extra runs to say which parts of the example mattered).
_COMMON = dict(
    deadline=None,
    print_blob=True,
    report_multiple_bugs=False,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=20, derandomize=True, database=None, **_COMMON)
settings.register_profile("ci", max_examples=30, derandomize=True, database=None, **_COMMON)
# Explicit, since Hypothesis's own defaults turn derandomised and database-free where CI is set.
_DATABASE = DirectoryBasedExampleDatabase(".hypothesis/examples")
settings.register_profile(
    "thorough", max_examples=300, derandomize=False, database=_DATABASE, **_COMMON
)
# sweep: thorough's random exploration, fewer examples and no database; the self-tests try each
# reference with it under fixed seeds (`--hypothesis-seed`).
settings.register_profile("sweep", max_examples=40, derandomize=False, database=None, **_COMMON)
# judge: `ci`'s examples without shrinking, for the self-tests that only need a wrong
# implementation to fail (tests/mutants, tests/adversarial), not its smallest failing case.
settings.register_profile(
    "judge",
    parent=settings.get_profile("ci"),
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

_FIGURES = pytest.StashKey[FigureLog]()
_UNIMPLEMENTED = pytest.StashKey[list]()
_JUDGE = pytest.StashKey[JudgeSnapshot]()
_GUARDS = pytest.StashKey[list]()
_SOURCE = pytest.StashKey[set]()
_GPU_RUN = pytest.StashKey[GpuRun]()
_PLAN = pytest.StashKey[list]()
_TIMER = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("katas")
    group.addoption(
        "--impl",
        default="solution",
        help="implementation to test: `solution` (katas/<kata>/solution.py, the default), "
        "`reference` (reference/<kata>.py), or a path to any .py file",
    )
    group.addoption(
        "--figures", default=None, help="write the figures tests record to this JSON file"
    )
    group.addoption(
        "--rehearse",
        action="store_true",
        help="run only the GPU tests, on the CPU at small sizes: correctness judged, speed "
        "targets listed as rehearsed, not measured",
    )
    group.addoption(
        "--plan",
        default=None,
        help="with --rehearse (and without -n): write the GPU check's plan to this file",
    )


def pytest_configure(config: pytest.Config) -> None:
    rehearse = config.getoption("--rehearse")
    if rehearse:
        os.environ[REHEARSAL] = "1"  # read by code with a GPU path (grading.devices.gpu_path)
    config.stash[_FIGURES] = FigureLog(rehearsal=rehearse)
    if config.pluginmanager.hasplugin("timeout"):
        config.pluginmanager.register(TestTimer(), "kata-test-timer")
    config.stash[_UNIMPLEMENTED] = []
    config.stash[_PLAN] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("timeout", None) is None:  # every kata test gets a limit of its own
        for item in items:
            if item.get_closest_marker("timeout") is None and _in_a_kata(item):
                item.add_marker(pytest.mark.timeout(TEST_LIMIT))
    if config.getoption("--rehearse"):
        others = [item for item in items if item.get_closest_marker("gpu") is None]
        if others:
            config.hook.pytest_deselected(items=others)
            items[:] = [item for item in items if item.get_closest_marker("gpu")]
        limit = interpreter_limit()
        if limit:  # the tests the plan saw launch a Triton kernel cannot be rehearsed here
            launching = {t.id for t in read_plan(PLAN) if t.work.kernels}
            for item in items:
                if item.nodeid in launching:
                    item.add_marker(pytest.mark.skip(reason=limit))
        return
    if has_cuda():
        return
    skip = pytest.mark.skip(
        reason="needs a CUDA GPU and this machine has none; on a GPU machine run "
        "`python3 -m grading.gpu.check` (`--rehearse` runs it here, on the CPU)"
    )
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Record the judge (grading, the test modules, PyTorch's functions) before any
    implementation is imported: the `impl` fixture imports it later, while tests run."""
    modules = {id(m): m for item in session.items if (m := getattr(item, "module", None))}
    if any("impl" in getattr(item, "fixturenames", ()) for item in session.items):
        session.config.stash[_JUDGE] = JudgeSnapshot(list(modules.values()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """After each test of an implementation: fail it if the judge was changed meanwhile, or the
    plain data given to a call changed after the call."""
    run = item.stash.get(_GPU_RUN, None)
    if run is not None and run.rehearsal:
        result = yield from _tallied(item, run)
    else:
        result = yield
    for guard in item.config.stash.get(_GUARDS, []):
        guard.after_test()  # the arguments of its calls, changed later (a finaliser, say)
    judge = item.config.stash.get(_JUDGE, None)
    if judge is not None and "impl" in getattr(item, "fixturenames", ()):
        changed = judge.changes()
        if changed:
            raise GuardFailure(
                "the judge was changed: the implementation replaced "
                f"{', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}. A solution may "
                "not patch the test harness (grading), the tests, or the PyTorch functions they "
                "use"
            )
    return result


def _tallied(item: pytest.Item, run: GpuRun):
    """Run a rehearsed GPU test under the rehearsal's tally and plan it (`rehearsal.py`)."""
    counters = triton_launch_counters(run.work)
    saved = [cls.__dict__["run"] for cls, _ in counters]
    for cls, replacement in counters:
        cls.run = replacement["run"]
    try:
        with Tally(run.work):
            result = yield
    finally:
        for (cls, _), real in zip(counters, saved, strict=True):
            cls.run = real
    kind = "sweep" if run.work.bench_ms else "correctness"
    headline = item.get_closest_marker("headline")  # its arguments: which parametrized ids
    callspec = getattr(item, "callspec", None)
    if headline and (not headline.args or (callspec and callspec.id in headline.args)):
        kind = "headline"
    seconds = run.work.estimate_seconds()
    item.config.stash[_PLAN].append(PlannedTest(item.nodeid, kata_of(item.path), kind, seconds,
                                                run.work))  # fmt: skip
    return result


@pytest.fixture
def gpu(request: pytest.FixtureRequest) -> GpuRun:
    """Where and how big a GPU test runs (grading.judge.rehearsal.GpuRun): CUDA at full size, or
    the CPU at small sizes in a rehearsal (`--rehearse`)."""
    run = GpuRun.here(rehearse=request.config.getoption("--rehearse"))
    request.node.stash[_GPU_RUN] = run
    return run


@pytest.fixture(scope="module")
def impl(request: pytest.FixtureRequest):
    """The module under test for this kata, as chosen by `--impl`, with its API guarded."""
    kata = kata_of(request.path)
    try:
        module = load_impl(kata, request.config.getoption("--impl"))
    except ImplError as exc:
        pytest.fail(str(exc), pytrace=False)
    judge = request.config.stash.get(_JUDGE, None)
    guard = guard_module(kata, module, KATAS_DIR / kata / "solution.py", judge)
    request.config.stash.setdefault(_GUARDS, []).append(guard)
    request.config.stash.setdefault(_SOURCE, set()).update(check_source(module.__file__, kata))
    return module


def pytest_runtest_setup(item: pytest.Item) -> None:
    for guard in item.config.stash.get(_GUARDS, []):
        guard.new_test()


@pytest.fixture(scope="session")
def figures(request: pytest.FixtureRequest) -> FigureLog:
    """Record a measured figure: `figures.record(name, value, unit, **context)`."""
    return request.config.stash[_FIGURES]


def _not_implemented(exc: BaseException | None) -> NotImplementedError | None:
    """The NotImplementedError behind a failure, looking through chains and exception groups."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, NotImplementedError):
            return exc
        if isinstance(getattr(exc, "exceptions", None), (list, tuple)):  # an exception group
            for inner in exc.exceptions:
                found = _not_implemented(inner)
                if found is not None:
                    return found
        exc = exc.__cause__ or exc.__context__
    return None


def _in_a_kata(item: pytest.Item) -> bool:
    try:
        kata_of(item.path)
    except ImplError:
        return False
    return True


class TestTimer:
    """pytest-timeout's clock, raising TestTimedOut (see grading/judge/limits.py) instead of
    pytest's failure, which Hypothesis would catch and run again."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings) -> bool | None:
        if threading.current_thread() is not threading.main_thread():
            return None  # pytest-timeout's own thread method
        arm(signal.ITIMER_REAL, settings.timeout, timed_out(settings.timeout, ""))
        item.stash[_TIMER] = True
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> bool | None:
        if not item.stash.get(_TIMER, False):
            return None
        disarm(signal.ITIMER_REAL)
        return True


def _timed_out(call: pytest.CallInfo) -> str | None:
    """A test past its limit, in words a learner reads: the limit, and where the test was."""
    if not isinstance(call.excinfo.value, TestTimedOut):
        return None
    machinery = ("grading/judge/limits.py", "/_pytest/", "/pluggy/", "/hypothesis/")
    where = [e for e in call.excinfo.traceback if not any(m in str(e.path) for m in machinery)]
    at = f" It was at {where[-1].path}:{where[-1].lineno + 1} when stopped." if where else ""
    return str(call.excinfo.value) + at


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and call.excinfo is not None:
        message = _timed_out(call)
        if message is not None:
            report.longrepr = message
            return report
    if report.failed and call.excinfo is not None:
        exc = _not_implemented(call.excinfo.value)
        if exc is not None:
            message = str(exc) or "not implemented yet"
            try:
                kata = kata_of(item.path)
                if "README" not in message:
                    message += f" — start with katas/{kata}/README.md"
            except ImplError:
                pass
            report.longrepr = message
            report.sections = []
            item.config.stash[_UNIMPLEMENTED].append(message)
    return report


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Figures are written after every test: a run stopped early keeps what it measured."""
    path = item.config.getoption("--figures")
    if path:
        item.config.stash[_FIGURES].write_json(path)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    refused = config.stash.get(_SOURCE, set())
    if refused:  # a warning here; grading refuses the file (grading/README.md)
        terminalreporter.section("source check: grading would refuse this file")
        for reason in sorted(refused):
            terminalreporter.write_line(reason)
    unimplemented = config.stash[_UNIMPLEMENTED]
    if unimplemented:
        terminalreporter.section("not implemented yet")
        for message in sorted(set(unimplemented)):
            count = unimplemented.count(message)
            terminalreporter.write_line(f"{count:3d} test(s): {message}")
    log = config.stash[_FIGURES]
    if log.figures:
        terminalreporter.section("figures")
        for fig in log.figures:
            terminalreporter.write_line(f"{fig.test.split('::')[-1]}: {fig}")
    if log.rehearsed:
        terminalreporter.section("speed targets: rehearsed, not measured")
        for line in log.rehearsed:
            terminalreporter.write_line(line)
    plan = config.getoption("--plan")
    if plan and config.stash[_PLAN] and not hasattr(config, "workerinput"):  # not under -n
        write_plan(config.stash[_PLAN], plan)
        terminalreporter.write_line(f"GPU check plan written to {plan}")
    path = config.getoption("--figures")
    if path:
        log.write_json(path)
        terminalreporter.write_line(f"figures written to {path}")
