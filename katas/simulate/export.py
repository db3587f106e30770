"""Pictures for READMEs and slides: an SVG screenshot of each screen and a PNG timeline."""

from __future__ import annotations

import asyncio
from pathlib import Path

from katas.simulate import scenes

SCREENS = {"batching": 1, "kv": 2, "spec": 3, "flash": 4}
SIZE = (100, 34)  # columns, rows


async def _screenshots(impls: dict, folder: Path, steps: int, settings) -> list[Path]:
    from katas.simulate.app import SimulationApp

    app = SimulationApp(impls, settings)
    paths = []
    async with app.run_test(size=SIZE) as pilot:
        for name, key in SCREENS.items():
            await pilot.press(str(key))
            for _ in range(steps):
                await pilot.press("n")
            await pilot.pause()
            paths.append(Path(app.save_screenshot(f"{name}.svg", str(folder))))
    return paths


def timeline_png(impls: dict, path: Path, settings: scenes.Settings | None = None) -> Path:
    """The three strategies' slots over time, one panel each (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    settings = settings or scenes.Settings()
    oracle = scenes.Oracle()
    runs = {
        s: scenes.run_batching(impls["batching"], s, settings, oracle) for s in scenes.STRATEGIES
    }
    palette = plt.get_cmap("tab10")
    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 1.2 + 0.9 * len(runs)), sharex=True)
    for ax, (name, run) in zip(axes, runs.items(), strict=True):
        for slot, row in enumerate(run.grid):
            for step, cell in enumerate(row):
                if cell.request is None or cell.kind in ("empty", "idle"):
                    continue
                own = palette(cell.request % 10)
                face = {"waste": "white", "prefill": (*own[:3], 0.35)}.get(cell.kind, own)
                hatch = {"waste": "xx", "prefill": "//"}.get(cell.kind, "")
                ax.barh(slot, 1, left=step, color=face, edgecolor=own, hatch=hatch, height=0.8)
        counters = run.counters(run.steps - 1)
        title = f"{name}: {counters['tokens/step']:.2f} tokens/step, p99 latency "
        ax.set_title(title + f"{counters['p99']:.0f} steps", fontsize=9, loc="left")
        ax.set_yticks(range(len(run.grid)), [f"slot {i}" for i in range(len(run.grid))])
        ax.invert_yaxis()
    axes[-1].set_xlabel("step")
    names = runs["continuous"].names
    handles = [Patch(color=palette(i % 10), label=n) for i, n in enumerate(names[:10])]
    for hatch, label in (("//", "prefill"), ("xx", "finished, slot held")):
        handles.append(Patch(facecolor="white", edgecolor="grey", hatch=hatch, label=label))
    fig.legend(handles=handles, loc="upper right", fontsize=7, ncol=2)
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def export(impls: dict, folder: Path, settings: scenes.Settings, steps: int = 6) -> list[Path]:
    """Screenshots of the four screens after `steps` steps, and the batching timeline."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = asyncio.run(_screenshots(impls, folder, steps, settings))
    paths.append(timeline_png(impls, folder / "batching-timeline.png", settings))
    return paths
