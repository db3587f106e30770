"""What each technique of the serving engine buys, and where it stands against transformers.

    nox -s benchmark -- serving                             # the same, its packages installed
    python -m katas.serving.benchmark                       # the reference engine, on the CPU
    python -m katas.serving.benchmark --impl solution       # your katas/serving/solution.py
    python -m katas.serving.benchmark --impl path/to/file.py --requests 200 --repeats 3

Two models serve a workload of the shipped shape (`poisson_workload`, seed 0, arriving fast
enough that the batch is usually full), once per variant, and every variant's wall-clock tokens/s
is divided by naive_serve's on the same model, measured in the same run.

The mixture: the shipped mixture-of-experts model, random weights, random prompts.

- the ladder, one technique added at a time: naive_serve (one request at a time, no cache, every
  expert on every token); + KV cache (`serve` with max_batch_size=1 and dense experts);
  + continuous batching (max_batch_size=32, dense experts); + grouped MoE (`serve`);
- `serve` with a technique switched off, where its API allows: dense experts (the ladder's
  "+ continuous batching"), max_batch_size=1. The KV cache cannot be switched off: the engine
  always keeps one;
- what users would run instead, on the very same weights (`grading/model/baselines.py`):
  Hugging Face transformers' batched `generate` (groups of max_batch_size in arrival order, a
  static or a dynamic KV cache) and its continuous batching (`generate_batch`), where the
  installed version has it. Both serve the whole workload as if every request were waiting
  from the start: they ignore arrivals, which favours them.

The mixture again on a shared-prefix workload (`shared_prefix_workload`: arrivals and output
lengths drawn as above, each prompt one of 4 system prompts of 64 tokens and a tail of 4-16 of
its own): naive_serve and the engine variants, no transformers, and `serve` with
prefix_caching=True, which reads each system prompt's full blocks once.

The mixture again on a workload with long prompts (the shipped one, every sixth prompt made 192
tokens long): `serve` with and without chunked prefill (max_tokens_per_step=64), where the time
per output token of the requests that decode while a long prompt is read is what changes.

The trained pair (`python -m grading.model.train`, --models): speculative decoding pays only when
the draft usually guesses the target's next token, which no random draft does. So it is measured on
the repository's trained byte-level target and draft, with the workload's lengths and arrivals and
prompts cut from held-out source: naive_serve, and `serve` at max_batch_size 1 and 32, each without
and with the draft (k = 4).

"Dense experts" is `DenseExperts`, a thin wrapper that forwards everything to the model except
that its `forward_packed` drops the engine's `feed_forward`, so each block runs the model's own
mixture (every expert on every token, as naive_serve does). Everything else, the engine's paged
attention included, is untouched.

Timing: `time.perf_counter` (the GPU synchronised), the median of --repeats rounds, each round
timing every variant once, all in one run. naive_serve is slow (one call per token, each
re-feeding the whole sequence), so it and the other variants that serve one request at a time
(max_batch_size=1) run on the first few requests only; tokens/s is a rate, so the ratios stay
fair. The counts beside the timings come from one more, untimed run of each variant under
`torch.utils.flop_counter.FlopCounterMode`, per generated token: FLOPs (target and draft), model
calls (`model.calls`; for transformers, its forward calls), tokens fed to the target (for
transformers, every position of every call, padding included), and the peak KV memory in use: the
most blocks the rows of one target call need at once (a row at `start` feeding T tokens needs
ceil((start + T) / block_size) blocks), read from `model.batch_log`, times the bytes of a block
in the target's and the draft's layers. The draft's acceptance rate comes from the same logs.

Latency beside throughput, for every variant on the step clock (naive_serve and the engine; not
transformers, which ignore arrivals and keep no clock): time to first token and time per output
token, p50 and p99 over the requests of the counted run, in steps and in seconds (each step as
long as its target call took in the median timed run); `grading/model/latency.py` defines them.

Optional packages: without transformers the transformers rows are skipped, without matplotlib
the picture; each says so in a line. The tables are printed before the picture is drawn.

Writes `serving_<device>.md` (the tables, the command, the machine) and `serving_<device>.png`
(the ratios and the latencies) into --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch._dynamo  # noqa: F401 - FlopCounterMode imports it on first use, and it replaces
from torch import nn  # torch functions (torch.manual_seed): imported here, before any test runs
from torch.utils.flop_counter import FlopCounterMode

from grading.devices import has_cuda, synchronize
from grading.judge.impl import ImplError, load_impl, repo_relative
from grading.model import TinyLlama, from_pretrained, make_model
from grading.model.baselines import as_transformers, transformers_continuous, transformers_static
from grading.model.latency import DEFINITIONS, P99, Latency, draw, latency, table
from grading.model.naive import naive_serve
from grading.model.train import SHIPPED
from grading.model.workload import held_out_prompts, poisson_workload, shared_prefix_workload

# The shipped models: float32 on the CPU; on a GPU, bfloat16 and about 0.45 B parameters.
CPU_MODEL = dict(
    n_layers=2, n_heads=16, n_kv_heads=8, head_dim=16, hidden_dim=512, n_experts=8, top_k=2,
    vocab_size=256, max_seq_len=256,
)  # fmt: skip
GPU_MODEL = dict(
    n_layers=4, n_heads=16, n_kv_heads=4, head_dim=128, hidden_dim=1408, n_experts=8, top_k=2,
    vocab_size=32000, max_seq_len=1024,
)  # fmt: skip
# Arrivals at 2 per step against about 1 finishing per step (32 rows, outputs of about 34 tokens
# on the CPU): a queue builds up, and most of the work runs in full batches; the last few long
# answers finish in small ones, as in real traffic.
CPU_WORKLOAD = dict(rate=2.0, scale=0.1)
GPU_WORKLOAD = dict(rate=2.0, scale=0.25)
# A chat service with a few system prompts: arrivals and output lengths drawn as in the workload
# above, each prompt one of 4 prefixes of 64 tokens and a short tail of its own.
SHARED_PREFIX = dict(n_prefixes=4, prefix_len=64, tail=(4, 16))
# Long prompts among short ones: every LONG_EVERY-th prompt of the shipped workload made
# LONG_PROMPT tokens long, and the step budget that chunked prefill gives `serve` against them.
LONG_PROMPT, LONG_EVERY, CHUNK = 192, 6, 64
SEED = 0
MAX_BATCH = 32
K = 4  # draft tokens per round on the trained pair
# Variants that serve one request at a time (naive_serve, max_batch_size=1) are timed and counted
# on the first this many requests: they are slow, and their rate hardly depends on the queue.
ALONE_REQUESTS = 12


class DenseExperts(nn.Module):
    """`model` with the engine's grouped expert dispatch switched off: `forward_packed` drops the
    engine's `feed_forward`, so each block runs the model's own mixture (every expert on every
    token). Every other attribute (config, blocks, calls, batch_log ...) is the model's."""

    def __init__(self, model: TinyLlama) -> None:
        super().__init__()
        self.model = model

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)  # parameters, buffers, submodules: `model`
        except AttributeError:
            return getattr(self._modules["model"], name)

    def forward(self, ids, cache=None):
        return self.model(ids, cache)

    def forward_packed(self, rows, starts, attention, feed_forward=None):
        return self.model.forward_packed(rows, starts, attention)  # the model's own mixture


