"""What each technique of the serving engine buys: an ablation in real tokens per second.

    python -m katas.serving.benchmark                       # the reference engine, on the CPU
    python -m katas.serving.benchmark --impl solution       # your katas/serving/solution.py
    python -m katas.serving.benchmark --impl path/to/file.py --requests 100 --repeats 1

One shipped workload (`poisson_workload`, seed 0, arriving fast enough that the batch is usually
full) is served by one shipped mixture-of-experts model, once per variant, and every variant's
wall-clock tokens/s is divided by naive_serve's, measured in the same run:

- the ladder, one technique added at a time: naive_serve (one request at a time, no cache, every
  expert on every token); + KV cache (`serve` with max_batch_size=1 and dense experts);
  + continuous batching (max_batch_size=32, dense experts); + grouped MoE (the engine without a
  draft); + speculative decoding (the full engine, with a draft);
- the full engine with each technique switched off in turn, where `serve`'s API allows: no draft
  (the ladder's "+ grouped MoE"), dense experts, max_batch_size=1. The KV cache cannot be
  switched off through the API: the engine always keeps one.

"Dense experts" is `DenseExperts`, a thin wrapper that forwards everything to the model except
that its `forward_packed` drops the engine's `feed_forward`, so each block runs the model's own
mixture (every expert on every token, as naive_serve does). Everything else, the engine's paged
attention included, is untouched.

The draft is self-speculative (an early exit): the target's embedding, first block(s), final
norm and output head, copied from the target, so it costs a fraction of a target call and needs
no training. The weights are random, so the draft agrees with the target far less often than a
trained draft would; the acceptance rate is measured and printed, and a low one shows what
speculation costs when the draft guesses badly.

Timing: `time.perf_counter` (the GPU synchronised), the median of --repeats rounds, each round
timing every variant once, all in one run. naive_serve is slow (one call per token, each
re-feeding the whole sequence), so it and the other variants that serve one request at a time
(max_batch_size=1) run on the first few requests only; tokens/s is a rate, so the ratios stay
fair. The counts beside the timings come from one more, untimed run of each variant under
`torch.utils.flop_counter.FlopCounterMode`, per generated token: FLOPs (target and draft), model
calls (`model.calls`), tokens fed to the target, and the peak KV memory in use: the most blocks
the rows of one target call need at once (a row at `start` feeding T tokens needs
ceil((start + T) / block_size) blocks), read from `model.batch_log`, times the bytes of a block
in the target's and the draft's layers. The draft's acceptance rate comes from the same logs.

Writes `serving_<device>.md` (the table, the command, the machine) and `serving_<device>.png` (the
ratios, log scale) into --out.
"""

from __future__ import annotations

import argparse
import datetime
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
from grading.impl import ImplError, load_impl
from grading.model import TinyLlama, make_model
from grading.naive import naive_serve
from grading.workload import poisson_workload

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
# on the CPU): a queue builds up, and most of the work runs in full batches (on the CPU, 81% of
# the tokens fed); the last few long answers finish in small ones, as in real traffic.
CPU_WORKLOAD = dict(rate=2.0, scale=0.1)
GPU_WORKLOAD = dict(rate=2.0, scale=0.25)
SEED = 0
MAX_BATCH = 32
DRAFT_LAYERS = 1  # the early exit: the draft keeps the target's first block
K = 2  # draft tokens per round: with a weak draft, short guesses waste less
# Variants that serve one request at a time (naive_serve, max_batch_size=1) are timed and counted
# on the first this many requests: they are slow, and their rate hardly depends on the queue.
ALONE_REQUESTS = 24


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


def early_exit_draft(model: TinyLlama, n_layers: int) -> TinyLlama:
    """A draft made of the target's embedding, its first `n_layers` blocks, its final norm and
    its output head (self-speculative decoding: the target's answer after fewer layers)."""
    c = model.config
    draft = make_model(0, next(model.parameters()).dtype, **{**vars(c), "n_layers": n_layers})
    kept = {k: v for k, v in model.state_dict().items() if k in draft.state_dict()}
    draft.load_state_dict(kept)  # strict: every tensor of the draft comes from the target
    return draft.to(next(model.parameters()).device)


