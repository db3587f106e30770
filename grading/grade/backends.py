"""Where the grader's tasks run: threads on this machine (the default), or a Ray cluster.

A task is one kata of one submission: `grading.grade.task.grade_task(**options)`, plain values in
and out, the same sandbox, seed and limits wherever it runs, so reports do not depend on the
backend. A backend is called with [(key, options)] and yields (key, result) as tasks finish, showing
the class's progress (done / total, running, time left) as it goes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed

from grading.grade.task import grade_task
from grading.judge.impl import KATAS_DIR, REPO_ROOT

RETRIES = 2  # a task whose worker is lost is graded again, at most this many more times


class Progress:
    """Done / total, running, and the time left, in the terminal (Rich) or as plain lines."""

    def __init__(self, label: str, total: int, running: int) -> None:
        self.label, self.total, self.running = label, total, running
        self.done, self.start, self.bar = 0, time.monotonic(), None
        try:
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress
        except ImportError:
            return
        self.bar = RichProgress(
            TextColumn("{task.description}"), BarColumn(),
            TextColumn("{task.completed}/{task.total} done, {task.fields[running]} running"),
            TimeElapsedColumn(), TextColumn("{task.fields[eta]}"),
        )  # fmt: skip
        self.task = self.bar.add_task(label, total=total, running=min(running, total), eta="")
        self.bar.start()

    def finished(self, line: str) -> None:
        self.done += 1
        left = self.total - self.done
        per_task = (time.monotonic() - self.start) / self.done
        waves = -(-left // max(1, self.running))
        eta = f"about {per_task * waves / 60:.0f} min left" if left else ""
        self.note(f"[{self.done}/{self.total}] {line}")
        if self.bar is not None:
            self.bar.update(
            self.task, completed=self.done, running=min(self.running, left), eta=eta
        )  # fmt: skip

    def note(self, line: str) -> None:
        (self.bar.console.print if self.bar is not None else print)(f"  {line}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def describe(key: tuple, run: dict) -> str:
    why = f" ({run['reason']})" if run["reason"] else ""
    passed = sum(t["status"] == "passed" for t in run["tests"])
    failed = sum(t["status"] in ("failed", "error") for t in run["tests"])
    return f"{' / '.join(key)}: {passed} passed, {failed} failed{why}"


class LocalBackend:
    """`jobs` tasks at a time, each in a thread that waits on its sandboxed process."""

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = max(1, jobs)

    def __call__(self, tasks: list[tuple[tuple, dict]], label: str) -> Iterator[tuple]:
        progress = Progress(label, len(tasks), self.jobs)
        try:
            with ThreadPoolExecutor(max_workers=self.jobs) as pool:
                futures = {pool.submit(grade_task, **options): key for key, options in tasks}
                for future in as_completed(futures):
                    key, run = futures[future], future.result()
                    progress.finished(describe(key, run))
                    yield key, run
        finally:
            progress.close()


class RayBackend:
    """One Ray task per (submission, kata), one CPU each (and a GPU with `gpu`, for katas with
    GPU tests). Every node needs this repository at the same path, with the same commit and
    Python environment. A task whose worker or node is lost is graded again (RETRIES), and its
    result says how many attempts it took."""

    def __init__(self, address: str | None = None, *, gpu: bool = False, **init) -> None:
        try:
            import ray
        except ImportError:
            raise SystemExit(
                "--backend ray needs Ray: pip install 'inference-katas[cluster]' (or ray)"
            ) from None
        self.ray, self.gpu = ray, gpu
        if not ray.is_initialized():
            path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
            ray.init(
                address=address, runtime_env={"env_vars": {"PYTHONPATH": path}},
                log_to_driver=False, **init,
            )  # fmt: skip

    def submit(self, options: dict):
        has_gpu_tests = any((KATAS_DIR / options["kata"]).glob("test_*_gpu.py"))
        remote = self.ray.remote(num_cpus=1, num_gpus=1 if self.gpu and has_gpu_tests else 0)
        return remote(grade_task).options(max_retries=0).remote(**options)

    def __call__(self, tasks: list[tuple[tuple, dict]], label: str) -> Iterator[tuple]:
        lost = (self.ray.exceptions.WorkerCrashedError, self.ray.exceptions.NodeDiedError)
        cpus = int(self.ray.cluster_resources().get("CPU", 1))
        progress = Progress(label, len(tasks), cpus)
        pending = {self.submit(options): (key, options, 1) for key, options in tasks}
        try:
            while pending:
                ready, _ = self.ray.wait(list(pending), num_returns=1)
                key, options, attempt = pending.pop(ready[0])
                try:
                    run = self.ray.get(ready[0])
                except lost:
                    if attempt > RETRIES:
                        raise
                    progress.note(f"{' / '.join(key)}: its worker was lost; grading it again")
                    pending[self.submit(options)] = (key, options, attempt + 1)
                    continue
                run["attempts"] = attempt
                progress.finished(describe(key, run))
                yield key, run
        finally:
            progress.close()
