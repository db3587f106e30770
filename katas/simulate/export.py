"""Pictures for READMEs and slides: an SVG screenshot of each screen and a PNG timeline.

The PNG draws what the batching screen draws: each strategy's slots and its queue, step by step,
with the same marks (a hatched prefill, a crossed slot held by a finished request, a pale bar for
a request waiting in the queue, `!` where one was preempted, a red `≠` for a token that differs
from decoding the request alone).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from katas.simulate import scenes
from katas.simulate.models import Models, load_models

SCREENS = {"batching": 1, "kv": 2, "spec": 3, "flash": 4}
STEPS = {"batching": None, "kv": 20, "spec": None, "flash": 6}  # None: to the end
KEYS = {"spec": ["K"]}  # k = 5: the last round has nothing left to propose
SIZE = (100, 34)  # columns, rows
WRONG = "#b00020"
# tab10 without its red, which is kept for wrong tokens
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]  # fmt: skip


async def _screenshots(impls: dict, folder: Path, settings, models: Models):
    """Each screen after its STEPS, and what the implementations raised on the way."""
    from katas.simulate.app import SimulationApp

    app = SimulationApp(impls, settings, models)
    paths = []
    async with app.run_test(size=SIZE) as pilot:
        app.clear_notifications()  # the random-weights notice: export() returns it instead
        for name, key in SCREENS.items():
            await pilot.press(str(key), *KEYS.get(name, []))
            await pilot.pause()
            for _ in range(STEPS[name] or app.scene.steps() - 1):
                await pilot.press("n")
            await pilot.pause()
            paths.append(Path(app.save_screenshot(f"{name}.svg", str(folder))))
        problems = app.problems()
    return paths, problems


def _panel(ax, run: scenes.BatchingRun) -> None:
    """One strategy: a row per slot, then the queue (the request first in line)."""
    from matplotlib.colors import to_rgba
    from matplotlib.ticker import MaxNLocator

    queue_row = len(run.grid)
    for slot, row in enumerate(run.grid):
        for step, cell in enumerate(row):
            if cell.request is None or cell.kind in ("empty", "idle"):
                continue
            own = to_rgba(COLOURS[cell.request % len(COLOURS)])
            face = {"waste": "white", "prefill": (*own[:3], 0.35)}.get(cell.kind, own)
            hatch = {"waste": "xx", "prefill": "//"}.get(cell.kind, "")
            edge = own
            if cell.wrong:
                face, edge, hatch = WRONG, WRONG, ""
                ax.text(step + 0.5, slot, "≠", ha="center", va="center", color="white")
            ax.barh(slot, 1, left=step, color=face, edgecolor=edge, hatch=hatch, height=0.8)
    for step, waiting in enumerate(run.queue):
        if waiting:
            own = to_rgba(COLOURS[waiting[0] % len(COLOURS)])
            ax.barh(queue_row, 1, left=step, color=(*own[:3], 0.25), height=0.5)
            if step == 0 or run.queue[step - 1][:1] != waiting[:1]:
                ax.text(step + 0.1, queue_row, run.names[waiting[0]], va="center", fontsize=7)
    for step, r in run.preempted:
        ax.text(step + 0.5, queue_row, run.names[r] + "!", ha="center", va="center",
                fontsize=8, weight="bold", color="black", backgroundcolor="#f3d312")  # fmt: skip
    c = run.counters(run.steps - 1)
    title = f"{run.strategy}: {c['tokens/step']:.2f} tokens/step, p99 latency {c['p99']:.0f} steps"
    ax.set_title(title, fontsize=9, loc="left")
    if run.wrong:
        names = ", ".join(run.names[r] for r in sorted(run.wrong))
        ax.set_title(f"≠ wrong tokens: {names}", fontsize=9, loc="right", color=WRONG)
    labels = [f"slot {i}" for i in range(len(run.grid))] + ["queue"]
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    ax.set_axisbelow(True)


def timeline_png(
    impls: dict, path: Path, settings: scenes.Settings | None = None, models: Models | None = None
) -> Path:
    """The three strategies' slots and queues over time, one panel each (matplotlib). A strategy
    whose implementation raises gets its panel's message instead. `models`: random weights
    unless given (the timeline shows no tokens)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    settings = settings or scenes.Settings()
    oracle = scenes.Oracle(models)
    fig, axes = plt.subplots(3, 1, figsize=(8, 1.5 + 1.3 * 3), sharex=True)
    names: list[str] = []
    for ax, strategy in zip(axes, scenes.STRATEGIES, strict=True):
        try:
            run = scenes.run_batching(impls["batching"], strategy, settings, oracle)
        except Exception as exc:  # noqa: BLE001 - a kata not done yet is drawn, not raised
            ax.text(0.01, 0.5, f"{strategy}: {type(exc).__name__}: {exc}"[:110], color=WRONG,
                    transform=ax.transAxes, fontsize=8, va="center")  # fmt: skip
            ax.set_yticks([])
            continue
        _panel(ax, run)
        names = run.names
    axes[-1].set_xlabel("step")
    handles = [Patch(color=COLOURS[i % len(COLOURS)], label=n) for i, n in enumerate(names[:9])]
    for face, hatch, label in (
        ("white", "//", "prefill"), ("white", "xx", "finished, slot held"),
        ((0.5, 0.5, 0.5, 0.25), "", "waiting in the queue"), ("#f3d312", "", "X! preempted"),
        (WRONG, "", "≠ token unlike decoding alone"),
    ):  # fmt: skip
        handles.append(Patch(facecolor=face, edgecolor="grey", hatch=hatch, label=label))
    fig.legend(handles=handles, loc="upper right", fontsize=7)
    fig.tight_layout(rect=(0, 0, 0.75, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def export(impls: dict, folder: Path, settings: scenes.Settings, models: Models | None = None):
    """Screenshots of the four screens and the batching timeline; returns the paths written and
    what the implementations raised (a kata not done yet, say). `models`: default the shipped
    trained pair, or random weights when it is missing (then their notice is a problem too)."""
    folder.mkdir(parents=True, exist_ok=True)
    models = models or load_models()
    paths, problems = asyncio.run(_screenshots(impls, folder, settings, models))
    paths.append(timeline_png(impls, folder / "batching-timeline.png", settings, models))
    return paths, [models.notice, *problems] if models.notice else problems
