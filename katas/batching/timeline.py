"""Draw the README's timeline: the four sandwich-shop customers under the three strategies.

    python3 -m katas.batching.timeline                   # the reference, into timeline.svg
    python3 -m katas.batching.timeline --impl solution   # your solution.py, the same picture

Each customer gets a row per strategy: a pale bar while it waits (from arrival to the step before
its first token) and a solid bar while its tokens come out (first_token to finished). Written as
plain SVG, so nothing beyond the kata's own environment is needed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from grading.judge.impl import load_impl
from grading.model import make_model

CUSTOMERS = [("A", "Hello", 2, 0), ("B", "How are you today?", 6, 0), ("C", "Hi", 1, 1),
             ("D", "Hey there", 2, 2)]  # fmt: skip
COLOURS = {"A": "#e4572e", "B": "#29335c", "C": "#f3a712", "D": "#669bbc"}
STEP, ROW, LEFT, TOP = 40, 18, 170, 30  # pixels


def timelines(impl) -> dict[str, list]:
    """Completions of each strategy on the four customers, batch size 3, max_wait 0."""
    model = make_model(0, torch.float64)
    requests = [
        impl.Request(i, [ord(name) % 64] + [ord(ch) % 64 for ch in text], new, arrival)
        for i, (name, text, new, arrival) in enumerate(CUSTOMERS)
    ]
    return {
        "static": impl.static_batching(model, requests, 3),
        "dynamic": impl.dynamic_batching(model, requests, 3, 0),
        "continuous": impl.continuous_batching(model, requests, 3),
    }


def svg(runs: dict[str, list]) -> str:
    last = max(c.finished for out in runs.values() for c in out) + 1
    height = TOP + len(runs) * (len(CUSTOMERS) + 1) * ROW + 10
    width = LEFT + last * STEP + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for step in range(last + 1):
        x = LEFT + step * STEP
        parts.append(f'<line x1="{x}" y1="{TOP - 8}" x2="{x}" y2="{height - 10}" stroke="#ddd"/>')
        if step < last:
            parts.append(
                f'<text x="{x + STEP / 2}" y="{TOP - 12}" text-anchor="middle">{step}</text>'
            )
    y = TOP
    for name, out in runs.items():
        parts.append(f'<text x="8" y="{y + 13}" font-weight="bold">{name}</text>')
        y += ROW
        for (who, text, _, _), c in zip(CUSTOMERS, out, strict=True):
            colour = COLOURS[who]
            parts.append(f'<text x="24" y="{y + 13}">{who}: "{text}"</text>')
            if c.first_token > c.arrival:  # waiting
                x, w = LEFT + c.arrival * STEP, (c.first_token - c.arrival) * STEP
                parts.append(
                    f'<rect x="{x}" y="{y + 3}" width="{w}" height="{ROW - 6}" fill="{colour}" '
                    'fill-opacity="0.2"/>'
                )
            x, w = LEFT + c.first_token * STEP, (c.finished - c.first_token + 1) * STEP
            parts.append(
                f'<rect x="{x}" y="{y + 2}" width="{w}" height="{ROW - 4}" fill="{colour}"/>'
            )
            y += ROW
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="reference", help="reference, solution or a .py path")
    parser.add_argument("--out", default=str(Path(__file__).with_name("timeline.svg")))
    args = parser.parse_args(argv)
    Path(args.out).write_text(svg(timelines(load_impl("batching", args.impl))))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
