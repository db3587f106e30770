"""The terminal app: four screens over the scenes, driven from the keyboard (Textual).

Every screen shows one run of the real implementations (scenes.py) and a clock: `n` steps it,
space plays and pauses, `+`/`-` change the speed, `r` rewinds, `s` switches strategy, ↑ ↓ PgUp
PgDn scroll. The characters carry the meaning too (▓ prefill, █ decode, x waste, ░ waiting,
! preempted, ≠ a wrong token, · empty; ✓ accepted, ✗ rejected, → the target's token), so the
screens read the same without colour (Textual honours NO_COLOR). A screen computes its run when
it is first shown. With the trained models, prompts and tokens are shown as text on one row
(⏎ a newline, ⇥ a tab); on random weights as token ids.
"""

from __future__ import annotations

import math

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from katas.simulate import scenes
from katas.simulate.models import Models, load_models, pieces, shown

PALETTE = ["#e4572e", "#4c9be8", "#f3a712", "#59a14f", "#b07aa1", "#ff9da7", "#9c755f"]
GLYPH = {"prefill": "▓", "decode": "█", "waste": "x", "stall": "░", "empty": "·", "idle": " "}
WRONG = "bold #ffffff on #b00020"  # a token that differs from decoding the request alone
ACCEPTED = "bold #000000 on #59a14f"  # a draft's proposal the target kept
REJECTED = "strike #ff8c69"  # a draft's proposal the target threw away
TARGET = "bold #ffffff on #3b6fd4"  # the target's own token: its fix, or its bonus
PREEMPTED = "bold #000000 on #f3d312"
LABEL = 20  # the width of a timeline row's label: "▶ continuous slot 0 "
WINDOW = 30  # steps shown at once
HELP = """\
 n  →       one step              space   play / pause
 +  -       faster / slower       r       back to step 0
 s          next strategy         1 2 3 4 switch screen
 ↑  ↓       scroll                PgUp PgDn  scroll a page
 ?  Esc     close this help       q       quit

 batching and KV cache
   a A   arrival rate (random workload)   b B   batch size
   w W   max_wait                         k K   KV pool blocks
   l     the shop's customers / a random workload
 speculative decoding
   a A   α, how often a scripted draft agrees   k K   proposals per round
   c C   a draft call's cost, in target calls   d     the trained draft
   ✓ green: kept  ✗ red, struck: thrown away  → blue: the target's own token"""


def colour(request: int | None) -> str:
    return "dim" if request is None else PALETTE[request % len(PALETTE)]


def fmt(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f}"


def ruler(label: str, first: int, last: int) -> Text:
    """Step numbers over the timeline's columns (two characters a step), as many as fit."""
    line, end = label.ljust(LABEL), LABEL
    for step in range(first, last + 1):
        at = LABEL + 2 * (step - first)
        if at >= end + (step > first):
            line = line.ljust(at) + str(step)
            end = len(line)
    return Text(line + "\n", style="bold")


