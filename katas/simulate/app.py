"""The terminal app: four screens over the scenes, driven from the keyboard (Textual).

Every screen shows one run of the real implementations (scenes.py) and a clock: `n` steps it,
space plays and pauses, `+`/`-` change the speed, `r` rewinds, `s` switches strategy. The
characters carry the meaning too (█ decode, ▓ prefill, x waste, · empty), so the screens read the
same without colour (Textual honours NO_COLOR).
"""

from __future__ import annotations

import math

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static, TabbedContent, TabPane

from katas.simulate import scenes

PALETTE = ["#e4572e", "#4c9be8", "#f3a712", "#59a14f", "#b07aa1", "#ff9da7", "#9c755f"]
GLYPH = {"prefill": "▓", "decode": "█", "waste": "x", "wait": "░", "empty": "·", "idle": " "}
HELP = """Keys
  n / →   one step            space   play / pause
  + / -   faster / slower     r       back to step 0
  s       next strategy       1-4     switch screen
  batching and KV cache:  a/A arrival rate  b/B batch size  w/W max_wait  k/K KV blocks
                          l   customers / random workload
  speculative decoding:   a/A agreement α   k/K proposals per round
  ?       this help           q       quit"""


def colour(request: int | None) -> str:
    return "dim" if request is None else PALETTE[request % len(PALETTE)]


def fmt(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f}"


