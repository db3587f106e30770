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

import pytest

pytest.importorskip("textual", reason="the simulation needs its extra: pip install -e .[sim]")

from rich.console import Console  # noqa: E402

from grading.impl import REPO_ROOT, load_impl  # noqa: E402
from grading.mutants import read_mutant, write_mutant  # noqa: E402
from katas.batching import timeline  # noqa: E402
from katas.simulate import scenes  # noqa: E402
from katas.simulate.__main__ import load_all, main  # noqa: E402
from katas.simulate.app import (  # noqa: E402
    HELP,
    LABEL,
    WRONG,
    BatchingScene,
    HelpScreen,
    KVScene,
    SimulationApp,
)
from katas.simulate.export import export, timeline_png  # noqa: E402

SIZE = (100, 34)
SMALL = (80, 24)
KV = scenes.Settings(workload="poisson", rate=0.6, batch_size=4, kv_blocks=20)  # the KV screen's

# The batching README's targets for its shop: (first_token, finished) of A, B, C, D.
SHOP = {
    "static": [(1, 2), (1, 6), (1, 1), (7, 8)],
    "dynamic": [(0, 1), (0, 5), (6, 6), (6, 7)],
    "continuous": [(0, 1), (0, 5), (1, 1), (2, 3)],
}


@pytest.fixture(scope="module")
def impls():
    return load_all("reference")


@pytest.fixture(scope="module")
def wrong(impls, tmp_path_factory):
    """The references, with a batching implementation that reads a prefill's first position."""
    mutant = read_mutant(REPO_ROOT / "tests/mutants/batching/next_token_from_first_position.py")
    path = write_mutant(mutant, tmp_path_factory.mktemp("mutant"))
    return dict(impls, batching=load_impl("batching", str(path)))