@dataclass(frozen=True)
class Variant:
    """One row of the tables. `runner`: "engine" (the implementation's `serve`), "naive"
    (naive_serve), or transformers' "static" and "dynamic" (`generate` with that KV cache) and
    "continuous" (`generate_batch`)."""

    name: str
    section: str  # "ladder", "switched off", "transformers" or "trained pair"
    runner: str = "engine"
    batch: int = MAX_BATCH  # max_batch_size
    dense: bool = False  # every expert on every token (DenseExperts)
    speculative: bool = False  # with the draft
    chunk: int | None = None  # max_tokens_per_step
    prefix_caching: bool = False

    @property
    def alone(self) -> bool:
        """Serves one request at a time: run on the first ALONE_REQUESTS requests only."""
        return self.runner == "naive" or self.batch == 1

    @property
    def clocked(self) -> bool:
        """Serves on the step clock (naive_serve and the engine), so its latency is known."""
        return self.runner in ("naive", "engine")


NAIVE = Variant("naive_serve", "ladder", runner="naive")
NO_DRAFT = Variant("+ grouped MoE: serve", "ladder")
VARIANTS = [  # the mixture's engine variants (the GPU test serves these too)
    NAIVE,
    Variant("+ KV cache", "ladder", batch=1, dense=True),
    Variant("+ continuous batching", "ladder", dense=True),
    NO_DRAFT,
    Variant("serve, max_batch_size=1", "switched off", batch=1),
]
TRANSFORMERS = [
    Variant("transformers generate, static cache", "transformers", runner="static"),
    Variant("transformers generate, dynamic cache", "transformers", runner="dynamic"),
    Variant("transformers generate_batch (continuous)", "transformers", runner="continuous"),
]
SHARED = [dataclasses.replace(v, section="shared prefix") for v in VARIANTS] + [
    Variant("+ prefix caching", "shared prefix", prefix_caching=True)
]
LONG = [
    Variant("serve", "long prompts"),
    Variant(f"+ chunked prefill, {CHUNK} tokens a step", "long prompts", chunk=CHUNK),
]
PAIR_NAIVE = Variant("naive_serve", "trained pair", runner="naive")
PAIR_SERVE = Variant("serve", "trained pair")
PAIR = [
    PAIR_NAIVE,
    Variant("serve, max_batch_size=1", "trained pair", batch=1),
    Variant("+ speculative decoding, max_batch_size=1", "trained pair", batch=1, speculative=True),
    PAIR_SERVE,
    Variant("+ speculative decoding", "trained pair", speculative=True),
]


def models(variant: Variant, model: TinyLlama, draft: TinyLlama | None):
    """The (target, draft or None) that `variant` serves with."""
    wrap = DenseExperts if variant.dense else lambda m: m
    return wrap(model), wrap(draft) if variant.speculative else None


