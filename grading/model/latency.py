"""Latency as a serving engine reports it, on the batching kata's step clock.

A `Completion` says when its request arrived, the step whose call produced its first new token
(`first_token`) and the step of its last (`finished`). Per request:

- time to first token, TTFT = first_token - arrival + 1 steps: the wait in the queue plus the
  step that produced the token (a request served the step it arrives has a TTFT of 1);
- time per output token, TPOT = (finished - first_token) / (n_tokens - 1) steps, for requests
  with at least 2 new tokens: the steps between its first and last token, per token after the
  first (1 when it gets a token every step, below 1 when speculation commits several).

Each is summarised by its 50th and 99th percentiles over the requests of a run, interpolated
linearly between the sorted values (NumPy's default; with a dozen requests p99 is nearly the
largest). In seconds, each on the run's own clock: given each target call's wall-clock time
(one call per step that runs anything, in order), a step lasts as long as its call, so a step
that prefills a long prompt is a long step for every request in it; without them, every step
counts as the run's average one (its wall-clock time over its target calls).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFINITIONS = (
    "TTFT, time to first token: first_token - arrival + 1 steps, from the step a request "
    "arrives to the step whose call produced its first new token, that step included (its wait "
    "in the queue and its prefill). TPOT, time per output token: (finished - first_token) / "
    "(new tokens - 1) steps, the steps from its first new token to its last per token after "
    "the first, over the requests with at least 2 new tokens. p50 and p99: percentiles over the "
    "requests of the counted run, linear between the sorted values (over a dozen requests p99 "
    "is nearly the largest). Seconds: on the run's own clock, each step as long as its target "
    "call took in the median timed run (one call per step that runs anything), the arrivals on "
    "the step clock: a step that prefills a long prompt is long for every request in it. ms / "
    "step: that run's wall-clock time over its target calls."
)
P99 = dict(alpha=0.5, hatch="//")  # how the picture draws p99 beside p50


def ttft_steps(completion) -> int:
    """Steps from arrival to the first new token, the step that produced it included."""
    return completion.first_token - completion.arrival + 1


def tpot_steps(completion) -> float | None:
    """Steps per new token after the first; None for a request with fewer than 2 new tokens."""
    n = len(completion.tokens)
    return None if n < 2 else (completion.finished - completion.first_token) / (n - 1)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) of `values`, linear between the sorted values."""
    if not values or not 0 <= q <= 100:
        raise ValueError(f"percentile: expected values and 0 <= q <= 100, got {values!r:.60}, {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Latency:
    """One run's TTFT and TPOT, (p50, p99) in steps and in seconds, and its seconds per step."""

    ttft: tuple[float, float]
    tpot: tuple[float, float] | None  # None: no request had 2 or more new tokens
    step_s: float
    ttft_s: tuple[float, float]
    tpot_s: tuple[float, float] | None


def step_ends(completions: list, call_seconds: list[float]) -> dict[int, float] | None:
    """{step: seconds from the run's start to the end of that step}: the busy steps (those from
    some request's arrival to its last token) in order, each as long as its call; idle steps
    take no time. None when the calls do not match the busy steps one to one."""
    busy = sorted({t for c in completions for t in range(c.arrival, c.finished + 1)})
    if len(busy) != len(call_seconds):
        return None
    ends, clock = {}, 0.0
    for step, took in zip(busy, call_seconds, strict=True):
        clock += took
        ends[step] = clock
    return ends


def _summary(values: list[float]) -> tuple[float, float] | None:
    return (percentile(values, 50), percentile(values, 99)) if values else None


def latency(completions: list, step_s: float, call_seconds: list[float] | None = None) -> Latency:
    """TTFT and TPOT of `completions`: in steps, and in seconds on the clock of `call_seconds`
    (each target call's wall-clock time, in order) or, without them, at `step_s` per step."""
    ttft = [ttft_steps(c) for c in completions]
    tpot = [t for t in map(tpot_steps, completions) if t is not None]
    ends = None if call_seconds is None else step_ends(completions, call_seconds)
    if ends is None:
        ttft_s = [t * step_s for t in ttft]
        tpot_s = [t * step_s for t in tpot]
    else:
        started = {s: ends[s] - took for s, took in zip(sorted(ends), call_seconds, strict=True)}
        ttft_s = [ends[c.first_token] - started[c.arrival] for c in completions]
        tpot_s = [
            (ends[c.finished] - ends[c.first_token]) / (len(c.tokens) - 1)
            for c in completions
            if len(c.tokens) >= 2
        ]
    return Latency(_summary(ttft), _summary(tpot), step_s, _summary(ttft_s), _summary(tpot_s))


def table(rows: list[tuple[str, int, float, Latency | None]]) -> list[str]:
    """A markdown table of (variant, requests, tokens/s, latency or None: no step clock)."""
    lines = [
        "| variant | requests | tokens/s | ms / step | TTFT p50, steps | TTFT p99, steps | "
        "TPOT p50, steps | TPOT p99, steps | TTFT p50, s | TTFT p99, s | TPOT p50, ms | "
        "TPOT p99, ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, requests, rate, lat in rows:
        if lat is None:
            lines.append(f"| {name} | {requests} | {rate:,.0f} |" + " — |" * 9)
            continue
        tpot, tpot_ms = ("—", "—"), ("—", "—")
        if lat.tpot is not None:
            tpot = tuple(f"{t:.2f}" for t in lat.tpot)
            tpot_ms = tuple(f"{t * 1e3:.3g}" for t in lat.tpot_s)
        ttft = tuple(f"{t:,.1f}" for t in lat.ttft)
        ttft_s = tuple(f"{t:.3g}" for t in lat.ttft_s)
        lines.append(
            f"| {name} | {requests} | {rate:,.0f} | {lat.step_s * 1e3:.1f} | {' | '.join(ttft)} | "
            f"{' | '.join(tpot)} | {' | '.join(ttft_s)} | {' | '.join(tpot_ms)} |"
        )
    return lines


def draw(ax, latencies: list[Latency | None], what: str, colours: list) -> None:
    """Bars of `what` ("ttft", in seconds, log scale, or "tpot", in ms) on the matplotlib axes
    `ax`: p50 and, hatched beside it, p99, one pair per entry; None: "no step clock"."""
    scale, unit = (1.0, "s") if what == "ttft" else (1e3, "ms")
    for shift, q, style in ((-0.2, 0, {}), (0.2, 1, P99)):
        heights = []
        for lat in latencies:
            pair = None if lat is None else getattr(lat, f"{what}_s")
            heights.append(math.nan if pair is None else pair[q] * scale)
        x = [i + shift for i in range(len(latencies))]
        bars = ax.bar(x, heights, 0.4, color=colours, **style)
        ax.bar_label(bars, fmt="%.3g", fontsize=6, rotation=90, padding=2)
    for i, lat in enumerate(latencies):
        if lat is None:
            ax.text(i, 0.05, "no step clock", rotation=90, ha="center", fontsize=7,
                    transform=ax.get_xaxis_transform())  # fmt: skip
    if what == "ttft":
        ax.set_yscale("log")
    ax.set_ylabel(f"{what.upper()} ({unit})", fontsize=8)
    ax.margins(y=0.25)