def shown(scene, width: int = SIZE[0]) -> str:
    """The scene's text as the terminal shows it (without colour)."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(scene.view())
    return console.export_text()


def drive(impls, keys: list[str], check, size=SIZE) -> None:
    """Start the app headless, press `keys`, then run `check(app)`."""

    async def run() -> None:
        app = SimulationApp(impls)
        async with app.run_test(size=size) as pilot:
            await pilot.press(*keys)
            await pilot.pause()
            check(app)

    asyncio.run(run())


def test_the_opening_scene_is_the_readme_shop(impls):
    oracle = scenes.Oracle()
    runs = {s: scenes.run_batching(impls["batching"], s, scenes.Settings(), oracle) for s in SHOP}
    assert scenes.CUSTOMERS is timeline.CUSTOMERS and len(timeline.CUSTOMERS) == 4
    for strategy, run in runs.items():
        assert run.names == ["A", "B", "C", "D"] and not run.wrong
        assert [(c.first_token, c.finished) for c in run.completions] == SHOP[strategy], strategy
    kinds = {s: [[c.kind for c in row] for row in run.grid] for s, run in runs.items()}
    assert kinds["static"] != kinds["dynamic"]  # max_wait 0: dynamic starts A and B at once


def test_waiting_requests_are_drawn_in_the_queue(impls):
    def check(app):
        runs = app.scene.runs
        d = runs["static"].names.index("D")
        waits = [step for step, queue in enumerate(runs["static"].queue) if d in queue]
        assert waits == [2, 3, 4, 5, 6]  # from its arrival to the step before its prefill
        assert not any(runs["continuous"].queue)  # nobody waits: no queue row
        rows = shown(app.scene).splitlines()
        queue = next(line for line in rows if line.strip().startswith("queue"))
        assert queue[LABEL + 4 : LABEL + 14] == "D░░░░░░░░░", queue  # steps 2..6
        assert "D waits in the queue" in shown(app.scene)

    drive(impls, ["n"] * 8, check)


def test_a_preempted_request_leaves_its_slot_for_the_queue(impls):
    oracle = scenes.Oracle()
    run = scenes.run_batching(impls["batching"], "continuous", KV, oracle)
    frames = scenes.replay_pool(impls["kv_cache"], run, KV)
    assert run.preempted, "the KV screen's workload should preempt"
    for step, r in run.preempted:
        back = next(s for s in range(step, run.steps) if any(row[s].request == r for row in
                                                                run.grid))  # fmt: skip
        for s in range(step, back):  # out of every slot until it comes back, waiting in line
            assert all(row[s].request != r for row in run.grid), (r, s)
            assert r in run.queue[s] and r not in frames[s].tables
        glyph, _ = BatchingScene.waiting(run, step)  # the queue row marks the preemption
        assert glyph[1] == "!" and glyph[0] in {
            run.names[g][0] for s, g in run.preempted if s == step
        }


def test_the_shop_fits_80x24_and_the_rest_scrolls_without_tab(impls):
    def check(app):
        scene = app.scene
        assert scene.step == 8 and app.scroller.max_scroll_y == 0  # C's row and legend in view
        assert app.focused is not app.scroller  # the keys below need no Tab first

    drive(impls, ["n"] * 8, check, size=SMALL)

    def scrolled(app):
        scroller = app.scroller
        assert scroller.max_scroll_y > 2 and scroller.scroll_y > 1, scroller.scroll_y

    drive(impls, ["B", "B", "B", "l", "down", "pagedown"], scrolled, size=SMALL)


def test_help_is_a_box_wide_enough_for_its_lines(impls):
    def check(app):
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help")
        assert box.size.width >= max(len(line) for line in HELP.splitlines())  # no line wraps
        assert box.size.height == len(HELP.splitlines()) and box.region.right <= SMALL[0]

    drive(impls, ["question_mark"], check, size=SMALL)
    drive(impls, ["question_mark", "escape"], lambda app: app.screen.query_one("#batching"))


def test_the_timeline_has_step_numbers(impls):
    def check(app):
        ruler = next(line for line in shown(app.scene).splitlines() if line.startswith("step"))
        assert ruler.startswith("step 8/8")
        for step in range(9):  # each number over its step's two columns
            assert ruler[LABEL + 2 * step] == str(step), ruler

    drive(impls, ["n"] * 8, check)


def test_mid_run_figures_say_they_count_what_finished_so_far(impls):
    def check(app):
        text = shown(app.scene)
        assert "of the requests finished so far" in text and "age of the oldest unfinished" in text
        static = app.scene.runs["static"].counters(3)
        assert static["done"] == 2 and static["open"] == 4 and static["queued"] == 1  # B; D
        row = next(line.split() for line in text.splitlines() if line.startswith("static "))
        assert row[6:9] == ["2/4", "1", "4.0"], row

    drive(impls, ["n"] * 3, check)


def test_speculative_savings_count_the_drafts_calls(impls):
    def check(app):
        scene = app.scene
        assert (scene.alpha, scene.k, scene.cost) == (0.4, 8, 0.1)
        rounds = scene.run.rounds
        made, drafts = sum(r.accepted + 1 for r in rounds), sum(r.draft_calls for r in rounds)
        assert drafts >= sum(len(r.proposed) for r in rounds)  # one call per proposal at least
        spent = len(rounds) + 0.1 * drafts
        text = " ".join(shown(scene).split())
        assert f"{len(rounds)} target + {drafts} draft × 0.10 = {spent:.1f} target calls" in text
        assert spent > made and f"{100 * (spent / made - 1):.1f}% more" in text, text

    drive(impls, ["3", *"aaaaKKKK", *["n"] * 30], check)
    last = scenes.run_speculative(impls["speculative_decoding"], 0.8, 5).rounds[-1]
    assert not last.proposed and last.kind.startswith("last token: nothing left to propose")


def test_kv_screen_shows_its_settings_and_refuses_a_pool_too_small(impls):
    def check(app):
        scene = app.scene
        assert isinstance(scene, KVScene) and scene.settings.kv_blocks == 16
        text = " ".join(shown(scene).split())
        assert "10 random requests, 0.6/step, seed 0 · batch size 4 · KV blocks 16 × 4" in text
        assert "refused, nothing ran: a KV pool of 14 blocks is too small" in text
        assert all(len(frame.owners) == 16 for frame in scene.frames)  # the run shown is 16's
        assert scenes.refusal(scenes.Settings(**{**vars(KV), "kv_blocks": 14}))

    drive(impls, ["2", "k", "k", "k"], check)


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


def test_keys_change_the_workload_and_the_clock(impls):
    def check(app):
        scene = app.scene
        assert scene.settings.batch_size == 4 and scene.settings.workload == "poisson"
        assert scene.step == 0  # a new run starts at step 0
        assert all(len(run.grid) == 4 for run in scene.runs.values())
        assert scene.selected == 0  # `s` moved from continuous to static
        assert "10 random requests, 0.5/step, seed 0 · batch size 4" in shown(scene)

    drive(impls, ["n", "B", "l", "s"], check)


def test_flash_screen_follows_the_blocks_read(impls):
    def check(app):
        scene = app.scene
        run = scene.run
        assert run.visited[:2] == [0, 1] and scene.step == 1
        assert f"running max {run.row_max[1]:.3f}" in shown(scene)
        assert run.largest_bytes < run.naive_bytes

    drive(impls, ["4", "n"], check)


def test_a_wrong_implementation_is_marked_in_every_picture(impls, wrong, tmp_path):
    paths, problems = export(wrong, tmp_path, scenes.Settings())
    assert not problems
    svg = (tmp_path / "batching.svg").read_text()
    assert "NO&#160;≠&#160;A,B,C,D" in svg and ">≠≠<" in svg and WRONG[-7:] in svg.lower()
    right = timeline_png(impls, tmp_path / "right.png")
    assert (tmp_path / "batching-timeline.png").read_bytes() != right.read_bytes()

    def check(app):
        runs = app.scene.runs
        assert all(run.wrong == {0, 1, 2, 3} for run in runs.values())
        first = runs["continuous"].grid[0][0]
        assert first.kind == "prefill" and first.wrong  # its first token is already wrong
        assert "NO ≠ A,B,C,D" in shown(app.scene)

    drive(wrong, ["n"], check)


def test_an_unimplemented_stub_is_shown_not_crashed():
    stub = load_all("solution")  # the untouched stubs raise NotImplementedError

    def check(app):
        for key, scene in (("1", "batching"), ("2", "kv"), ("3", "spec"), ("4", "flash")):
            app.action_show(int(key))
            app.scene.refresh_view()
            text = " ".join(shown(app.query_one(f"#{scene}")).split())  # lines wrapped back
            assert "not implemented yet" in text, text

    drive(stub, [], check)


def test_export_of_a_kata_not_done_says_so_without_a_traceback(tmp_path, capsys):
    assert main(["--impl", "solution", "--export", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert (
        "batching: static: NotImplementedError: level 1: static_batching is not implemented" in err
    )
    assert "Traceback" not in err
    assert (tmp_path / "batching-timeline.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_in_a_real_80x24_terminal():
    session = f"katas-sim-{os.getpid()}"
    command = f"cd {REPO_ROOT} && {sys.executable} -m katas.simulate"
    tmux = ["tmux", "-L", session]
    subprocess.run([*tmux, "new-session", "-d", "-s", session, "-x", "80", "-y", "24", command],
                   check=True)  # fmt: skip

    def keys(*names: str) -> None:
        subprocess.run([*tmux, "send-keys", "-t", session, *names], check=True)

    try:
        assert _screen_shows(tmux, session, "the shop's 4 customers", 600)
        for step in range(1, 9):  # one key at a time: each answered before the next
            keys("n")
            assert _screen_shows(tmux, session, f"step {step}/8", 120)
        pane = _pane(tmux, session)
        for seen in ("▶ continuous slot 0 A▓██", "slot 2 ··C▓", "D waits in the queue",
                     "requests finished so far", "↑↓ PgDn scroll"):  # fmt: skip
            assert seen in pane, pane
        keys("?")
        assert _screen_shows(tmux, session, "c C   a draft call's cost, in target calls", 120)
        keys("Escape")
        assert _screen_shows(tmux, session, "tok/step", 120)
        keys("2")
        assert _screen_shows(tmux, session, "paged KV pool after step 0/", 300)
        keys("q")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            alive = subprocess.run([*tmux, "has-session", "-t", session], capture_output=True)
            if alive.returncode != 0:
                break
            time.sleep(0.5)
        assert alive.returncode != 0, "q did not quit the app"
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def _pane(tmux, session: str) -> str:
    return subprocess.run([*tmux, "capture-pane", "-p", "-t", session], capture_output=True,
                          text=True).stdout  # fmt: skip


def _screen_shows(tmux, session: str, text: str, seconds: float) -> bool:
    """Poll the terminal until `text` appears: a loaded machine may take long, never forever."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in _pane(tmux, session):
            return True
        time.sleep(0.3)
    return False