def clocked(impl, variant: Variant, target, draft=None, k: int = K):
    """requests -> their Completions on the step clock, as `variant` serves them with
    `models(variant, ...)`: naive_serve or the engine (transformers keeps no clock)."""
    if variant.runner == "naive":
        return lambda requests: naive_serve(target, requests)
    options = dict(max_batch_size=variant.batch)
    if variant.chunk is not None:
        options.update(max_tokens_per_step=variant.chunk)
    if variant.prefix_caching:
        options.update(prefix_caching=True)
    if draft is not None:
        options.update(draft=draft, k=k)
    return lambda requests: impl.serve(target, requests, **options)


def server(impl, variant: Variant, target, draft=None, hf=None, k: int = K):
    """requests -> each request's new tokens, as `variant` serves them with `models(variant,
    ...)` (or, for transformers' variants, with `hf`, the model as transformers runs it)."""
    if variant.runner in ("static", "dynamic"):
        return lambda requests: transformers_static(
            hf, requests, variant.batch, cache=variant.runner
        )
    if variant.runner == "continuous":
        return lambda requests: transformers_continuous(hf, requests, variant.batch)
    serve = clocked(impl, variant, target, draft, k)
    return lambda requests: [c.tokens for c in serve(requests)]


def shipped(
    device: str | torch.device,
    n_requests: int,
    impl,
    large: bool | None = None,
    scale: float | None = None,
    **overrides,
) -> tuple[TinyLlama, list]:
    """The mixture and its workload (as `impl.Request`s) on `device`: the GPU's (`large`, by
    default on any device but the CPU) or the CPU's; `scale` replaces the workload's (its lengths
    as a fraction of ShareGPT's), `overrides` parts of the model's configuration."""
    if large is None:
        large = torch.device(device).type != "cpu"
    config, dtype, load = (
        (GPU_MODEL, torch.bfloat16, GPU_WORKLOAD)
        if large
        else (CPU_MODEL, torch.float32, CPU_WORKLOAD)
    )
    config = {**config, **overrides}
    model = make_model(SEED, dtype, **config).to(device)
    specs = poisson_workload(
        n_requests,
        seed=SEED,
        vocab_size=config["vocab_size"],
        max_seq_len=config["max_seq_len"],
        **{**load, **({} if scale is None else {"scale": scale})},
    )
    return model, [impl.Request(s.id, s.prompt, s.max_new_tokens, s.arrival) for s in specs]


def shared_prefix(model: TinyLlama, n_requests: int, impl, large: bool) -> list:
    """Requests for `model` whose prompts share one of a few system prompts (`SHARED_PREFIX`),
    arriving and answered at `shipped`'s rate and lengths, as `impl.Request`s."""
    specs = shared_prefix_workload(
        n_requests,
        seed=SEED,
        vocab_size=model.config.vocab_size,
        max_seq_len=model.config.max_seq_len,
        **SHARED_PREFIX,
        **(GPU_WORKLOAD if large else CPU_WORKLOAD),
    )
    return [impl.Request(s.id, s.prompt, s.max_new_tokens, s.arrival) for s in specs]


def long_prompts(model: TinyLlama, requests: list, impl) -> list:
    """`requests` with every LONG_EVERY-th prompt made LONG_PROMPT tokens long (random tokens of
    seed SEED), its max_new_tokens cut to fit the context."""
    gen = torch.Generator().manual_seed(SEED)
    out, room = [], model.config.max_seq_len - LONG_PROMPT + 1
    for i, r in enumerate(requests):
        if i % LONG_EVERY == LONG_EVERY - 1:
            prompt = torch.randint(0, model.config.vocab_size, (LONG_PROMPT,), generator=gen)
            r = impl.Request(r.id, prompt.tolist(), min(r.max_new_tokens, room), r.arrival)
        out.append(r)
    return out


def trained_pair(folder: Path, device, n_requests: int, impl) -> tuple[TinyLlama, TinyLlama, list]:
    """The trained target and draft in `folder` (float32, on `device`) and the CPU workload's
    lengths and arrivals with prompts of held-out source, as `impl.Request`s."""
    for name in ("target", "draft"):
        if not (folder / name / "config.json").is_file():
            raise ValueError(
                f"models: no checkpoint at {folder / name}; train the pair first with "
                f"`python -m grading.model.train --out {folder}` or pass --models FOLDER"
            )
    target, draft = (from_pretrained(folder / n, device=device) for n in ("target", "draft"))
    context = min(target.config.max_seq_len, draft.config.max_seq_len)
    specs = poisson_workload(n_requests, seed=SEED, max_seq_len=context, **CPU_WORKLOAD)
    prompts = held_out_prompts([len(s.prompt) for s in specs])
    requests = [
        impl.Request(s.id, p, s.max_new_tokens, s.arrival)
        for s, p in zip(specs, prompts, strict=True)
    ]
    return target, draft, requests


# ----------------------------------------------------------------------------------------------
# Measurements


@dataclass(frozen=True)
class Counts:
    generated: int  # new tokens of the requests served
    flops: int | None  # target and draft; None: not countable (work in another thread)
    target_calls: int
    draft_calls: int
    target_fed: int  # tokens fed to the target
    draft_rows: int  # rows of the draft's calls: one proposal each
    target_rows: int  # rows of the target's calls: one verification each
    peak_kv_bytes: int | None  # None: no cache, or none read from a log