@dataclass(frozen=True)
class Variant:
    name: str
    section: str  # "ladder" or "switched off"
    engine: bool = True  # False: naive_serve
    batch: int = MAX_BATCH  # max_batch_size
    dense: bool = False  # every expert on every token (DenseExperts)
    speculative: bool = False  # with the draft

    @property
    def alone(self) -> bool:
        """Serves one request at a time: run on the first ALONE_REQUESTS requests only."""
        return not self.engine or self.batch == 1


NO_DRAFT = Variant("+ grouped MoE (full, no draft)", "ladder")
FULL = Variant("+ speculative decoding (full)", "ladder", speculative=True)
VARIANTS = [
    Variant("naive_serve", "ladder", engine=False),
    Variant("+ KV cache", "ladder", batch=1, dense=True),
    Variant("+ continuous batching", "ladder", dense=True),
    NO_DRAFT,
    FULL,
    Variant("full, dense experts", "switched off", dense=True, speculative=True),
    Variant("full, max_batch_size=1", "switched off", batch=1, speculative=True),
]


def models(variant: Variant, model: TinyLlama, draft: TinyLlama):
    """The (target, draft or None) that `variant` serves with."""
    wrap = DenseExperts if variant.dense else lambda m: m
    return wrap(model), wrap(draft) if variant.speculative else None


def server(impl, variant: Variant, target: nn.Module, draft: nn.Module | None, k: int = K):
    """requests -> completions, as `variant` serves them with `models(variant, ...)`."""
    if not variant.engine:
        return lambda requests: naive_serve(target, requests)
    options = dict(max_batch_size=variant.batch)
    if draft is not None:
        options.update(draft=draft, k=k)
    return lambda requests: impl.serve(target, requests, **options)


def shipped(
    device: str | torch.device,
    n_requests: int,
    impl,
    large: bool | None = None,
    scale: float | None = None,
    **overrides,
) -> tuple[TinyLlama, TinyLlama, list]:
    """The model, its draft and the workload (as `impl.Request`s) on `device`: the GPU's
    (`large`, by default on any device but the CPU) or the CPU's; `scale` replaces the
    workload's (its lengths as a fraction of ShareGPT's), `overrides` parts of the model's
    configuration."""
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
    requests = [impl.Request(s.id, s.prompt, s.max_new_tokens, s.arrival) for s in specs]
    return model, early_exit_draft(model, DRAFT_LAYERS), requests


# ----------------------------------------------------------------------------------------------
# Measurements


@dataclass(frozen=True)
class Counts:
    generated: int  # new tokens of the requests served
    flops: int  # target and draft
    target_calls: int
    draft_calls: int
    target_fed: int  # tokens fed to the target
    draft_rows: int  # rows of the draft's calls: one proposal each
    target_rows: int  # rows of the target's calls: one verification each
    peak_kv_bytes: int | None  # None: no cache


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
    """Serve `requests` once with `serve` under the FLOP counter: (completions, counts).
    `target` and `draft` (or None) are the models it calls; a target that logs no packed call
    (naive_serve) holds no cache."""
    logged = [m for m in (target, draft) if m is not None]
    calls = [len(m.calls) for m in logged]
    logs = [len(m.batch_log) for m in logged]
    with FlopCounterMode(display=False) as counter:
        completions = serve(requests)
    new_calls = [m.calls[n:] for m, n in zip(logged, calls, strict=True)]
    new_logs = [m.batch_log[n:] for m, n in zip(logged, logs, strict=True)]
    peak = None
    if new_logs[0]:
        peak = sum(
            peak_blocks(log, block_size) * block_bytes(m, block_size)
            for m, log in zip(logged, new_logs, strict=True)
        )
    return completions, Counts(
        generated=sum(r.max_new_tokens for r in requests),
        flops=counter.get_total_flops(),
        target_calls=len(new_calls[0]),
        draft_calls=len(new_calls[1]) if draft is not None else 0,
        target_fed=sum(c.tokens for c in new_calls[0]),
        draft_rows=sum(len(c.rows) for c in new_logs[1]) if draft is not None else 0,
        target_rows=sum(len(c.rows) for c in new_logs[0]),
        peak_kv_bytes=peak,
    )


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
    tokens: list[list[int]]  # each completion's tokens


