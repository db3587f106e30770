"""What is assigned, and how a kata's tests become points.

An assignment names the katas graded, the points each is worth, the levels of each that count,
their weights, and whether a level counts only when every one of its tests passes:

    # homework.toml
    all_or_nothing = false            # the default for every kata below

    [katas.speculative_decoding]
    points = 10                       # what the kata is worth (default: 100 / number of katas)
    levels = [1, 2, 3]                # the parts graded (default: every part of the kata)
    weights = { 1 = 1, 2 = 1, 3 = 2 } # within the kata (default: equal)
    all_or_nothing = true

    [katas.kv_cache]                  # every default

A kata's points are its `points` times the weighted mean, over its parts, of each part's
fraction of tests passed (or 1 when all pass and 0 otherwise, all or nothing). A part is a level
("1", "2", ...) or a file of tests outside the levels ("compile"). A test that cannot run on
this machine (a GPU test on a CPU) is "not measured here": it counts neither way, and a part
with no measured test leaves the weighting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grading.judge.impl import kata_names


@dataclass(frozen=True)
class KataSpec:
    points: float = 100.0
    levels: tuple[str, ...] | None = None  # None: every part
    weights: dict[str, float] = field(default_factory=dict)  # missing parts weigh 1
    all_or_nothing: bool = False


@dataclass(frozen=True)
class Assignment:
    katas: dict[str, KataSpec]

    @property
    def total(self) -> float:
        return sum(spec.points for spec in self.katas.values())

    def rule(self) -> str:
        """The scoring rule in one paragraph, printed in every report."""
        parts = []
        for kata, spec in self.katas.items():
            levels = ", ".join(spec.levels) if spec.levels else "every part"
            weights = ", ".join(f"{k}: {v:g}" for k, v in spec.weights.items()) or "equal"
            how = "all or nothing" if spec.all_or_nothing else "fraction of tests passed"
            parts.append(
                f"{kata}: {spec.points:g} points; {levels}; weights {weights}; per part, {how}"
            )
        return (
            f"Out of {self.total:g} points. "
            + "; ".join(parts)
            + ". A kata's points are its weighted mean over parts of each part's score; "
            "tests that cannot run on this machine (GPU) are not measured and do not count."
        )


def every_kata(katas: list[str]) -> Assignment:
    """Each kata equally weighted, out of 100 points in all."""
    return Assignment({kata: KataSpec(points=100 / len(katas)) for kata in katas})


def load(path: Path) -> Assignment:
    """Read an assignment file (TOML, see the module's docstring); errors name the mistake."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        raise SystemExit("reading an assignment needs Python 3.11 or later (tomllib)") from None
    data = tomllib.loads(path.read_text())
    default = bool(data.get("all_or_nothing", False))
    katas = {}
    for kata, spec in (data.get("katas") or {}).items():
        if kata not in kata_names():
            raise SystemExit(f"{path}: no kata named {kata!r} (katas: {', '.join(kata_names())})")
        unknown = set(spec) - {"points", "levels", "weights", "all_or_nothing"}
        if unknown:
            raise SystemExit(f"{path}: [katas.{kata}] has unknown keys {sorted(unknown)}")
        levels = spec.get("levels")
        katas[kata] = KataSpec(
            points=float(spec.get("points", 100 / len(data["katas"]))),
            levels=tuple(str(n) for n in levels) if levels is not None else None,
            weights={str(k): float(v) for k, v in (spec.get("weights") or {}).items()},
            all_or_nothing=bool(spec.get("all_or_nothing", default)),
        )
    if not katas:
        raise SystemExit(f"{path}: no [katas.<name>] table: nothing is assigned")
    return Assignment(katas)


def score_kata(tests: list[dict], spec: KataSpec, zeroed: bool) -> tuple[float, dict]:
    """(the kata's fraction of its points, {part: {"passed", "failed", "score"}}).

    `tests` carry "part" and "status"; skipped tests are not measured here."""
    parts: dict[str, dict] = {}
    for test in tests:
        if spec.levels is not None and test["part"] not in spec.levels:
            continue
        counts = parts.setdefault(test["part"], {"passed": 0, "failed": 0, "not_measured": 0})
        if test["status"] == "passed":
            counts["passed"] += 1
        elif test["status"] == "skipped":
            counts["not_measured"] += 1
        else:
            counts["failed"] += 1
    weighted, weights = 0.0, 0.0
    for part, counts in parts.items():
        measured = counts["passed"] + counts["failed"]
        if not measured:
            counts["score"] = None
            continue
        fraction = counts["passed"] / measured
        if spec.all_or_nothing:
            fraction = float(fraction == 1.0)
        counts["score"] = round(fraction, 4)
        weight = spec.weights.get(part, 1.0)
        weighted, weights = weighted + weight * fraction, weights + weight
    score = 0.0 if zeroed or not weights else weighted / weights
    return score, dict(sorted(parts.items(), key=lambda kv: _order(kv[0])))


def _order(part: str) -> tuple:
    return (0, int(part), "") if part.isdigit() else (1, 0, part)