class Scene(Static):
    """One screen: a run, a clock over it, and how to draw the state at that clock."""

    step = 0
    error = ""  # why the implementation's last run failed, shown instead of crashing

    def attempt(self, run, *args, **kwargs):
        """`run(*args, **kwargs)`, or None with `error` set when the implementation raises."""
        try:
            result = run(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a learner's code may raise anything
            self.error = f"{type(exc).__name__}: {exc}"
            return None
        self.error = ""
        return result

    def steps(self) -> int:
        return 1

    def advance(self) -> bool:
        """One step forward; False at the end."""
        if self.step + 1 >= self.steps():
            return False
        self.step += 1
        self.refresh_view()
        return True

    def rewind(self) -> None:
        self.step = 0
        self.refresh_view()

    def adjust(self, key: str) -> bool:
        """Apply a parameter key; True if it changed something (the run is redone)."""
        return False

    def switch(self) -> None:
        pass

    def refresh_view(self) -> None:
        self.update(self.view())

    def view(self):
        raise NotImplementedError


class BatchingScene(Scene):
    """The three strategies on one workload: slots as rows, steps left to right."""

    def __init__(self, impl, settings: scenes.Settings, oracle: scenes.Oracle, **kwargs) -> None:
        super().__init__(**kwargs)
        self.impl, self.settings, self.oracle = impl, settings, oracle
        self.selected = 2  # continuous
        self.rerun()

    def rerun(self) -> None:
        runs = self.attempt(
            lambda: {
                s: scenes.run_batching(self.impl, s, self.settings, self.oracle)
                for s in scenes.STRATEGIES
            }
        )
        self.runs = runs if runs is not None else getattr(self, "runs", {})
        self.step = 0

    def steps(self) -> int:
        return max([1, *(run.steps for run in self.runs.values())])

    def adjust(self, key: str) -> bool:
        if not scenes.adjust_settings(self.settings, key):
            return False
        self.rerun()
        self.refresh_view()
        return True

    def switch(self) -> None:
        self.selected = (self.selected + 1) % len(scenes.STRATEGIES)
        self.refresh_view()

    def view(self):
        s, width = self.settings, 30
        first = max(0, self.step - width + 1)
        text = Text()
        text.append(
            f"{s.workload} workload · batch size {s.batch_size} · max_wait {s.max_wait} · "
            f"KV blocks {s.kv_blocks or '∞'} · rate {s.rate}/step · step {self.step}\n",
            style="bold",
        )
        for i, (name, run) in enumerate(self.runs.items()):
            marker = "▶ " if i == self.selected else "  "
            text.append(f"{marker}{name}\n", style="bold" if i == self.selected else "")
            for slot, row in enumerate(run.grid[:6]):
                text.append(f"  slot {slot} ")
                for cell in row[first : self.step + 1]:
                    glyph = GLYPH[cell.kind] * 2
                    if cell.kind == "prefill":
                        glyph = run.names[cell.request][0] + GLYPH["prefill"]
                    style = colour(cell.request) if cell.kind != "empty" else "dim"
                    if cell.request in run.wrong:
                        style += " reverse"
                    text.append(glyph, style=style)
                text.append("\n")
        table = Table("strategy", "tokens/step", "TTFT", "p50", "p99", "waste", "done", "exact")
        for name, run in self.runs.items():
            c = run.counters(min(self.step, run.steps - 1))
            exact = "yes" if not run.wrong else "NO: " + ",".join(run.names[r] for r in run.wrong)
            table.add_row(
                name, f"{c['tokens/step']:.2f}", fmt(c["ttft"]), fmt(c["p50"]), fmt(c["p99"]),
                str(c["waste"]), f"{c['done']}/{len(run.completions)}", exact,
            )  # fmt: skip
        if self.error:
            text.append(f"refused: {self.error}\n", style="bold red")
        legend = Text(
            "A▓ prefill of A  █ decode  x slot held by a finished request  ░ waiting  · empty  "
            "reversed: tokens differ from solo decoding",
            "dim",
        )
        return Group(table, text, legend)  # the counters first: visible in 80 x 24


class KVScene(Scene):
    """The paged pool under continuous batching, block by block, with its own workload."""

    def __init__(self, impl, kv_impl, settings, oracle: scenes.Oracle, **kwargs) -> None:
        super().__init__(**kwargs)
        self.impl, self.kv_impl, self.settings, self.oracle = impl, kv_impl, settings, oracle
        self.frames, self.run = [], None
        self.rerun()

    def rerun(self) -> None:
        run = self.attempt(scenes.run_batching, self.impl, "continuous", self.settings, self.oracle)
        if run is None:
            return
        requests, _ = scenes.workload(self.impl, self.settings, 64, 64)
        sizes = [len(r.prompt) + r.max_new_tokens - 1 for r in requests]
        frames = self.attempt(scenes.replay_pool, self.kv_impl, run, sizes, self.settings)
        if frames is not None:
            self.run, self.frames, self.step = run, frames, 0

    def steps(self) -> int:
        return max(1, len(self.frames))

    adjust = BatchingScene.adjust

    def view(self):
        if not self.frames:
            return Text(f"nothing to show: {self.error or 'no calls'}", style="bold red")
        frame = self.frames[self.step]
        text = Text(f"paged KV pool after step {self.step}: ", style="bold")
        if self.error:
            text = Text(f"refused: {self.error}\n", style="bold red") + text
        used = sum(o is not None for o in frame.owners)
        text.append(f"{used}/{len(frame.owners)} blocks in use\n")
        for i, owner in enumerate(frame.owners):
            glyph = "·" if owner is None else self.run.names[owner][0]
            text.append(f" {glyph}", style=colour(owner) if owner is not None else "dim")
            if i % 16 == 15:
                text.append("\n")
        text.append("\n\nblock tables\n", style="bold")
        for r, table in sorted(frame.tables.items()):
            text.append(f"  {self.run.names[r]:<3}", style=colour(r))
            text.append(f" {table}\n")
        text.append(
            f"\nbytes in blocks {frame.used_bytes}   a contiguous cache of the same requests "
            f"{frame.contiguous_bytes}\n"
        )
        gone = [self.run.names[r] for step, r in self.run.preempted if step <= self.step]
        if gone:
            text.append(f"preempted (recomputed later): {', '.join(gone)}\n", style="bold yellow")
        if frame.error:
            text.append(f"the pool refused: {frame.error}\n", style="bold red")
        return text


class SpecScene(Scene):
    """Rounds of speculative decoding: proposals, the first rejection, the target's token."""

    def __init__(self, impl, **kwargs) -> None:
        super().__init__(**kwargs)
        self.impl, self.alpha, self.k = impl, 0.8, 4
        self.rerun()

    def rerun(self) -> None:
        self.run = self.attempt(scenes.run_speculative, self.impl, self.alpha, self.k)
        self.step = 0

    def steps(self) -> int:
        return max(1, len(self.run.rounds)) if self.run else 1

    def adjust(self, key: str) -> bool:
        changes = {"a": ("alpha", -0.1), "A": ("alpha", 0.1), "k": ("k", -1), "K": ("k", 1)}
        if key not in changes:
            return False
        name, delta = changes[key]
        value = getattr(self, name) + delta
        setattr(
            self, name, round(min(1.0, max(0.0, value)), 1) if name == "alpha" else max(1, value)
        )
        self.rerun()
        self.refresh_view()
        return True

    def view(self):
        run = self.run
        if run is None:
            return Text(f"speculative_decode failed: {self.error}", style="bold red")
        text = Text(f"α = {self.alpha}  k = {self.k}  round {self.step + 1}/{len(run.rounds)}\n\n",
                    style="bold")  # fmt: skip
        for i, r in enumerate(run.rounds[: self.step + 1]):
            text.append(f"round {i + 1:>2}: ")
            for j, token in enumerate(r.proposed):
                if j < r.accepted:
                    text.append(f"{token:>3}✓", style="green")
                elif j == r.accepted:
                    text.append(f"{token:>3}✗", style="bold red")
                else:
                    text.append(f"{token:>3} ", style="dim")
            kind = "bonus" if r.accepted == len(r.proposed) else "fix"
            text.append(f"  → {r.extra} ({kind})\n", style="bold blue")
        rounds = run.rounds[: self.step + 1]
        proposed = sum(len(r.proposed) for r in rounds)
        accepted = sum(r.accepted for r in rounds)
        made = sum(r.accepted + 1 for r in rounds)
        rate = accepted / proposed if proposed else math.nan
        text.append(
            f"\naccepted {accepted}/{proposed} ({fmt(100 * rate)}%)   target calls {len(rounds)} "
            f"for {made} tokens; plain decoding needs {made}: "
            f"{fmt(100 * (1 - len(rounds) / made))}% saved\n"
        )
        if not run.exact:
            text.append("the output differs from the target's own greedy decoding!\n", "bold red")
        return text


class FlashScene(Scene):
    """The score matrix in tiles: which key blocks were read, and one row's running statistics."""

    def __init__(self, impl, **kwargs) -> None:
        super().__init__(**kwargs)
        self.run = self.attempt(scenes.run_flash, impl)

    def steps(self) -> int:
        return max(1, len(self.run.visited)) if self.run else 1

    def view(self):
        if self.run is None or not self.run.visited:
            return Text(f"tiled_attention read no key block: {self.error}", style="bold red")
        run, b = self.run, self.run.block
        tiles = math.ceil(run.n / b)
        seen = run.visited[: self.step + 1]
        text = Text(f"scores {run.n}×{run.n} in {b}×{b} tiles, causal; query row {run.row}\n\n",
                    style="bold")  # fmt: skip
        for qi in range(tiles):
            text.append("  ")
            for ki in range(tiles):
                above = ki * b > qi * b + b - 1  # every key in the tile is after every query
                if ki == (seen[-1] if seen else -1):
                    text.append("▣ ", style="bold yellow")
                elif ki in seen:
                    text.append("x " if above else "█ ", style="dim red" if above else "green")
                else:
                    text.append("· " if above else "░ ", style="dim")
            text.append("\n")
        text.append("\n▣ the block being read  █ read  x read but entirely masked  · skippable\n")
        m, total = run.row_max[len(seen) - 1], run.row_sum[len(seen) - 1]
        text.append(f"\nrow {run.row}: running max {m:.3f}, running sum {total:.3f}\n")
        text.append(f"memory: the naive matrix {run.naive_bytes} B; largest tensor here "
                    f"{run.largest_bytes} B\n")  # fmt: skip
        return text


class SimulationApp(App):
    TITLE = "inference katas: the simulation"
    BINDINGS = [
        Binding("q", "quit", "quit"), Binding("question_mark", "help", "keys"),
        Binding("n,right", "step", "step"), Binding("space", "play", "play/pause"),
        Binding("plus", "speed(2)", "faster", show=False),
        Binding("minus", "speed(0.5)", "slower", show=False),
        Binding("r", "rewind", "rewind"), Binding("s", "switch", "strategy"),
        *(Binding(str(i), f"show({i})", show=False) for i in range(1, 5)),
    ]  # fmt: skip
    SCREENS_IDS = ["batching", "kv", "spec", "flash"]

    def __init__(self, impls: dict, settings: scenes.Settings | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.impls, self.settings = impls, settings or scenes.Settings()
        self.interval, self.timer = 0.5, None

    def compose(self) -> ComposeResult:
        yield Header()
        oracle = scenes.Oracle()
        batching = BatchingScene(self.impls["batching"], self.settings, oracle, id="batching")
        kv = scenes.Settings(workload="poisson", rate=0.6, batch_size=4, kv_blocks=20)
        with TabbedContent(id="tabs"):
            # Each screen scrolls: an 80 x 24 terminal shows the top, the rest a scroll away.
            with TabPane("1 batching", id="tab-batching"), VerticalScroll():
                yield batching
            with TabPane("2 KV cache", id="tab-kv"), VerticalScroll():
                yield KVScene(self.impls["batching"], self.impls["kv_cache"], kv, oracle, id="kv")
            with TabPane("3 speculative", id="tab-spec"), VerticalScroll():
                yield SpecScene(self.impls["speculative_decoding"], id="spec")
            with TabPane("4 FlashAttention", id="tab-flash"), VerticalScroll():
                yield FlashScene(self.impls["flash_attention"], id="flash")
        yield Footer()

    def on_mount(self) -> None:
        for scene in self.query(Scene):
            scene.refresh_view()

    @property
    def scene(self) -> Scene:
        active = self.query_one("#tabs", TabbedContent).active  # e.g. "tab-kv"
        return self.query_one(f"#{active.removeprefix('tab-')}", Scene)

    def action_step(self) -> None:
        self.scene.advance()

    def action_rewind(self) -> None:
        self.scene.rewind()

    def action_switch(self) -> None:
        self.scene.switch()

    def action_show(self, n: int) -> None:
        self.query_one("#tabs", TabbedContent).active = f"tab-{self.SCREENS_IDS[n - 1]}"

    def action_play(self) -> None:
        if self.timer is None:
            self.timer = self.set_interval(self.interval, self._tick)
        else:
            self.timer.stop()
            self.timer = None

    def _tick(self) -> None:
        if not self.scene.advance() and self.timer is not None:
            self.timer.stop()
            self.timer = None

    def action_speed(self, factor: float) -> None:
        self.interval = min(2.0, max(0.05, self.interval / factor))
        if self.timer is not None:
            self.timer.stop()
            self.timer = self.set_interval(self.interval, self._tick)

    def action_help(self) -> None:
        self.notify(HELP, title="keys", timeout=10)

    def on_key(self, event) -> None:
        if event.character and self.scene.adjust(event.character):
            event.stop()
