"""The simulation, driven as a person would: keys pressed through Textual's pilot, a real
terminal through tmux, and the exported pictures. What each screen shows is checked against the
run it comes from."""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
import sys
import time
from xml.etree import ElementTree as ET

import pytest

pytest.importorskip("textual", reason="the simulation needs its extra: pip install -e .[sim]")

from rich.console import Console  # noqa: E402

from grading.impl import REPO_ROOT, load_impl  # noqa: E402
from grading.mutants import read_mutant, write_mutant  # noqa: E402
from katas.simulate import scenes  # noqa: E402
from katas.simulate.__main__ import load_all  # noqa: E402
from katas.simulate.app import BatchingScene, KVScene, SimulationApp  # noqa: E402

SIZE = (100, 34)


@pytest.fixture(scope="module")
def impls():
    return load_all("reference")


def shown(scene) -> str:
    """The scene's text as the terminal shows it (without colour)."""
    console = Console(width=SIZE[0], record=True, file=io.StringIO(), color_system=None)
    console.print(scene.view())
    return console.export_text()


def drive(impls, keys: list[str], check) -> None:
    """Start the app headless, press `keys`, then run `check(app)`."""

    async def run() -> None:
        app = SimulationApp(impls)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press(*keys)
            await pilot.pause()
            check(app)

    asyncio.run(run())


def test_batching_screen_shows_the_runs_counters(impls):
    def check(app):
        scene = app.scene
        assert isinstance(scene, BatchingScene) and scene.step == 3
        text = shown(scene)
        for name, run in scene.runs.items():
            c = run.counters(min(3, run.steps - 1))
            rows = [line.replace("│", " ").split() for line in text.splitlines()]
            row = " ".join(next(r for r in rows if r[:1] == [name] and len(r) > 3))
            assert f"{c['tokens/step']:.2f}" in row and f"{c['waste']}" in row, (row, c)
            assert f"{c['done']}/{len(run.completions)}" in row and "yes" in row
        continuous = scene.runs["continuous"]
        assert continuous.counters(continuous.steps - 1)["waste"] == 0
        assert scene.runs["static"].counters(scene.runs["static"].steps - 1)["waste"] > 0

    drive(impls, ["n", "n", "n"], check)


def test_keys_change_the_workload_and_the_clock(impls):
    def check(app):
        scene = app.scene
        assert scene.settings.batch_size == 4 and scene.settings.workload == "poisson"
        assert scene.step == 0  # a new run starts at step 0
        assert all(len(run.grid) == 4 for run in scene.runs.values())
        assert scene.selected == 0  # `s` moved from continuous to static
        assert "poisson workload · batch size 4" in shown(scene)

    drive(impls, ["n", "B", "l", "s"], check)


def test_kv_screen_replays_the_pool(impls):
    def check(app):
        scene = app.scene
        assert isinstance(scene, KVScene) and scene.step == 12
        frame = scene.frames[12]
        blocks = scene.settings.kv_blocks
        assert len(frame.owners) == blocks and not frame.error
        used = sum(owner is not None for owner in frame.owners)
        assert f"{used}/{blocks} blocks in use" in shown(scene)
        assert all(sum(o is not None for o in f.owners) <= blocks for f in scene.frames)
        assert all(not f.tables for f in scene.frames[-1:])  # every block returned at the end

    drive(impls, ["2", *["n"] * 12], check)


def test_speculative_screen_counts_rounds(impls):
    def check(app):
        scene = app.scene
        rounds = scene.run.rounds[:3]
        accepted, proposed = sum(r.accepted for r in rounds), sum(len(r.proposed) for r in rounds)
        assert f"accepted {accepted}/{proposed}" in shown(scene)
        assert f"target calls {len(rounds)} " in shown(scene) and scene.run.exact
        assert scene.k == 5 and scene.alpha == 0.8

    drive(impls, ["3", "K", "n", "n"], check)


def test_flash_screen_follows_the_blocks_read(impls):
    def check(app):
        scene = app.scene
        run = scene.run
        assert run.visited[:2] == [0, 1] and scene.step == 1
        assert f"running max {run.row_max[1]:.3f}" in shown(scene)
        assert run.largest_bytes < run.naive_bytes

    drive(impls, ["4", "n"], check)


def test_a_wrong_batching_implementation_is_flagged(impls, tmp_path):
    mutant = tmp_path / "batching" / "first_position_logits.py"
    mutant.parent.mkdir()
    mutant.write_text(
        '"""Bug: the next token is read from the first position of a prefill, not the last."""\n'
        'CAUGHT_BY = ["test_a_wrong_batching_implementation_is_flagged"]\n'
        "EDITS = [('ready = [(seq, out[-1])', 'ready = [(seq, out[0])')]\n"
    )
    wrong = dict(
        impls, batching=load_impl("batching", str(write_mutant(read_mutant(mutant), tmp_path)))
    )

    def check(app):
        scene = app.scene
        assert any(run.wrong for run in scene.runs.values())
        assert "NO:" in shown(scene)

    drive(wrong, [], check)


def test_an_unimplemented_stub_is_shown_not_crashed():
    stub = load_all("solution")  # the untouched stubs raise NotImplementedError

    def check(app):
        for scene in ("batching", "spec", "flash"):
            text = " ".join(shown(app.query_one(f"#{scene}")).split())  # lines wrapped back
            assert "not implemented yet" in text, text

    drive(stub, [], check)


def test_export_writes_pictures_that_follow_the_workload(tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    for folder, seed in ((first, "0"), (second, "1")):
        done = subprocess.run(
            [sys.executable, "-m", "katas.simulate", "--export", str(folder), "--workload",
             "poisson", "--seed", seed],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
    for name in ("batching", "kv", "spec", "flash"):
        assert ET.parse(first / f"{name}.svg").getroot().tag.endswith("svg")
    png = (first / "batching-timeline.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert png != (second / "batching-timeline.png").read_bytes()
    assert (first / "batching.svg").read_text() != (second / "batching.svg").read_text()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_in_a_real_terminal(tmp_path):
    session = f"katas-sim-{os.getpid()}"
    command = f"cd {REPO_ROOT} && {sys.executable} -m katas.simulate"
    tmux = ["tmux", "-L", session]
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "80", "-y", "24", command],
                   check=True)  # fmt: skip
    try:
        assert _screen_shows(tmux, session, "tokens/step", 120)
        subprocess.run([*tmux, "send-keys", "-t", session, "2"], check=True)
        assert _screen_shows(tmux, session, "paged KV pool", 30)
        subprocess.run([*tmux, "send-keys", "-t", session, "q"], check=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            alive = subprocess.run([*tmux, "has-session", "-t", session], capture_output=True)
            if alive.returncode != 0:
                break
            time.sleep(0.5)
        assert alive.returncode != 0, "q did not quit the app"
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def _screen_shows(tmux, session: str, text: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pane = subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True,
                              text=True).stdout  # fmt: skip
        if text in pane:
            return True
        time.sleep(0.5)
    return False


def test_the_customers_open_the_show():
    names = [name for name, *_ in scenes.CUSTOMERS]
    orders = [order for _, order, *_ in scenes.CUSTOMERS]
    assert names == ["A", "B", "C"] and orders == ["Hello", "How are you today?", "Hi"]
