"""The simulation, driven as a person would: keys pressed through Textual's pilot, a real
terminal through tmux, and the exported pictures. What each screen shows is checked against the
run it comes from.

Most tests run the random-weight models, whose runs do not depend on whether trained checkpoints
are present; the text the screens show is tested with a pair trained for a few steps here."""

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

from mutant_kit import read_mutant, write_mutant  # noqa: E402
from rich.console import Console  # noqa: E402

from grading.judge.impl import REPO_ROOT, load_impl  # noqa: E402
from grading.model import make_model  # noqa: E402
from grading.model.hf import save_checkpoint  # noqa: E402
from grading.model.train import decode, stdlib_source  # noqa: E402
from grading.model.train import main as train  # noqa: E402
from katas.batching import timeline  # noqa: E402
from katas.simulate import scenes  # noqa: E402
from katas.simulate.__main__ import load_all, main  # noqa: E402
from katas.simulate.app import (  # noqa: E402
    ACCEPTED,
    HELP,
    LABEL,
    REJECTED,
    TARGET,
    WRONG,
    BatchingScene,
    HelpScreen,
    KVScene,
    SimulationApp,
    SpecScene,
)
from katas.simulate.export import export, timeline_png  # noqa: E402
from katas.simulate.models import load_models, pieces, random_models, shown, visible  # noqa: E402

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
def trained(tmp_path_factory):
    """A byte-level target and draft trained for a few steps: poor models, but they read bytes."""
    folder = tmp_path_factory.mktemp("models")
    train(["--steps", "5", "--out", str(folder), "--measure", "4096"])
    return folder


@pytest.fixture(scope="module")
def text_models(trained):
    models = load_models(trained)
    assert models.text and not models.notice, models.notice
    return models


RANDOM = random_models()  # what the screens run without trained checkpoints


@pytest.fixture(scope="module")
def wrong(impls, tmp_path_factory):
    """The references, with a batching implementation that reads a prefill's first position."""
    mutant = read_mutant(REPO_ROOT / "tests/mutants/batching/next_token_from_first_position.py")
    path = write_mutant(mutant, tmp_path_factory.mktemp("mutant"))
    return dict(impls, batching=load_impl("batching", str(path)))


