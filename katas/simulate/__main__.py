"""`python -m katas.simulate [--impl solution|reference|FOLDER] [--export DIR]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grading.judge.impl import ImplError, load_impl
from katas.simulate.models import load_models
from katas.simulate.scenes import Settings

KATAS = ("batching", "kv_cache", "speculative_decoding", "flash_attention")


def load_all(choice: str) -> dict:
    """Each kata the simulation drives: `reference`, `solution`, or a folder of <kata>.py files
    (a kata missing from the folder falls back to its reference)."""
    impls = {}
    for kata in KATAS:
        which = choice
        if choice not in ("solution", "reference"):
            path = Path(choice) / f"{kata}.py"
            which = str(path) if path.exists() else "reference"
        try:
            impls[kata] = load_impl(kata, which)
        except ImplError as exc:
            raise SystemExit(f"{kata}: {exc}") from None
    return impls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m katas.simulate", description=__doc__)
    parser.add_argument(
        "--impl", default="reference",
        help="reference (default), solution (your katas/<kata>/solution.py files), or a folder "
        "holding <kata>.py files",
    )  # fmt: skip
    parser.add_argument("--export", type=Path, help="write SVG screenshots and a PNG, then exit")
    parser.add_argument(
        "--workload", choices=["customers", "poisson"], default="customers",
        help="the batching screen's opening workload: the batching README's four customers, or "
        "random arrivals",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="the random workload's seed")
    parser.add_argument(
        "--models", type=Path, default=None,
        help="a folder holding the trained pair as target/ and draft/ (default: the shipped "
        "grading/model/checkpoints; without it the screens run random weights and show token ids)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    impls = load_all(args.impl)
    settings = Settings(workload=args.workload, seed=args.seed)
    models = load_models(args.models)
    if args.export:
        from katas.simulate.export import export

        paths, problems = export(impls, args.export, settings, models)
        for path in paths:
            print(path)
        for problem in problems:  # e.g. a kata not done yet: its screen shows the message
            print(f"{problem} (the picture shows this message)", file=sys.stderr)
        return 0
    from katas.simulate.app import SimulationApp

    SimulationApp(impls, settings, models).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