def block_bytes(model: nn.Module, block_size: int) -> int:
    """Keys and values of one block of `block_size` tokens in every layer of `model`."""
    c, weight = model.config, next(model.parameters())
    return 2 * c.n_layers * c.n_kv_heads * block_size * c.head_dim * weight.element_size()


def peak_blocks(log, block_size: int) -> int:
    """The most KV blocks the rows of one logged call need at once."""
    return max(
        (
            sum(math.ceil((row.start + len(row.tokens)) / block_size) for row in call.rows)
            for call in log
        ),
        default=0,
    )


def count(serve, requests: list, target, draft, block_size: int = 16) -> tuple[list, Counts]:
    """Serve `requests` once with `serve` under the FLOP counter: (what `serve` returned, each
    request's tokens or Completion; counts). `target` and `draft` (or None) are the models it
    calls; a target that logs no packed call (naive_serve) holds no cache."""
    logged = [m for m in (target, draft) if m is not None]
    calls = [len(m.calls) for m in logged]
    logs = [len(m.batch_log) for m in logged]
    with FlopCounterMode(display=False) as counter:
        tokens = serve(requests)
    new_calls = [m.calls[n:] for m, n in zip(logged, calls, strict=True)]
    new_logs = [m.batch_log[n:] for m, n in zip(logged, logs, strict=True)]
    peak = None
    if new_logs[0]:
        peak = sum(
            peak_blocks(log, block_size) * block_bytes(m, block_size)
            for m, log in zip(logged, new_logs, strict=True)
        )
    return tokens, Counts(
        generated=sum(r.max_new_tokens for r in requests),
        flops=counter.get_total_flops(),
        target_calls=len(new_calls[0]),
        draft_calls=len(new_calls[1]) if draft is not None else 0,
        target_fed=sum(c.tokens for c in new_calls[0]),
        draft_rows=sum(len(c.rows) for c in new_logs[1]) if draft is not None else 0,
        target_rows=sum(len(c.rows) for c in new_logs[0]),
        peak_kv_bytes=peak,
    )


def count_transformers(serve, requests: list, hf, threaded: bool) -> tuple[list, Counts]:
    """`count` for a transformers model, whose forward calls a hook counts (input_ids' size:
    every position fed, padding included). `threaded`: it runs in a thread of its own, where
    the FLOP counter cannot see it."""
    fed = []
    hook = hf.register_forward_pre_hook(
        lambda _, args, kwargs: fed.append(kwargs.get("input_ids", args[0] if args else None)),
        with_kwargs=True,
    )
    try:
        with FlopCounterMode(display=False) as counter:
            tokens = serve(requests)
    finally:
        hook.remove()
    return tokens, Counts(
        generated=sum(r.max_new_tokens for r in requests),
        flops=None if threaded else counter.get_total_flops(),
        target_calls=len(fed),
        draft_calls=0,
        target_fed=sum(ids.numel() for ids in fed),
        draft_rows=0,
        target_rows=sum(ids.shape[0] for ids in fed),
        peak_kv_bytes=None,
    )


class CallTimer(DenseExperts):
    """`model` itself (its mixture, logs and all), with the wall-clock time of each call of
    `forward` or `forward_packed` appended to `times` (the GPU synchronised)."""

    def __init__(self, model: nn.Module, device: str) -> None:
        super().__init__(model)
        self.times: list[float] = []
        self.device = device

    def timed(self, call: Callable[[], object]):
        synchronize(self.device)
        start = time.perf_counter()
        out = call()
        synchronize(self.device)
        self.times.append(time.perf_counter() - start)
        return out

    def forward(self, ids, cache=None):
        return self.timed(lambda: self.model(ids, cache))

    def forward_packed(self, rows, starts, attention, feed_forward=None):
        return self.timed(lambda: self.model.forward_packed(rows, starts, attention, feed_forward))


def seconds(run: Callable[[], object], device: str) -> float:
    """Wall-clock seconds of `run()` (the GPU synchronised)."""
    synchronize(device)
    start = time.perf_counter()
    run()
    synchronize(device)
    return time.perf_counter() - start


def acceptance(counts: Counts) -> float:
    """Draft tokens kept / draft tokens proposed: each target row commits one token of its own
    and every draft token it accepts; each draft row proposes one token."""
    return (counts.generated - counts.target_rows) / counts.draft_rows


@dataclass(frozen=True)
class Result:
    variant: Variant
    tokens_per_s: float
    counts: Counts
    tokens: list[list[int]]  # each request's new tokens
    latency: Latency | None = None  # None: no step clock (transformers)


@dataclass
class Served:
    """A model, its draft and its workload; `hf`: the model as transformers runs it."""

    model: TinyLlama
    draft: TinyLlama | None
    requests: list
    hf: object = None