def on_screen(scene, width: int = SIZE[0]) -> str:
    """The scene's text as the terminal shows it (without colour)."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(scene.view())
    return console.export_text()


def drive(impls, keys: list[str], check, size=SIZE, models=RANDOM) -> None:
    """Start the app headless on `models`, press `keys`, then run `check(app)`."""

    async def run() -> None:
        app = SimulationApp(impls, models=models)
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
        rows = on_screen(app.scene).splitlines()
        queue = next(line for line in rows if line.strip().startswith("queue"))
        assert queue[LABEL + 4 : LABEL + 14] == "D░░░░░░░░░", queue  # steps 2..6
        assert "D waits in the queue" in on_screen(app.scene)

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
        ruler = next(line for line in on_screen(app.scene).splitlines() if line.startswith("step"))
        assert ruler.startswith("step 8/8")
        for step in range(9):  # each number over its step's two columns
            assert ruler[LABEL + 2 * step] == str(step), ruler

    drive(impls, ["n"] * 8, check)


def test_mid_run_figures_say_they_count_what_finished_so_far(impls):
    def check(app):
        text = on_screen(app.scene)
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
        text = " ".join(on_screen(scene).split())
        assert f"{len(rounds)} target + {drafts} draft × 0.10 = {spent:.1f} target calls" in text
        assert spent > made and f"{100 * (spent / made - 1):.1f}% more" in text, text

    drive(impls, ["3", *"aaaaKKKK", *["n"] * 30], check)
    last = scenes.run_speculative(impls["speculative_decoding"], 0.8, 5).rounds[-1]
    assert not last.proposed and last.kind.startswith("last token: nothing left to propose")


def test_kv_screen_shows_its_settings_and_refuses_a_pool_too_small(impls):
    def check(app):
        scene = app.scene
        assert isinstance(scene, KVScene) and scene.settings.kv_blocks == 16
        text = " ".join(on_screen(scene).split())
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
        assert f"{used}/{blocks} blocks in use" in on_screen(scene)
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
        assert "10 random requests, 0.5/step, seed 0 · batch size 4" in on_screen(scene)

    drive(impls, ["n", "B", "l", "s"], check)


def test_flash_screen_follows_the_blocks_read(impls):
    def check(app):
        scene = app.scene
        run = scene.run
        assert run.visited[:2] == [0, 1] and scene.step == 1
        assert f"running max {run.row_max[1]:.3f}" in on_screen(scene)
        assert run.largest_bytes < run.naive_bytes

    drive(impls, ["4", "n"], check)


def test_a_wrong_implementation_is_marked_in_every_picture(impls, wrong, tmp_path):
    paths, problems = export(wrong, tmp_path, scenes.Settings(), RANDOM)
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
        assert "NO ≠ A,B,C,D" in on_screen(app.scene)

    drive(wrong, ["n"], check)


def test_an_unimplemented_stub_is_shown_not_crashed():
    stub = load_all("solution")  # the untouched stubs raise NotImplementedError

    def check(app):
        for key, scene in (("1", "batching"), ("2", "kv"), ("3", "spec"), ("4", "flash")):
            app.action_show(int(key))
            app.scene.refresh_view()
            text = " ".join(on_screen(app.query_one(f"#{scene}")).split())  # lines wrapped back
            assert "not implemented yet" in text, text

    drive(stub, [], check)


def test_export_of_a_kata_not_done_says_so_without_a_traceback(tmp_path, capsys):
    absent = tmp_path / "no-models"
    assert main(["--impl", "solution", "--export", str(tmp_path), "--models", str(absent)]) == 0
    err = capsys.readouterr().err
    assert (
        "batching: static: NotImplementedError: level 1: static_batching is not implemented" in err
    )
    assert f"no trained models in {absent}" in err  # and it ran on random weights
    assert "Traceback" not in err
    assert (tmp_path / "batching-timeline.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_pieces_join_to_the_decoded_text_on_one_row():
    text = "def f(x):\n\treturn 'é€'\r\x00\x7f"
    ids = list(text.encode()) + [0xFF, 0xE2, 0x82]  # an invalid byte, a character cut short
    assert shown(ids) == visible(decode(ids))
    assert shown(ids).startswith("def f(x):⏎⇥return 'é€'␍␀␡")
    assert not any(ch.isspace() and ch != " " for ch in shown(ids))  # nothing breaks the row
    for cut in range(len(ids) + 1):  # cuts inside a character too
        for second in range(cut, len(ids) + 1):
            sizes = [cut, second - cut, len(ids) - second]
            assert "".join(pieces(ids, sizes)) == shown(ids), sizes


def test_speculative_rounds_are_text_in_colours(impls, text_models):
    spec = impls["speculative_decoding"]
    held_out = visible(stdlib_source(held_out=True))
    for alpha in (None, 0.5):  # the trained draft, and one scripted to be wrong half the time
        run = scenes.run_speculative(spec, alpha, 4, models=text_models)
        assert run.exact and run.prompt_text in held_out and "\n" not in run.text
        rounds = run.rounds
        assert "".join(r.accepted_text + r.extra_text for r in rounds) == run.text
        for r in rounds:
            assert r.rejected_text == shown(r.proposed[r.accepted :]) and r.extra_text
            if max(r.proposed, default=0) < 128:  # ASCII: each piece decodes on its own
                assert r.accepted_text == shown(r.proposed[: r.accepted])
            row = SpecScene.round_text(r)  # ✓ kept ✗ thrown away → the target's, each styled
            styled = [(row.plain[x.start : x.end], x.style) for x in row.spans if x.style != "dim"]
            parts = [(r.accepted_text, ACCEPTED), (r.rejected_text, REJECTED),
                     (r.extra_text, TARGET)]  # fmt: skip
            assert styled == [(text, style) for text, style in parts if text], styled
        if alpha == 0.5:
            assert any(r.rejected_text for r in rounds)
    assert len({ACCEPTED, REJECTED, TARGET}) == 3

    def check(app):
        scene = app.scene
        assert scene.alpha is None and scene.run.rounds and scene.run.text
        text = " ".join(on_screen(scene).split())
        assert "the trained draft model proposes" in text
        assert " ".join(f"output {scene.run.text}".split()) in text, text
        first = scene.run.rounds[0]
        row = "round 1: " + "".join(
            mark + piece for mark, piece in (("✓", first.accepted_text),
                                             ("✗", first.rejected_text), ("→", first.extra_text))
            if piece
        )  # fmt: skip
        assert " ".join(row.split()) in text, text
        legend = (
            "✓green the draft proposed, the target kept",
            "✗red, struck the target threw away",
            "→blue the target's own token (a fix, or a bonus)",
        )
        assert all(words in text for words in legend), text
        assert "✓ green: kept  ✗ red, struck: thrown away  → blue: the target's own" in HELP

    drive(impls, ["3", *["n"] * 40], check, models=text_models)

    def scripted_then_trained(app):
        scene = app.scene
        assert scene.alpha == 0.7 and "α 0.7 (draft agrees)" in on_screen(scene)
        assert scene.adjust("d") and scene.alpha is None and scene.run.rounds
        assert "the trained draft model proposes" in on_screen(scene)

    drive(impls, ["3", "a"], scripted_then_trained, models=text_models)


def test_batching_and_kv_screens_show_prompts_and_tokens_as_text(impls, text_models):
    held_out = stdlib_source(held_out=True)

    def shop(app):
        scene = app.scene
        run = scene.runs["continuous"]
        last = run.steps - 1  # continuous is done before static: it shows its last step
        assert scene.step == 8 and last == 5 and not run.wrong
        rows = [row.rstrip() for row in on_screen(scene).splitlines()]
        shapes = [len(job.prompt) for job in scenes.jobs(scenes.Settings())]
        assert [len(p) for p in run.prompts] == shapes  # the shop's prompts, as source
        for r, name in enumerate(run.names):
            assert decode(run.prompts[r]) in held_out
            assert run.made_by(r, last) == list(run.completions[r].tokens)  # all out by the end
            row = f"{name:<3}{shown(run.prompts[r])}▸{shown(run.completions[r].tokens)}"
            assert row.rstrip() in rows, (row, rows)
        assert "continuous after step 5: each prompt ▸ its tokens so far" in rows
        # The grid, the legend and the table fit 80x24 as on random weights: only the prompts
        # (a blank line, a title, a row each) are below the fold.
        assert app.scroller.max_scroll_y <= len(run.names) + 2

    drive(impls, ["n"] * 8, shop, size=SMALL, models=text_models)

    def midway(app):
        run = app.scene.runs["static"]
        assert app.scene.selected == 0 and app.scene.step == 3
        text = on_screen(app.scene)
        assert "static after step 3: each prompt ▸ its tokens so far" in text
        for r, completion in enumerate(run.completions):
            made = run.made_by(r, 3)
            assert bool(made) == (completion.first_token <= 3)
            if completion.finished <= 3:
                assert made == list(completion.tokens)
            assert f"{shown(run.prompts[r])}▸{shown(made)}".rstrip() in text, text

    drive(impls, ["s", *["n"] * 3], midway, models=text_models)

    def pool(app):
        scene = app.scene
        frame = scene.frames[scene.step]
        assert frame.tables, "some request holds blocks at step 12"
        text = on_screen(scene)
        for r, table in frame.tables.items():
            held = (scene.run.prompts[r] + list(scene.run.completions[r].tokens))[: frame.held[r]]
            blocks = scene.blocks(r, frame.held[r])
            assert blocks.plain.count("¦") == len(table) - 1  # one piece a block
            assert blocks.plain.replace("¦", "") == shown(held)
            assert f"{scene.run.names[r]:<3} {table}" in text
        assert "block tables and the tokens the blocks hold, ¦ between blocks" in text

    drive(impls, ["2", *["n"] * 12], pool, models=text_models)


def test_without_trained_models_the_screens_run_random_weights(impls, tmp_path):
    absent = load_models(tmp_path / "absent")
    assert not absent.text and absent.target.config.vocab_size == 64
    assert absent.notice.startswith(f"no trained models in {tmp_path / 'absent'}")
    for name in ("target", "draft"):  # a pair that does not read bytes
        save_checkpoint(make_model(0, max_seq_len=64), tmp_path / "ids" / name)
    other = load_models(tmp_path / "ids")
    assert not other.text and "vocabularies (64, 64), not bytes (256)" in other.notice
    for models in (absent, other):
        assert "\n" not in models.notice and "random weights" in models.notice

    def check(app):
        assert [n.message for n in app._notifications] == [absent.notice]
        batching = app.query_one("#batching")
        assert "each prompt ▸" not in on_screen(batching)  # no text on random weights
        app.action_show(3)
        app.scene.refresh_view()
        scene = app.scene
        assert scene.alpha == 0.8 and not scene.run.text
        text = on_screen(scene)
        assert absent.notice in " ".join(text.split())
        first = scene.run.rounds[0]
        assert f"{first.proposed[0]:>3}" in text and "✓green" not in text  # token ids
        assert not scene.adjust("d")  # no trained draft to go back to

    drive(impls, [], check, models=absent)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_in_a_real_80x24_terminal(trained):
    session = f"katas-sim-{os.getpid()}"
    command = f"cd {REPO_ROOT} && {sys.executable} -m katas.simulate --models {trained}"
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