class Scene(Static):
    """One screen: a run, a clock over it, and how to draw the state at that clock."""

    step = 0
    error = ""  # why the implementation's last run failed, shown instead of crashing
    notice = ""  # why the last key was refused
    started = False

    def attempt(self, run, *args, **kwargs):
        """`run(*args, **kwargs)`, or None with `error` set when the implementation raises."""
        try:
            result = run(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a learner's code may raise anything
            self.error = f"{type(exc).__name__}: {exc}"
            return None
        self.error = ""
        return result

    def problems(self) -> list[str]:
        """What went wrong in this screen's runs, for a summary outside the terminal."""
        return [self.error] if self.error else []

    def rerun(self) -> None:
        pass

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
        """Apply a parameter key; True if it meant something here."""
        return False

    def switch(self) -> None:
        pass

    def width(self) -> int:
        return self.content_size.width or 100  # 100 before the screen is laid out

    def refresh_view(self) -> None:
        if not self.started:
            self.started = True
            self.rerun()
        self.update(self.view())

    def view(self):
        raise NotImplementedError


class SettingsScene(Scene):
    """A screen over batching runs whose settings the keys change, refused before running when
    they cannot run."""

    def __init__(self, impl, settings: scenes.Settings, oracle: scenes.Oracle, **kwargs) -> None:
        super().__init__(**kwargs)
        self.impl, self.settings, self.oracle = impl, settings, oracle

    def adjust(self, key: str) -> bool:
        changed = scenes.adjust_settings(self.settings, key)
        if changed is None:
            return False
        self.notice = scenes.refusal(changed)
        if not self.notice:
            self.settings = changed
            self.rerun()
        self.refresh_view()
        return True

    def header(self, with_wait: bool, prefix: str = "") -> Text:
        text = Text(prefix + self.settings.describe(with_wait) + "\n", style="bold")
        if self.notice:
            text.append(f"refused, nothing ran: {self.notice}\n", style="bold red")
        return text


class BatchingScene(SettingsScene):
    """The three strategies on one workload: slots and the queue as rows, steps left to right."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.selected = 2  # continuous
        self.runs: dict = {}  # strategy -> BatchingRun, or the error its implementation raised

    def rerun(self) -> None:
        self.runs = {}
        for strategy in scenes.STRATEGIES:
            run = self.attempt(scenes.run_batching, self.impl, strategy, self.settings, self.oracle)
            self.runs[strategy] = run if run is not None else self.error
        self.error = ""
        self.step = 0

    def problems(self) -> list[str]:
        return [f"{s}: {r}" for s, r in self.runs.items() if isinstance(r, str)]

    def done_runs(self) -> dict[str, scenes.BatchingRun]:
        return {s: r for s, r in self.runs.items() if not isinstance(r, str)}

    def steps(self) -> int:
        return max([1, *(run.steps for run in self.done_runs().values())])

    def switch(self) -> None:
        self.selected = (self.selected + 1) % len(scenes.STRATEGIES)
        self.refresh_view()

    def view(self):
        first = max(0, self.step - WINDOW + 1)
        text = self.header(with_wait=True)
        text.append_text(ruler(f"step {self.step}/{self.steps() - 1}", first, self.step))
        for i, (name, run) in enumerate(self.runs.items()):
            label = ("▶ " if i == self.selected else "  ") + name
            style = "bold" if i == self.selected else ""
            if isinstance(run, str):
                text.append(f"{label}: ", style=style)
                text.append(f"{run}\n", style="bold red")
                continue
            for slot, row in enumerate(run.grid[:8]):
                text.append(f"{label if slot == 0 else '':<13}", style=style)
                text.append(f"slot {slot} ")
                for cell in row[first : self.step + 1]:
                    text.append(*self.cell(run, cell))
                text.append("\n")
            if any(run.queue) or run.preempted:
                text.append(f"{'':<13}queue  ")
                for step in range(first, min(self.step, run.steps - 1) + 1):
                    text.append(*self.waiting(run, step))
                text.append("\n")
        text.append(
            "A▓ A's prefill  ██ decode  xx finished, slot held  D░ D waits in the queue\n"
            "C! preempted, slot freed  ≠≠ a token unlike decoding it alone  ·· empty slot",
            style="dim",
        )
        if not self.oracle.models.text:
            return Group(text, self.table())
        return Group(text, self.table(), self.requests())

    def requests(self) -> Text:
        """Each request of the selected strategy as text: its prompt (dim), ▸, then the tokens
        that were out by the current step (bold). A long prompt loses its start."""
        strategy = scenes.STRATEGIES[self.selected]
        run = self.runs.get(strategy)
        if not isinstance(run, scenes.BatchingRun):
            return Text()
        step = min(self.step, run.steps - 1)
        text = Text(f"\n{strategy} after step {step}: each prompt ▸ its tokens so far\n",
                    style="bold", no_wrap=True, overflow="ellipsis")  # fmt: skip
        for r, name in enumerate(run.names):
            prompt, out = shown(run.prompts[r]), shown(run.made_by(r, step))
            room = max(8, self.width() - 5 - len(out))
            if len(prompt) > room:
                prompt = "…" + prompt[len(prompt) - room + 1 :]
            text.append(f"{name:<3}", style=colour(r))
            text.append(prompt, style="dim")
            text.append("▸")
            text.append(out + "\n", style=f"bold {colour(r)}")
        return text

    @staticmethod
    def cell(run: scenes.BatchingRun, cell: scenes.Cell) -> tuple[str, str]:
        glyph = GLYPH[cell.kind] * 2
        if cell.kind == "prefill":
            glyph = run.names[cell.request][0] + GLYPH["prefill"]
        if cell.wrong:
            return glyph[0] + "≠" if cell.kind == "prefill" else "≠≠", WRONG
        return glyph, colour(cell.request) if cell.kind != "empty" else "dim"

    @staticmethod
    def waiting(run: scenes.BatchingRun, step: int) -> tuple[str, str]:
        """The queue row at one step: who was preempted then, or who is first in line."""
        gone = [r for when, r in run.preempted if when == step]
        if gone:
            return run.names[gone[0]][0] + "!", PREEMPTED
        if not run.queue[step]:
            return "  ", ""
        head = run.queue[step][0]
        before = run.queue[step - 1][:1] if step > 0 else []
        fresh = before != [head] or any(when == step - 1 for when, _ in run.preempted)
        return (run.names[head][0] + "░" if fresh else "░░"), colour(head)

    def table(self) -> Table:
        table = Table(
            "strategy", "tok/step", "TTFT*", "p50*", "p99*", "waste", "done", "queue", "open",
            "exact", box=None, header_style="bold underline", pad_edge=False,
            caption="*: of the requests finished so far · open: age of the oldest unfinished",
            caption_justify="left",
        )  # fmt: skip
        for name, run in self.done_runs().items():
            c = run.counters(min(self.step, run.steps - 1))
            wrong = ",".join(run.names[r] for r in sorted(run.wrong))
            table.add_row(
                name, f"{c['tokens/step']:.2f}", fmt(c["ttft"]), fmt(c["p50"]), fmt(c["p99"]),
                str(c["waste"]), f"{c['done']}/{len(run.completions)}", str(c["queued"]),
                fmt(c["open"]), Text(f"NO ≠ {wrong}", style=WRONG) if wrong else "yes",
            )  # fmt: skip
        return table


class KVScene(SettingsScene):
    """The paged pool under continuous batching, block by block, on a workload of its own."""

    def __init__(self, impl, kv_impl, settings, oracle: scenes.Oracle, **kwargs) -> None:
        super().__init__(impl, settings, oracle, **kwargs)
        self.kv_impl, self.frames, self.run = kv_impl, [], None

    def rerun(self) -> None:
        self.frames, self.run, self.step = [], None, 0
        run = self.attempt(scenes.run_batching, self.impl, "continuous", self.settings, self.oracle)
        if run is not None:
            frames = self.attempt(scenes.replay_pool, self.kv_impl, run, self.settings)
            if frames is not None:
                self.run, self.frames = run, frames

    def steps(self) -> int:
        return max(1, len(self.frames))

    @property
    def texts(self) -> bool:
        return self.oracle.models.text

    def blocks(self, r: int, held: int) -> Text:
        """The tokens request r's blocks hold, as text, block by block."""
        tokens = (self.run.prompts[r] + list(self.run.completions[r].tokens))[:held]
        size = self.settings.block_size
        sizes = [min(size, held - at) for at in range(0, held, size)]
        return Text("¦", style="dim").join(
            Text(piece, style=colour(r)) for piece in pieces(tokens, sizes)
        )

    def view(self):
        text = self.header(with_wait=False, prefix="continuous batching of ")
        if not self.frames:
            return text + Text(f"nothing to show: {self.error or 'no calls'}", style="bold red")
        frame = self.frames[self.step]
        used = sum(o is not None for o in frame.owners)
        text.append(f"paged KV pool after step {self.step}/{self.steps() - 1}: ", style="bold")
        text.append(f"{used}/{len(frame.owners)} blocks in use\n")
        for i, owner in enumerate(frame.owners):
            glyph = "·" if owner is None else self.run.names[owner][0]
            text.append(f" {glyph}", style=colour(owner) if owner is not None else "dim")
            if i % 16 == 15 or i == len(frame.owners) - 1:
                text.append("\n")
        text.append("block tables", style="bold")
        text.append(" and the tokens the blocks hold, ¦ between blocks\n" if self.texts else "\n")
        shape = max((len(str(t)) for t in frame.tables.values()), default=0)
        for r, table in sorted(frame.tables.items()):
            text.append(f"  {self.run.names[r]:<3}", style=colour(r))
            text.append(f" {str(table):<{shape}}")
            if self.texts:
                held = self.blocks(r, frame.held[r])
                held.truncate(self.width() - 8 - shape, overflow="ellipsis")  # on one row
                text.append("  ")
                text.append_text(held)
            text.append("\n")
        text.append(
            f"bytes in blocks {frame.used_bytes}   a contiguous cache of the same requests "
            f"{frame.contiguous_bytes}\n"
        )
        gone = [(when, r) for when, r in self.run.preempted if when <= self.step]
        if gone:
            text.append("preempted (blocks freed, recomputed later): ", style="bold")
            for when, r in gone:
                text.append(f"{self.run.names[r]}! at step {when}", style=PREEMPTED)
                text.append("  ")
            text.append("\n")
        if frame.error:
            text.append(f"the pool refused: {frame.error}\n", style="bold red")
        return text


class SpecScene(Scene):
    """Rounds of speculative decoding: proposals, the first rejection, the target's token, and
    what the rounds cost with the draft's calls counted. With the trained pair they are text, and
    the draft is the trained draft until `a`/`A` script one that agrees with probability α."""

    def __init__(self, impl, models: Models, **kwargs) -> None:
        super().__init__(**kwargs)
        self.impl, self.models, self.k, self.cost = impl, models, 4, scenes.DRAFT_COST
        self.alpha = None if models.text else 0.8  # None: the trained draft
        self.run = None

    def rerun(self) -> None:
        self.run = self.attempt(
            scenes.run_speculative, self.impl, self.alpha, self.k, models=self.models
        )
        self.step = 0

    def steps(self) -> int:
        return max(1, len(self.run.rounds)) if self.run else 1

    def adjust(self, key: str) -> bool:
        if key == "d" and self.models.text:
            self.alpha = None
            self.rerun()
            self.refresh_view()
            return True
        changes = {
            "a": ("alpha", -0.1), "A": ("alpha", 0.1), "k": ("k", -1), "K": ("k", 1),
            "c": ("cost", -0.05), "C": ("cost", 0.05),
        }  # fmt: skip
        if key not in changes:
            return False
        name, delta = changes[key]
        current = getattr(self, name)
        value = (0.8 if current is None else current) + delta  # α: 0.8 after the trained draft
        limits = {"alpha": (0.0, 1.0), "k": (1, 16), "cost": (0.0, 1.0)}[name]
        setattr(self, name, round(min(limits[1], max(limits[0], value)), 2))
        if name == "cost":
            self.refresh_view()  # the same run, costed again
        else:
            self.rerun()
            self.refresh_view()
        return True

    def view(self):
        run = self.run
        if self.alpha is None:
            draft = "the trained draft model proposes"
        else:
            draft = f"α {self.alpha} (draft agrees)"
        text = Text(
            f"{draft} · k {self.k} a round · a draft call costs {self.cost:.2f} target calls\n",
            style="bold",
        )
        if self.models.notice:
            text.append(self.models.notice + "\n", style="dim")
        if run is None:
            return text + Text(f"speculative_decode failed: {self.error}", style="bold red")
        rounds = run.rounds[: self.step + 1]
        text.append_text(self.summary(rounds))
        if not run.exact:
            text.append("the output differs from the target's own greedy decoding!\n", WRONG)
        if self.models.text:
            text.append_text(self.so_far(run, rounds))
        text.append(f"round {self.step + 1}/{len(run.rounds)}, the latest last\n", style="bold")
        for i, r in enumerate(rounds):
            text.append(f"round {i + 1:>2}: ")
            if self.models.text:
                text.append_text(self.round_text(r))
            else:
                self.round_ids(text, r)
            text.append(f"  {r.draft_calls} draft calls\n", style="dim")
        return text

    def so_far(self, run: scenes.SpecRun, rounds: list[scenes.Round]) -> Text:
        """The prompt, the output so far (what the draft proposed and the target kept, and the
        target's own tokens, each in its colour), and what the colours mean."""
        text = Text("prompt  ")
        text.append(run.prompt_text + "\n", style="dim")
        text.append("output  ")
        for r in rounds:
            text.append(r.accepted_text, style=ACCEPTED)
            text.append(r.extra_text, style=TARGET)
        text.append("\n")
        for mark, colour_name, style, meaning in (
            ("✓", "green", ACCEPTED, " the draft proposed, the target kept   "),
            ("✗", "red, struck", REJECTED, " the target threw away\n"),
            ("→", "blue", TARGET, " the target's own token (a fix, or a bonus)   ⏎ a newline\n"),
        ):  # fmt: skip
            text.append(mark)
            text.append(colour_name, style=style)
            text.append(meaning, style="dim")
        return text

    @staticmethod
    def round_text(r: scenes.Round) -> Text:
        """One round as text: ✓ the proposals kept, ✗ those thrown away, → the target's token."""
        text = Text()
        for mark, piece, style in (
            ("✓", r.accepted_text, ACCEPTED), ("✗", r.rejected_text, REJECTED),
            ("→", r.extra_text, TARGET),
        ):  # fmt: skip
            if piece:
                text.append(mark)
                text.append(piece, style=style)
        text.append(f"  {r.kind}", style="dim")
        return text

    @staticmethod
    def round_ids(text: Text, r: scenes.Round) -> None:
        """One round as token ids (random weights)."""
        for j, token in enumerate(r.proposed):
            if j < r.accepted:
                text.append(f"{token:>3}✓", style="green")
            elif j == r.accepted:
                text.append(f"{token:>3}✗", style="bold red")
            else:
                text.append(f"{token:>3} ", style="dim")
        text.append(f" → {r.extra} ({r.kind})", style="bold blue")

    def summary(self, rounds: list[scenes.Round]) -> Text:
        """Tokens made against calls paid, the draft's calls at their cost ratio."""
        proposed = sum(len(r.proposed) for r in rounds)
        accepted = sum(r.accepted for r in rounds)
        made = sum(r.accepted + 1 for r in rounds)
        drafts = sum(r.draft_calls for r in rounds)
        spent = len(rounds) + self.cost * drafts
        saved = 1 - spent / made
        rate = accepted / proposed if proposed else math.nan
        verdict = f"{fmt(100 * saved)}% saved" if saved >= 0 else f"{fmt(-100 * saved)}% more"
        return Text(
            f"accepted {accepted}/{proposed} proposals ({fmt(100 * rate)}%), {made} tokens made\n"
            f"cost: {len(rounds)} target + {drafts} draft × {self.cost:.2f} = {spent:.1f} target "
            f"calls (plain: {made}): {verdict}\n"
            "(a target call costs the same for 1 token or k + 1: memory-bound)\n",
            style="bold",
        )


class FlashScene(Scene):
    """The score matrix in tiles: which key blocks were read, and one row's running statistics."""

    def __init__(self, impl, **kwargs) -> None:
        super().__init__(**kwargs)
        self.impl, self.run = impl, None

    def rerun(self) -> None:
        self.run = self.attempt(scenes.run_flash, self.impl)

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


class HelpScreen(ModalScreen):
    """The keys, in a box wide enough for them (any key closes it)."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Static { width: auto; height: auto; border: round $accent; padding: 0 1;
                          background: $surface; }
    """

    def compose(self) -> ComposeResult:
        yield Static(Text(HELP), id="help")

    def on_key(self, event) -> None:
        event.stop()
        if event.key == "q":
            self.app.exit()
        self.dismiss()


class SimulationApp(App):
    TITLE = "inference katas: the simulation"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    TabbedContent, ContentSwitcher, TabPane { height: 1fr; }
    TabPane { padding: 0; }
    """
    # Priority: the keys work whichever widget has the focus (the tabs take ← → otherwise).
    BINDINGS = [
        Binding("q", "quit", "quit"), Binding("question_mark", "help", "keys"),
        Binding("n,right", "step", "step", key_display="n", priority=True),
        Binding("space", "play", "play"),
        Binding("plus", "speed(2)", "faster", show=False),
        Binding("minus", "speed(0.5)", "slower", show=False),
        Binding("r", "rewind", "rewind"), Binding("s", "switch", "strategy"),
        Binding("down", "scroll(1)", "scroll", key_display="↑↓ PgDn", priority=True),
        Binding("up", "scroll(-1)", "scroll up", show=False, priority=True),
        Binding("pagedown", "page(1)", "page down", show=False, priority=True),
        Binding("pageup", "page(-1)", "page up", show=False, priority=True),
        *(Binding(str(i), f"show({i})", show=False) for i in range(1, 5)),
    ]  # fmt: skip
    SCREENS_IDS = ["batching", "kv", "spec", "flash"]

    def __init__(
        self, impls: dict, settings: scenes.Settings | None = None, models: Models | None = None,
        **kwargs,
    ) -> None:  # fmt: skip
        """`models`: those every screen runs, loaded once (default: the shipped trained pair, or
        random weights with a notice when it is missing)."""
        super().__init__(**kwargs)
        self.impls, self.settings = impls, settings or scenes.Settings()
        self.models = models or load_models()
        self.interval, self.timer = 0.5, None

    def compose(self) -> ComposeResult:
        oracle = scenes.Oracle(self.models)
        batching = BatchingScene(self.impls["batching"], self.settings, oracle, id="batching")
        kv = scenes.Settings(workload="poisson", rate=0.6, batch_size=4, kv_blocks=20)
        with TabbedContent(id="tabs"):
            with TabPane("1 batching", id="tab-batching"), VerticalScroll():
                yield batching
            with TabPane("2 KV cache", id="tab-kv"), VerticalScroll():
                yield KVScene(self.impls["batching"], self.impls["kv_cache"], kv, oracle, id="kv")
            with TabPane("3 speculative", id="tab-spec"), VerticalScroll():
                yield SpecScene(self.impls["speculative_decoding"], self.models, id="spec")
            with TabPane("4 FlashAttention", id="tab-flash"), VerticalScroll():
                yield FlashScene(self.impls["flash_attention"], id="flash")
        yield Footer()

    def on_mount(self) -> None:
        if self.models.notice:
            self.notify(self.models.notice, severity="warning", timeout=10)
        self.scene.refresh_view()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        for scene in event.pane.query(Scene):  # none while the app shuts down
            scene.refresh_view()

    @property
    def active(self) -> str:
        return self.query_one("#tabs", TabbedContent).active  # e.g. "tab-kv"

    @property
    def scene(self) -> Scene:
        return self.query_one(f"#{self.active.removeprefix('tab-')}", Scene)

    @property
    def scroller(self) -> VerticalScroll:
        return self.query_one(f"#{self.active} VerticalScroll", VerticalScroll)

    def check_action(self, action: str, parameters: tuple) -> bool:
        return not isinstance(self.screen, HelpScreen)  # the help takes every key while open

    def action_step(self) -> None:
        self.scene.advance()

    def action_rewind(self) -> None:
        self.scene.rewind()

    def action_switch(self) -> None:
        self.scene.switch()

    def action_scroll(self, lines: int) -> None:
        self.scroller.scroll_relative(y=lines, animate=False)

    def action_page(self, direction: int) -> None:
        if direction > 0:
            self.scroller.scroll_page_down(animate=False)
        else:
            self.scroller.scroll_page_up(animate=False)

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
        self.push_screen(HelpScreen())

    def problems(self) -> list[str]:
        """What each screen's implementation raised, e.g. a kata not done yet."""
        return [f"{scene.id}: {p}" for scene in self.query(Scene) for p in scene.problems()]

    def on_key(self, event) -> None:
        if event.character and self.scene.adjust(event.character):
            event.stop()