def run_all(impl, plan: list[tuple[Variant, Served]], repeats: int, device: str) -> list[Result]:
    """Every variant counted once, then timed in `repeats` rounds (each round times every
    variant once, so a machine that gets busier slows them all alike); a line per run."""
    runs = []
    for variant, served in plan:
        subset = served.requests[:ALONE_REQUESTS] if variant.alone else served.requests
        timer = None
        if variant.clocked:  # out: each request's Completion
            target, proposer = models(variant, served.model, served.draft)
            timer = CallTimer(target, device)
            serve = clocked(impl, variant, timer, proposer)
            out, counts = count(serve, subset, target, proposer)
        else:  # out: each request's tokens
            serve = server(impl, variant, None, hf=served.hf)
            out, counts = count_transformers(
                serve, subset, served.hf, threaded=variant.runner == "continuous"
            )
        runs.append((variant, serve, subset, counts, out, [], timer, []))
        name = f"{variant.section}: {variant.name}"
        print(f"counted {name:58} {len(subset):4} requests", flush=True)
    for i in range(repeats):
        for variant, serve, subset, counts, _, times, timer, calls in runs:
            if timer is not None:
                timer.times = []
            times.append(seconds(lambda serve=serve, subset=subset: serve(subset), device))
            calls.append(None if timer is None else timer.times)
            print(
                f"round {i + 1}/{repeats} {variant.section + ': ' + variant.name:58} "
                f"{times[-1]:7.2f} s {counts.generated / times[-1]:9.1f} tokens/s",
                flush=True,
            )
    results = []
    for variant, _, _, counts, out, times, _, calls in runs:
        median = statistics.median(times)
        tokens, lat = out, None
        if variant.clocked:  # one target call per step that runs anything, each step timed
            middle = sorted(range(len(times)), key=times.__getitem__)[len(times) // 2]
            tokens = [list(c.tokens) for c in out]
            lat = latency(out, median / counts.target_calls, calls[middle])
        results.append(Result(variant, counts.generated / median, counts, tokens, lat))
    return results


# ----------------------------------------------------------------------------------------------
# Report


def table_rows(rows: list[Result], naive: Result, plain: Result) -> list[str]:
    """The table of `rows`: tokens/s against `naive`'s, tokens against `plain`'s."""
    lines = [
        "| variant | requests | tokens/s | × naive | GFLOP / token | target calls / token | "
        "draft calls / token | tokens fed / token | peak KV in use | same tokens |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        c, n = r.counts, r.counts.generated
        same = sum(a == b for a, b in zip(r.tokens, plain.tokens, strict=False))
        kv = "—" if c.peak_kv_bytes is None else f"{c.peak_kv_bytes / 2**20:.2f} MiB"
        draft = f"{c.draft_calls / n:.3f}" if r.variant.speculative else "—"
        flops = "—" if c.flops is None else f"{c.flops / n / 1e9:.3f}"
        lines.append(
            f"| {r.variant.name} | {len(r.tokens)} | {r.tokens_per_s:,.0f} | "
            f"{r.tokens_per_s / naive.tokens_per_s:.1f}× | {flops} | {c.target_calls / n:.3f} | "
            f"{draft} | {c.target_fed / n:.2f} | {kv} | {same}/{len(r.tokens)} |"
        )
    return lines


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def machine_summary(device: str) -> str:
    if device != "cpu":
        where = torch.cuda.get_device_name(device)
    else:
        where = f"{cpu_name()}, {os.cpu_count()} cores"
    return (
        f"{where}; {platform.system()} {platform.release()}; torch {torch.__version__} "
        f"({torch.get_num_threads()} thread(s)); python {sys.version.split()[0]}"
    )


def describe(model: TinyLlama) -> str:
    c = model.config
    params = sum(p.numel() for p in model.parameters())
    experts = f", {c.n_experts} experts, top {c.top_k}" if c.n_experts else ""
    return (
        f"{params / 1e6:.2f} M parameters ({c.n_layers} layer{'s' * (c.n_layers != 1)}, "
        f"{c.n_heads} heads × {c.head_dim}, "
        f"{c.n_kv_heads} key/value heads, hidden width {c.hidden_dim}{experts})"
    )


def workload_line(requests, load: dict, name: str = "poisson_workload") -> str:
    """The `name` call that made `requests` (with `load`), and their mean lengths."""
    n_prompt = sum(len(r.prompt) for r in requests) / len(requests)
    n_new = sum(r.max_new_tokens for r in requests) / len(requests)
    return (
        f"`{name}({len(requests)}, seed={SEED}, "
        + ", ".join(f"{k}={v}" for k, v in load.items())
        + f")`: prompts of {n_prompt:.1f} tokens and outputs of {n_new:.1f} on average, "
        f"max_batch_size {MAX_BATCH}"
    )


def installed(name: str) -> bool:
    """Whether the optional package `name` can be imported."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


NO_TRANSFORMERS = (
    "transformers is not installed: the transformers rows are skipped (install it with "
    "`pip install -e '.[models]'`, or run `nox -s benchmark -- serving`, which does)."
)
NO_MATPLOTLIB = (
    "matplotlib is not installed: no picture (install it with `pip install matplotlib`, or run "
    "`nox -s benchmark -- serving`, which does)."
)


def transformers_version() -> str | None:
    """The installed transformers' version; None where it is not installed."""
    if not installed("transformers"):
        return None
    import transformers

    return transformers.__version__


def latency_rows(rows: list[Result]) -> list[str]:
    """The latency table of `rows` (`grading/model/latency.py`)."""
    return table([(r.variant.name, len(r.tokens), r.tokens_per_s, r.latency) for r in rows])


def prompt_reads(result: Result) -> int:
    """Prompt tokens the target read without a draft: what it was fed less each new token but
    the last (every request's answer is fed once, its last token never)."""
    return result.counts.target_fed - result.counts.generated + len(result.tokens)


def targets(plain: Result, cached: Result, whole: Result, chunked: Result) -> list[str]:
    """The targets, as measured: prefix caching on the shared-prefix workload (`serve` without
    it, `plain`, and with it, `cached`) and chunked prefill on the long-prompt one (`serve`
    feeding each prompt `whole`, and `chunked`)."""
    fewer = prompt_reads(plain) / prompt_reads(cached)
    ttft = (plain.latency.ttft_s[0], cached.latency.ttft_s[0])
    tpot = (whole.latency.tpot_s[1], chunked.latency.tpot_s[1])
    met = {True: "met", False: "**not met**"}
    return [
        f"- Prefix caching: the target read {prompt_reads(plain):,} prompt tokens without it and "
        f"{prompt_reads(cached):,} with it, {fewer:.1f}× fewer (target at least 3×: "
        f"{met[fewer >= 3]}); TTFT p50 {ttft[0] * 1e3:.1f} ms without, {ttft[1] * 1e3:.1f} ms "
        f"with (target lower: {met[ttft[1] < ttft[0]]}).",
        f"- Chunked prefill: TPOT p99 {tpot[0] * 1e3:.2f} ms with every prompt fed whole, "
        f"{tpot[1] * 1e3:.2f} ms with max_tokens_per_step={CHUNK} (target no worse: "
        f"{met[tpot[1] <= tpot[0]]}).",
    ]


def report(results: list[Result], mixture: Served, shared: Served, long: Served, pair: Served,
           folder: Path, command: str, device: str, took: float | None = None) -> str:  # fmt: skip
    by = {r.variant: r for r in results}
    section = {s: [r for r in results if r.variant.section == s] for s in
               ("ladder", "switched off", "transformers", "trained pair")}  # fmt: skip
    naive, plain = by[NAIVE], by[NO_DRAFT]
    full = by[PAIR[-1]]
    load = CPU_WORKLOAD if device == "cpu" else GPU_WORKLOAD
    context = min(pair.model.config.max_seq_len, pair.draft.config.max_seq_len)
    pair_load = {**CPU_WORKLOAD, "max_seq_len": context}
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if took is not None:
        stamp += f", measured in {int(took // 60)} min {took % 60:.0f} s"
    agreement = folder / "agreement.json"
    trained = ""
    if agreement.is_file():
        rate = json.loads(agreement.read_text())["greedy_agreement"]
        trained = f"; their greedy agreement on held-out source is {rate:.1%} (agreement.json)"
    version = transformers_version()
    against = [
        f"`serve` / {r.variant.name}: {plain.tokens_per_s / r.tokens_per_s:.2f}× the tokens/s."
        for r in section["transformers"]
    ]
    missing = [v.name for v in TRANSFORMERS if v not in by]
    if missing and version is not None:
        against.append(f"Not in this version of transformers: {', '.join(missing)}.")
    baselines = [*table_rows(section["transformers"], naive, plain), "", *against]
    accepted = [
        f"Draft acceptance, {r.variant.name}: {acceptance(r.counts):.1%} of proposed tokens kept, "
        f"{r.counts.generated / r.counts.target_rows:.2f} tokens per verified row."
        for r in section["trained pair"]
        if r.variant.speculative
    ]
    prefixed = [by[v] for v in SHARED]
    prefix_call = workload_line(
        shared.requests, {**SHARED_PREFIX, **load}, name="shared_prefix_workload"
    )
    lines = [
        f"# Serving ablation ({device})",
        "",
        f"`{command}`, {stamp}.",
        "",
        f"Machine: {machine_summary(device)}; "
        + (f"transformers {version}." if version else "transformers not installed."),
        "",
        "## The mixture",
        "",
        f"Model: the shared decoder as a mixture of experts, random weights, "
        f"{next(mixture.model.parameters()).dtype}, {describe(mixture.model)}, vocabulary "
        f"{mixture.model.config.vocab_size}.",
        "",
        f"Workload: {workload_line(mixture.requests, load)}. The variants that serve one request "
        f"at a time (naive_serve and max_batch_size=1) are timed and counted on the first "
        f"{len(naive.tokens)} requests ({naive.counts.generated} tokens) only; tokens/s is a "
        "rate, so their ratios stay fair.",
        "",
        "### The ladder: one technique added at a time",
        "",
        *table_rows(section["ladder"], naive, plain),
        "",
        "### serve with one technique switched off",
        "",
        'With dense experts it is the ladder\'s "+ continuous batching" row. The KV cache cannot '
        "be switched off through `serve`'s API.",
        "",
        *table_rows([plain, by[VARIANTS[2]], *section["switched off"]], naive, plain),
        "",
        "### What users would run instead: transformers on the same weights",
        "",
        "Hugging Face transformers' batched `generate` (groups of "
        f"{MAX_BATCH} in arrival order, prompts padded on the left, each group decoding until its "
        "longest request is done) and its continuous batching `generate_batch` "
        "(`grading/model/baselines.py`). They ignore arrivals (every request waits from the "
        "start), which favours them; tokens fed counts every position of every forward call, "
        "padding and finished rows included. generate_batch runs in a thread of its own, which "
        "the FLOP counter does not see.",
        "",
        *(baselines if version else [NO_TRANSFORMERS]),
        "",
        "### Latency",
        "",
        "Time to first token (TTFT) and time per output token (TPOT), p50 and p99 over the "
        "requests, in steps of the batching clock and in seconds (definitions below the last "
        "table).",
        "",
        *latency_rows([by[v] for v in VARIANTS] + section["transformers"]),
        "",
        "## The mixture on a shared-prefix workload",
        "",
        f"Workload: {prefix_call}: arrivals and output lengths drawn as in the workload above "
        f"(the same rate and distributions, other draws), each prompt one of "
        f"{SHARED_PREFIX['n_prefixes']} system prompts of {SHARED_PREFIX['prefix_len']} tokens "
        "and a tail of its own. The last row is `serve` with prefix_caching=True: a request "
        "that joins reuses the full blocks of a system prompt another request left cached and "
        "feeds only the tokens past them. Same tokens: against `serve` on this workload.",
        "",
        *table_rows(prefixed, prefixed[0], by[SHARED[3]]),
        "",
        *latency_rows(prefixed),
        "",
        "## The mixture with long prompts",
        "",
        f"Workload: the first workload's requests, every {LONG_EVERY}th prompt replaced by "
        f"{LONG_PROMPT} random tokens (its max_new_tokens cut to fit the context): "
        f"{sum(len(r.prompt) == LONG_PROMPT for r in long.requests)} long prompts arriving among "
        f"short ones. `serve` feeds each whole in the step it joins, a long step for every "
        f"request decoding in it; with max_tokens_per_step={CHUNK} it feeds at most {CHUNK} "
        "tokens a step. The seconds here are each step's own (the clock of "
        "`grading/model/latency.py`), so a long step shows in the TPOT of the requests in it.",
        "",
        *table_rows([by[v] for v in LONG], by[LONG[0]], by[LONG[0]]),
        "",
        *latency_rows([by[v] for v in LONG]),
        "",
        "### The targets, measured in this run",
        "",
        *targets(
            by[dataclasses.replace(NO_DRAFT, section="shared prefix")],
            by[SHARED[-1]],
            *(by[v] for v in LONG),
        ),
        "",
        "## Speculative decoding: the trained pair",
        "",
        f"Models (`{repo_relative(folder)}`): the byte-level target, {describe(pair.model)}, "
        f"and its draft, {describe(pair.draft)}, trained on the standard library's source by "
        f"`python -m grading.model.train`{trained}. float32. A draft with random weights rarely "
        "agrees with its target, and speculation then costs more than it saves: a trained draft "
        "shows what it is for.",
        "",
        f"Workload: the lengths and arrivals of {workload_line(pair.requests, pair_load)}, "
        "with each "
        "prompt cut from the held-out modules (the same number of bytes); draft k = "
        f"{K}. Same tokens: against `serve` without the draft.",
        "",
        *table_rows(section["trained pair"], by[PAIR_NAIVE], by[PAIR_SERVE]),
        "",
        *accepted,
        f"Speculation at batch 32: {full.tokens_per_s / by[PAIR_SERVE].tokens_per_s:.2f}× the "
        "tokens/s of `serve` without the draft.",
        "",
        *latency_rows(section["trained pair"]),
        "",
        "tokens/s: generated tokens over the median wall-clock time of the runs. Counts come from "
        "one more, untimed run, per generated token. GFLOP: target and draft, as "
        "`torch.utils.flop_counter` counts them (matrix products and attention). Peak KV in use: "
        "the most blocks (16 tokens) the rows of one target call need, × bytes per block of the "
        "target and the draft. Same tokens: completions identical to `serve`'s without a draft "
        "(greedy decoding everywhere; dense experts and transformers sum in another order, so a "
        "rare near-tie may flip).",
        "",
        DEFINITIONS
        + (
            f" The rows that serve one request at a time see a queue of {len(naive.tokens)} "
            f"requests, not {len(plain.tokens)}: their TTFT is not comparable with the other "
            "rows' (their TPOT is)."
            if len(naive.tokens) < len(plain.tokens)
            else ""
        )
        + " transformers ignores arrivals and keeps no step clock: no latency.",
        "",
    ]
    return "\n".join(lines)


COLOURS = {"ladder": "tab:blue", "switched off": "tab:orange", "transformers": "tab:green",
           "shared prefix": "tab:cyan", "long prompts": "tab:olive",
           "trained pair": "tab:purple"}  # fmt: skip
PANELS = [  # the picture's columns: (title, the sections in it)
    ("the mixture", ("ladder", "switched off", "transformers")),
    ("the mixture, shared prefixes", ("shared prefix",)),
    ("the mixture, long prompts", ("long prompts",)),
    ("the trained pair", ("trained pair",)),
]


def plot(results: list[Result], path: Path, device: str) -> None:
    """One picture: per workload, tokens/s ÷ its first row's (naive_serve, or serve on the long
    prompts) above TTFT and TPOT (p50, p99)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    columns = [(title, [r for r in results if r.variant.section in sections])
               for title, sections in PANELS]  # fmt: skip
    columns = [(title, rows) for title, rows in columns if rows]
    fig, axes = plt.subplots(
        3, len(columns), figsize=(16, 12), sharex="col", squeeze=False,
        width_ratios=[max(len(rows), 3) for _, rows in columns],
    )  # fmt: skip
    for c, (title, rows) in enumerate(columns):
        x = range(len(rows))
        colours = [COLOURS[r.variant.section] for r in rows]
        ax = axes[0][c]
        ratios = [r.tokens_per_s / rows[0].tokens_per_s for r in rows]
        bars = ax.bar(x, ratios, color=colours)
        ax.bar_label(bars, labels=[f"{v:.1f}×" for v in ratios], fontsize=8)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}×"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_title(f"{title}\ntokens/s ÷ {rows[0].variant.name}'s", fontsize=9)
        draw(axes[1][c], [r.latency for r in rows], "ttft", colours)
        draw(axes[2][c], [r.latency for r in rows], "tpot", colours)
        axes[2][c].set_xticks(x, [r.variant.name for r in rows], rotation=25, ha="right",
                              fontsize=7)  # fmt: skip
    axes[1][0].legend(
        handles=[Patch(color="grey", label="p50"), Patch(color="grey", label="p99", **P99)],
        fontsize=8,
        loc="upper right",
    )
    fig.suptitle(
        f"Serving on the {device}: tokens/s (top), time to first token (middle) and time per "
        "output token (bottom; each step as long as its call). Blue adds one technique at a "
        "time, orange switches one off, green is transformers, cyan the shared-prefix workload "
        "(prefix caching last), olive long prompts (chunked prefill last), purple speculates",
        fontsize=9, wrap=True,
    )  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def measure(impl, n_requests: int, repeats: int, device: str, folder: Path):
    """Every variant on its model, counted and timed: (results, the mixture, the mixture on the
    shared-prefix workload, on the long-prompt one, the pair). Without transformers, its rows
    are skipped."""
    with_transformers = installed("transformers")
    if with_transformers:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # the checkpoint's conversion prints a progress bar
        hf_logging.disable_progress_bar()
    else:
        print(NO_TRANSFORMERS, flush=True)
    pair = Served(*trained_pair(folder, device, n_requests, impl))
    model, requests = shipped(device, n_requests, impl)
    mixture = Served(model, None, requests, as_transformers(model) if with_transformers else None)
    shared = Served(model, None, shared_prefix(model, n_requests, impl, device != "cpu"))
    plan = [(v, mixture) for v in VARIANTS]
    if with_transformers:
        plan += [(v, mixture) for v in TRANSFORMERS if v.runner != "continuous"]
        if hasattr(mixture.hf, "generate_batch"):  # transformers 5 and later
            plan.append((TRANSFORMERS[-1], mixture))
    long = Served(model, None, long_prompts(model, requests, impl))
    plan += [(v, shared) for v in SHARED]
    plan += [(v, long) for v in LONG]
    plan += [(v, pair) for v in PAIR]
    with torch.no_grad():
        return run_all(impl, plan, repeats, device), mixture, shared, long, pair


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m katas.serving.benchmark", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--impl", default="reference",
        help="reference (default), solution (katas/serving/solution.py) or a path to a .py file",
    )  # fmt: skip
    parser.add_argument("--requests", type=int, default=48, help="requests in each workload")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed rounds; each times every variant once"
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--models", type=Path, default=SHIPPED, help=f"the trained pair's folder ({SHIPPED})"
    )
    parser.add_argument("--out", type=Path, default=Path("results"), help="folder for the report")
    args = parser.parse_args(argv)
    if args.device != "cpu" and not has_cuda():
        raise SystemExit(f"--device {args.device}: this machine has no CUDA GPU")
    if args.requests < 1 or args.repeats < 1:
        raise SystemExit("--requests and --repeats must be >= 1")
    if args.device == "cpu":
        torch.set_num_threads(1)  # one core, every variant alike
    began = time.perf_counter()
    try:
        impl = load_impl("serving", args.impl)
        results, mixture, shared, long, pair = measure(
            impl, args.requests, args.repeats, args.device, args.models
        )
    except (ImplError, ValueError) as exc:
        raise SystemExit(str(exc)) from None
    except ModuleNotFoundError as exc:
        if exc.name != "safetensors":
            raise
        raise SystemExit(
            "the trained pair's checkpoints need safetensors: install it with "
            "`pip install -e '.[models]'`, or run `nox -s benchmark -- serving`, which does"
        ) from None
    command = "python -m katas.serving.benchmark " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    took = time.perf_counter() - began
    text = report(
        results, mixture, shared, long, pair, args.models, command.strip(), args.device, took
    )
    args.out.mkdir(parents=True, exist_ok=True)
    written = args.out / f"serving_{args.device}.md"
    written.write_text(text)
    print(text)
    print(f"written to {written}", flush=True)
    if not installed("matplotlib"):
        print(NO_MATPLOTLIB)
        return 0
    plot(results, args.out / f"serving_{args.device}.png", args.device)
    print(f"picture: {args.out / f'serving_{args.device}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