def run_all(impl, model, draft, requests, repeats: int, device: str) -> list[Result]:
    """Every variant counted once, then timed in `repeats` rounds (each round times every
    variant once, so a machine that gets busier slows them all alike); a line per run."""
    runs = []
    for variant in VARIANTS:
        subset = requests[:ALONE_REQUESTS] if variant.alone else requests
        target, proposer = models(variant, model, draft)
        serve = server(impl, variant, target, proposer)
        completions, counts = count(serve, subset, target, proposer)
        runs.append((variant, serve, subset, counts, [c.tokens for c in completions], []))
        print(f"counted {variant.name:32} {len(subset):4} requests", flush=True)
    for i in range(repeats):
        for variant, serve, subset, counts, _, times in runs:
            times.append(seconds(lambda serve=serve, subset=subset: serve(subset), device))
            print(
                f"round {i + 1}/{repeats} {variant.name:32} {times[-1]:8.2f} s "
                f"{counts.generated / times[-1]:9.1f} tokens/s",
                flush=True,
            )
    return [
        Result(variant, counts.generated / statistics.median(times), counts, tokens)
        for variant, _, _, counts, tokens, times in runs
    ]


# ----------------------------------------------------------------------------------------------
# Report


def table_rows(results: list[Result], names: list[str]) -> list[str]:
    by_name = {r.variant.name: r for r in results}
    naive = results[0].tokens_per_s
    plain = next(r.tokens for r in results if r.variant == NO_DRAFT)
    rows = [
        "| variant | requests | tokens/s | × naive | GFLOP / token | target calls / token | "
        "draft calls / token | tokens fed / token | peak KV in use | same tokens |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in names:
        r = by_name[name]
        c, n = r.counts, r.counts.generated
        same = sum(a == b for a, b in zip(r.tokens, plain[: len(r.tokens)], strict=True))
        kv = "— (no cache)" if c.peak_kv_bytes is None else f"{c.peak_kv_bytes / 2**20:.2f} MiB"
        draft = f"{c.draft_calls / n:.3f}" if r.variant.speculative else "—"
        rows.append(
            f"| {name} | {len(r.tokens)} | {r.tokens_per_s:,.0f} | "
            f"{r.tokens_per_s / naive:.1f}× | {c.flops / n / 1e9:.3f} | {c.target_calls / n:.3f} | "
            f"{draft} | {c.target_fed / n:.2f} | {kv} | {same}/{len(r.tokens)} |"
        )
    return rows


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


def report(results: list[Result], model, draft, requests, command: str, device: str) -> str:
    ladder = [r.variant.name for r in results if r.variant.section == "ladder"]
    off = [r.variant.name for r in results if r.variant.section == "switched off"]
    full = next(r for r in results if r.variant == FULL)
    config = model.config
    params = sum(p.numel() for p in model.parameters())
    n_prompt = sum(len(r.prompt) for r in requests) / len(requests)
    n_new = sum(r.max_new_tokens for r in requests) / len(requests)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    naive = results[0]
    lines = [
        f"# Serving ablation ({device})",
        "",
        f"`{command}`, {stamp}.",
        "",
        f"Machine: {machine_summary(device)}.",
        "",
        f"Model: the shared decoder as a mixture of experts, {next(model.parameters()).dtype}, "
        f"{params / 1e6:.2f} M parameters: {config.n_layers} layers, {config.n_heads} heads × "
        f"{config.head_dim} ({config.n_kv_heads} key/value heads), {config.n_experts} experts "
        f"of hidden width {config.hidden_dim}, top {config.top_k}, vocabulary "
        f"{config.vocab_size}. Draft: its first {draft.config.n_layers} block(s) with its "
        f"embedding, final norm and head (early exit), k = {K}.",
        "",
        f"Workload: `poisson_workload({len(requests)}, seed={SEED}, "
        + ", ".join(
            f"{k}={v}" for k, v in (CPU_WORKLOAD if device == "cpu" else GPU_WORKLOAD).items()
        )
        + f")`: prompts of {n_prompt:.1f} tokens and outputs of {n_new:.1f} on average, "
        f"max_batch_size {MAX_BATCH}. The variants that serve one request at a time (naive_serve "
        f"and max_batch_size=1) are timed and counted on the first {len(naive.tokens)} requests "
        f"({naive.counts.generated} tokens) only; tokens/s is a rate, so their ratios stay fair.",
        "",
        "### The ladder: one technique added at a time",
        "",
        *table_rows(results, ladder),
        "",
        "### The full engine with one technique switched off",
        "",
        'Without the draft it is the ladder\'s "+ grouped MoE" row. The KV cache cannot be '
        "switched off through `serve`'s API.",
        "",
        *table_rows(results, [full.variant.name, *off]),
        "",
        f"Draft acceptance (full engine): {acceptance(full.counts):.1%} of proposed tokens kept, "
        f"{full.counts.generated / full.counts.target_rows:.2f} tokens per verified row.",
        "",
        "tokens/s: generated tokens over the median wall-clock time of the runs. Counts come from "
        "one more, untimed run, per generated token. GFLOP: target and draft, as "
        "`torch.utils.flop_counter` counts them (matrix products and attention). Peak KV in use: "
        "the most blocks (16 tokens) the rows of one target call need, × bytes per block of the "
        "target and the draft. Same tokens: completions identical to those of the engine "
        "without a draft (greedy decoding everywhere; the dense experts sum in another order, so "
        "a rare near-tie may flip).",
        "",
    ]
    return "\n".join(lines)


def plot(results: list[Result], path: Path, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    naive = results[0].tokens_per_s
    names = [r.variant.name for r in results]
    ratios = [r.tokens_per_s / naive for r in results]
    colours = ["tab:blue" if r.variant.section == "ladder" else "tab:orange" for r in results]
    fig, ax = plt.subplots(figsize=(10, 5))
    bars = ax.bar(range(len(results)), ratios, color=colours)
    ax.bar_label(bars, labels=[f"{x:.1f}×" for x in ratios])
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}×"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(results)), names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("tokens/s ÷ naive_serve's (log scale)")
    ax.set_title(f"Serving ablation on the {device}: blue adds one technique at a time, "
                 "orange switches one off the full engine", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m katas.serving.benchmark", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--impl", default="reference",
        help="reference (default), solution (katas/serving/solution.py) or a path to a .py file",
    )  # fmt: skip
    parser.add_argument("--requests", type=int, default=200, help="requests in the workload")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed rounds; each times every variant once"
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--out", type=Path, default=Path("results"), help="folder for the report")
    args = parser.parse_args(argv)
    if args.device != "cpu" and not has_cuda():
        raise SystemExit(f"--device {args.device}: this machine has no CUDA GPU")
    if args.requests < ALONE_REQUESTS or args.repeats < 1:
        raise SystemExit(f"--requests must be >= {ALONE_REQUESTS} and --repeats >= 1")
    if args.device == "cpu":
        torch.set_num_threads(1)  # one core, every variant alike
    try:
        impl = load_impl("serving", args.impl)
    except ImplError as exc:
        raise SystemExit(str(exc)) from None
    command = "python -m katas.serving.benchmark " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    model, draft, requests = shipped(args.device, args.requests, impl)
    with torch.no_grad():
        results = run_all(impl, model, draft, requests, args.repeats, args.device)
    text = report(results, model, draft, requests, command.strip(), args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"serving_{args.device}.md").write_text(text)
    plot(results, args.out / f"serving_{args.device}.png", args.device)
    print(text)
    print(f"written to {args.out / f'serving_{args.device}.md'} and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
