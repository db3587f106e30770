"""What the simulation shows, computed from real runs of the katas' implementations.

Nothing here is an animation of its own: each scene calls an implementation through its public
API and reads back what it did (the shared model's log of batched calls, the calls a target model
and its draft received, the key blocks an attention function read), so a wrong implementation
shows its mistake. The models are the trained byte-level pair when it is there, whose tokens the
screens show as text, or random weights (models.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grading.judge.cost import largest_tensor
from grading.model import greedy_generate_no_cache, make_model
from grading.model.workload import poisson_workload
from katas.batching.timeline import CUSTOMERS  # the batching README's sandwich shop
from katas.simulate.models import MODEL_LEN, Models, pieces, random_models, shown, source_prompts

STRATEGIES = ("static", "dynamic", "continuous")


def tokens_of(text: str, vocab: int) -> list[int]:
    return [ord(ch) % vocab for ch in text]


# ----------------------------------------------------------------------------------------------
# Batching and the KV cache


@dataclass
class Settings:
    """What the person can change on the batching and KV-cache screens. The defaults are the
    batching README's shop: its four customers, three stools, `max_wait` 0."""

    workload: str = "customers"  # or "poisson"
    rate: float = 0.5  # arrivals per step (poisson)
    n_requests: int = 10
    batch_size: int = 3
    max_wait: int = 0
    kv_blocks: int | None = None  # None: as many as the requests need
    block_size: int = 4
    seed: int = 0

    def describe(self, with_wait: bool = True) -> str:
        if self.workload == "customers":
            parts = [f"the shop's {len(CUSTOMERS)} customers"]
        else:
            parts = [f"{self.n_requests} random requests, {self.rate}/step, seed {self.seed}"]
        parts.append(f"batch size {self.batch_size}")
        if with_wait:
            parts.append(f"max_wait {self.max_wait}")
        pool = "∞" if self.kv_blocks is None else f"{self.kv_blocks} × {self.block_size} tokens"
        return " · ".join([*parts, f"KV blocks {pool}"])


@dataclass(frozen=True)
class Job:
    """One request of a workload, before it is given to an implementation's `Request`."""

    name: str
    prompt: list[int]
    max_new_tokens: int
    arrival: int

    @property
    def length(self) -> int:
        """The most tokens its cache ever holds (its last new token is never fed back)."""
        return len(self.prompt) + self.max_new_tokens - 1


def jobs(settings: Settings, text: bool = False) -> list[Job]:
    """The requests of the chosen workload, each with a short name. With `text`, each prompt is
    a window of held-out standard-library source of the same length (bytes), so the workload
    keeps its shape (arrivals, lengths, KV blocks) whichever models run it."""
    if settings.workload == "customers":
        work = [
            Job(name, tokens_of(name + words, 64), new, arrival)
            for name, words, new, arrival in CUSTOMERS
        ]
    else:
        drawn = poisson_workload(
            settings.n_requests, rate=settings.rate, seed=settings.seed, vocab_size=64,
            max_seq_len=MODEL_LEN, scale=0.05,
        )  # fmt: skip
        work = [
            Job(chr(ord("A") + i % 26), r.prompt, r.max_new_tokens, r.arrival)
            for i, r in enumerate(drawn)
        ]
    if not text:
        return work
    prompts = source_prompts([len(j.prompt) for j in work], settings.seed)
    return [replace(j, prompt=p) for j, p in zip(work, prompts, strict=True)]


def refusal(settings: Settings) -> str:
    """Why these settings cannot run (empty if they can): checked before anything runs."""
    if settings.kv_blocks is None:
        return ""
    need = max(math.ceil(j.length / settings.block_size) for j in jobs(settings))
    if settings.kv_blocks < need:
        return (
            f"a KV pool of {settings.kv_blocks} blocks is too small: the largest request needs "
            f"{need} blocks of {settings.block_size} tokens"
        )
    return ""


def adjust_settings(s: Settings, key: str) -> Settings | None:
    """The settings after one key of the batching and KV-cache screens; None if the key means
    nothing there."""
    fitting = max(math.ceil(j.length / s.block_size) for j in jobs(s))  # the fewest that run
    changes = {
        "a": ("rate", round(max(0.1, s.rate - 0.1), 1)),
        "A": ("rate", round(min(3.0, s.rate + 0.1), 1)),
        "b": ("batch_size", max(1, s.batch_size - 1)), "B": ("batch_size", s.batch_size + 1),
        "w": ("max_wait", max(0, s.max_wait - 1)), "W": ("max_wait", s.max_wait + 1),
        "k": ("kv_blocks", (s.kv_blocks or fitting + 2) - 2),
        "K": ("kv_blocks", (s.kv_blocks or fitting) + 2),
        "l": ("workload", "poisson" if s.workload == "customers" else "customers"),
    }  # fmt: skip
    if key not in changes:
        return None
    name, value = changes[key]
    return replace(s, **{name: value})


@dataclass
class Cell:
    request: int | None = None  # index into the workload; None: an empty slot
    kind: str = "empty"  # prefill, decode, waste (held by a finished request), stall, empty, idle
    wrong: bool = False  # the token it produced differs from decoding the request alone
    made: int = 0  # where it produced a token: how many of the request's were out after it


@dataclass
class BatchingRun:
    strategy: str
    names: list[str]  # one short name per request
    prompts: list[list[int]]
    arrivals: list[int]
    grid: list[list[Cell]]  # [slot][step]
    queue: list[list[int]]  # per step: the requests waiting for a slot, in arrival order
    produced: list[int]  # new tokens that came out at each step
    completions: list
    wrong: set[int]  # requests whose tokens differ from decoding them alone
    lengths: list[dict[int, int]]  # per step: request -> tokens cached after that step
    preempted: list[tuple[int, int]]  # (step, request): its slot and blocks freed at that step

    @property
    def steps(self) -> int:
        return len(self.produced)

    def made_by(self, request: int, step: int) -> list[int]:
        """The request's new tokens that were out by the end of `step`."""
        made = [c.made for row in self.grid for c in row[: step + 1] if c.request == request]
        return list(self.completions[request].tokens)[: max(made, default=0)]

    def counters(self, upto: int) -> dict[str, float]:
        """Tokens per step, time to first token, latency percentiles and waste up to `upto`.

        TTFT and latency count the requests that got there by `upto` ("so far"); `open` is the
        longest any arrived, unfinished request has been in by then.
        """
        done = [c for c in self.completions if c.finished <= upto]
        first = [c.first_token - c.arrival + 1 for c in self.completions if c.first_token <= upto]
        latency = sorted(c.finished - c.arrival + 1 for c in done)
        ages = [upto - c.arrival + 1 for c in self.completions if c.arrival <= upto < c.finished]
        return {
            "tokens/step": sum(self.produced[: upto + 1]) / (upto + 1),
            "ttft": statistics.fmean(first) if first else math.nan,
            "p50": percentile(latency, 50),
            "p99": percentile(latency, 99),
            "waste": sum(row[s].kind == "waste" for row in self.grid for s in range(upto + 1)),
            "done": len(done),
            "queued": len(self.queue[upto]) if self.queue else 0,
            "open": max(ages, default=math.nan),
        }


def percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return math.nan
    index = max(0, math.ceil(q / 100 * len(sorted_values)) - 1)
    return float(sorted_values[index])


class Oracle:
    """The model every batching scene runs (the trained target, or random weights when `models`
    is not given), and each request's tokens decoded alone (memoised)."""

    def __init__(self, models: Models | None = None) -> None:
        self.models = models or random_models()
        self.model = self.models.target
        self.memo: dict[tuple, list[int]] = {}

    def solo_tokens(self, job: Job) -> list[int]:
        key = (tuple(job.prompt), job.max_new_tokens)
        if key not in self.memo:
            prompt = torch.tensor([job.prompt])
            out = greedy_generate_no_cache(self.model, prompt, job.max_new_tokens)
            self.memo[key] = out[0, len(job.prompt) :].tolist()
        return self.memo[key]


def run_batching(impl, strategy: str, settings: Settings, oracle: Oracle) -> BatchingRun:
    """Run one strategy of the batching implementation and lay its calls out on the clock."""
    model = oracle.model
    work = jobs(settings, oracle.models.text)
    requests = [impl.Request(i, j.prompt, j.max_new_tokens, j.arrival) for i, j in enumerate(work)]
    model.batch_log.clear()
    if strategy == "static":
        out = impl.static_batching(model, requests, settings.batch_size)
    elif strategy == "dynamic":
        out = impl.dynamic_batching(model, requests, settings.batch_size, settings.max_wait)
    else:
        out = impl.continuous_batching(
            model, requests, settings.batch_size, kv_blocks=settings.kv_blocks,
            block_size=settings.block_size,
        )  # fmt: skip
    expected = [oracle.solo_tokens(j) for j in work]
    return lay_out(strategy, work, out, expected, list(model.batch_log), settings.batch_size)


def attribute(calls, work: list[Job], out) -> tuple[list[list[tuple[int, int, int]]], list]:
    """Each call's rows as (request, start, tokens fed), and the (call, request) pairs where a
    request came back into a new, empty cache after it had one: it was preempted."""
    fed = [j.prompt + list(c.tokens) for j, c in zip(work, out, strict=True)]  # what it feeds
    owner: dict[int, int] = {}  # cache id -> request
    has_cache: set[int] = set()
    rows_at, readmitted = [], []
    for index, call in enumerate(calls):
        rows = []
        for row in call.rows:
            if row.start == 0:  # a new cache: whose prompt (and tokens so far) does it read?
                tokens = list(row.tokens)
                match = [i for i, f in enumerate(fed) if f[: len(tokens)] == tokens]
                match.sort(key=lambda i: (i in has_cache, work[i].arrival, i))
                if match:
                    if match[0] in has_cache:
                        readmitted.append((index, match[0]))
                    owner[row.cache] = match[0]
                    has_cache.add(match[0])
            if row.cache in owner:
                rows.append((owner[row.cache], row.start, len(row.tokens)))
        rows_at.append(rows)
    return rows_at, readmitted


def clock(rows_at, work: list[Job], out) -> list[int]:
    """Each call's step: pinned where a token came out that the completions date; otherwise the
    step after the previous call (idle steps go just before the call that ends them)."""
    steps, previous = [], -1
    for rows in rows_at:
        pinned = []
        for r, start, n in rows:
            index = start + n - len(work[r].prompt)  # the new token this row produced
            if index == 0:
                pinned.append(out[r].first_token)
            elif index == work[r].max_new_tokens - 1:
                pinned.append(out[r].finished)
        previous = max([previous + 1, *pinned])
        steps.append(previous)
    return steps


def lay_out(strategy, work: list[Job], out, expected, calls, slots: int) -> BatchingRun:
    """Place each logged call on its step, each running request in a slot and each waiting one
    in the queue."""
    rows_at, readmitted = attribute(calls, work, out)
    steps = clock(rows_at, work, out)
    total = (steps[-1] + 1) if steps else 0
    at_step = dict(zip(steps, rows_at, strict=True))
    # A preempted request leaves at the first call after its last one with the old cache.
    last_seen, preempted = {}, []
    for index, rows in enumerate(rows_at):
        for r, _, _ in rows:
            if (index, r) in readmitted:
                preempted.append((steps[last_seen[r] + 1], r))
            last_seen[r] = index
    wrong = {i for i, (c, e) in enumerate(zip(out, expected, strict=True)) if c.tokens != e}
    grid = [[Cell(kind="idle") for _ in range(total)] for _ in range(slots)]
    queue: list[list[int]] = []
    produced, lengths = [0] * total, [dict() for _ in range(total)]
    slot_of: dict[int, int] = {}
    for step in range(total):
        for when, r in preempted:
            if when == step:
                slot_of.pop(r, None)
        for r, start, n in at_step.get(step, []):
            if r not in slot_of:
                free = [s for s in range(slots) if s not in slot_of.values()]
                slot_of[r] = free[0] if free else len(slot_of) % slots
            prompt, index = len(work[r].prompt), start + n - len(work[r].prompt)
            got, want = out[r].tokens[index : index + 1], expected[r][index : index + 1]
            bad = index >= 0 and (not got or got != want)
            kind = "prefill" if start < prompt else "decode"
            grid[slot_of[r]][step] = Cell(r, kind, bad, max(0, index + 1))
            produced[step] += index >= 0
            lengths[step][r] = start + n
        fed = {r for r, _, _ in at_step.get(step, [])}
        for r, slot in slot_of.items():
            if r not in fed:
                grid[slot][step] = Cell(r, "waste" if out[r].finished <= step else "stall")
        if step in at_step:
            for row in grid:
                if row[step].kind == "idle":
                    row[step] = Cell(None, "empty")
        queue.append(
            sorted(
                (
                    r
                    for r, j in enumerate(work)
                    if j.arrival <= step < out[r].finished and r not in slot_of
                ),
                key=lambda r: (work[r].arrival, r),
            )  # fmt: skip
        )
        # Slots free up: at once in continuous batching, when the whole batch is done otherwise.
        done = {r for r in slot_of if out[r].finished <= step}
        if strategy == "continuous":
            for r in done:
                del slot_of[r]
        elif done == set(slot_of):
            slot_of.clear()
    return BatchingRun(
        strategy, [j.name for j in work], [j.prompt for j in work], [j.arrival for j in work], grid,
        queue, produced, out, wrong, lengths, preempted,
    )  # fmt: skip


@dataclass
class PoolFrame:
    """The paged KV pool after one step: block owners, each sequence's table, bytes in use."""

    owners: list[int | None]  # per physical block: the request holding it
    tables: dict[int, list[int]]
    held: dict[int, int]  # request -> the tokens its blocks hold
    used_bytes: int
    contiguous_bytes: int
    error: str = ""


def replay_pool(kv_impl, run: BatchingRun, settings: Settings) -> list[PoolFrame]:
    """Feed the continuous run's cache growth into the KV-cache kata's PagedKVCache, step by step.

    A request's cache grows as the batching run's calls say; it is freed when the request
    finishes or is preempted. Each frame reads the pool's own block tables.
    """
    sizes = [j.length for j in jobs(settings)]
    num_blocks = settings.kv_blocks or sum(math.ceil(n / settings.block_size) for n in sizes)
    hkv, d, per_token = 1, 2, 2 * 1 * 2 * 4  # one head of two floats for k and for v
    pool = kv_impl.PagedKVCache(num_blocks, settings.block_size, hkv, d)
    frames, held, error = [], {}, ""
    for step, lengths in enumerate(run.lengths):
        for r in [r for when, r in run.preempted if when == step and r in held]:
            pool.free(r)
            del held[r]
        for r, length in lengths.items():
            grow = length - held.get(r, 0)
            if grow > 0 and not error:
                try:
                    pool.append(r, torch.zeros(hkv, grow, d), torch.zeros(hkv, grow, d))
                    held[r] = length
                except Exception as exc:  # noqa: BLE001 - shown on screen, not raised
                    error = f"step {step}: {type(exc).__name__}: {exc}"
        for r in [r for r in held if run.completions[r].finished <= step]:
            pool.free(r)
            del held[r]
        tables = {r: pool.block_table(r) for r in held}
        owners: list[int | None] = [None] * num_blocks
        for r, table in tables.items():
            for block in table:
                owners[block] = r
        used = sum(len(t) for t in tables.values()) * settings.block_size * per_token
        contiguous = sum(sizes[r] for r in held) * per_token
        frames.append(PoolFrame(owners, tables, dict(held), used, contiguous, error))
    return frames


# ----------------------------------------------------------------------------------------------
# Speculative decoding

DRAFT_COST = 0.1  # a draft call's cost, in target calls, unless the screen is told otherwise
SPEC_PROMPT = 40  # bytes of held-out source the trained target continues
SPEC_NEW_TOKENS = {True: 32, False: 24}  # new tokens, with the trained pair and without


@dataclass
class Round:
    proposed: list[int]
    accepted: int  # how many of the proposals were kept
    extra: int  # the target's correction (after a rejection) or bonus (after full acceptance)
    draft_calls: int  # the draft's calls that came before this round's target call
    # As text (the trained pair only): the proposals kept, the target's own token, and the
    # proposals thrown away. Each round's accepted_text + extra_text continue the output.
    accepted_text: str = ""
    extra_text: str = ""
    rejected_text: str = ""

    @property
    def kind(self) -> str:
        if not self.proposed:
            return "last token: nothing left to propose, the target alone"
        return "bonus" if self.accepted == len(self.proposed) else "fix"


@dataclass
class SpecRun:
    rounds: list[Round]
    new_tokens: int
    exact: bool  # the output equals the target's own greedy decoding
    prompt_text: str = ""  # the prompt and the output as text (the trained pair only)
    text: str = ""


class RecordingModel(torch.nn.Module):
    """A model that adds (name, ids) to a shared log at every call, passing everything through."""

    def __init__(self, inner, name: str, log: list) -> None:
        super().__init__()
        self.inner, self.config, self.name, self.log = inner, inner.config, name, log

    def forward(self, ids, cache=None):
        self.log.append((self.name, ids[0].tolist()))
        return self.inner(ids, cache)


def run_speculative(
    impl, alpha: float | None, k: int, max_new_tokens: int | None = None, seed: int = 1,
    models: Models | None = None,
) -> SpecRun:  # fmt: skip
    """One prompt decoded speculatively, read back round by round from the calls the target and
    the draft received.

    With the trained pair (`models.text`) the target continues held-out source, and the draft
    is the trained draft when `alpha` is None; otherwise (and always on random weights) the
    draft is scripted to agree with the target's greedy tokens with probability `alpha`.
    """
    from katas.speculative_decoding.cases import ScriptedModel, coin_flips

    text = models is not None and models.text
    if alpha is None and not text:
        raise ValueError("alpha: a number is needed where there is no trained draft")
    if max_new_tokens is None:
        max_new_tokens = SPEC_NEW_TOKENS[text]
    log: list[tuple[str, list[int]]] = []
    if text:
        inner = models.target
        prompt = torch.tensor(source_prompts([SPEC_PROMPT], seed, mid_line=True))  # (1, P)
    else:
        inner = make_model(seed, torch.float64, max_seq_len=64)
        prompt = torch.tensor([tokens_of("Once upon a time", inner.config.vocab_size)])
    target = RecordingModel(inner, "target", log)
    truth = greedy_generate_no_cache(inner, prompt, max_new_tokens)[0].tolist()
    if alpha is None:
        drafter = models.draft
    else:
        drafter = ScriptedModel(truth, inner.config.vocab_size, wrong=coin_flips(alpha, seed + 1))
    draft = RecordingModel(drafter, "draft", log)
    out, _ = impl.speculative_decode(target, draft, prompt, max_new_tokens, k=k)
    out = out[0].tolist()
    rounds, n, total, drafts = [], prompt.shape[1], prompt.shape[1] + max_new_tokens, 0
    for who, ids in log:  # each target call verifies one round's proposals (its tail)
        if who == "draft":
            drafts += 1
            continue
        k_round = min(k, total - n - 1)
        proposed = ids[len(ids) - k_round :] if k_round else []
        kept = 0
        while kept < k_round and proposed[kept] == out[n + kept]:
            kept += 1
        rounds.append(Round(proposed, kept, out[n + kept] if n + kept < total else -1, drafts))
        n, drafts = n + kept + 1, 0
    run = SpecRun(rounds, max_new_tokens, out == truth)
    if text:
        run.prompt_text, run.text = shown(prompt[0].tolist()), shown(out[prompt.shape[1] :])
        as_text(rounds, out[prompt.shape[1] :])
    return run


def as_text(rounds: list[Round], generated: list[int]) -> None:
    """Fill in each round's text: the output cut where the rounds committed their tokens (kept
    proposals, then the target's token), and the proposals thrown away decoded apart."""
    sizes, at = [], 0
    for r in rounds:
        for size in (r.accepted, 1):
            sizes.append(min(size, len(generated) - at))
            at += sizes[-1]
    texts = pieces(generated, [*sizes, len(generated) - at])  # the last: what no round explains
    for i, r in enumerate(rounds):
        r.accepted_text, r.extra_text = texts[2 * i], texts[2 * i + 1]
        r.rejected_text = shown(r.proposed[r.accepted :])


# ----------------------------------------------------------------------------------------------
# FlashAttention


@dataclass
class FlashRun:
    n: int
    block: int
    visited: list[int]  # key-block indices, in the order the implementation read them
    row_max: list[float]  # query row `row`'s running max after each visited block
    row_sum: list[float]  # ... and its running sum of exp(s - max)
    row: int
    naive_bytes: int
    largest_bytes: int
    causal: bool = True
    notes: list[str] = field(default_factory=list)


class _KeyBlockReads(TorchDispatchMode):
    """Records which key block each matrix product read, by comparing operands with k."""

    def __init__(self, k: torch.Tensor, block: int) -> None:
        super().__init__()
        self.blocks = [k[..., s : s + block, :].float() for s in range(0, k.shape[-2], block)]
        self.visited: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.split(".")[0] in ("mm", "bmm", "matmul"):
            for operand in args[:2]:
                self._match(operand)
        return func(*args, **(kwargs or {}))

    def _match(self, x: torch.Tensor) -> None:
        for i, block in enumerate(self.blocks):
            n = block.shape[-2]
            for candidate in (x, x.transpose(-1, -2)):
                if candidate.shape[-2:] != block.shape[-2:]:
                    continue
                flat = candidate.reshape(-1, candidate.shape[-1])[:n].float()  # (n, D)
                if torch.equal(flat, block.reshape(-1, block.shape[-1])[:n]):
                    if not self.visited or self.visited[-1] != i:
                        self.visited.append(i)
                    return


def run_flash(impl, n: int = 48, block: int = 8, row: int = 40, seed: int = 0) -> FlashRun:
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 1, n, 16, generator=gen) for _ in range(3))
    reads = _KeyBlockReads(k[0, 0], block)
    with reads:
        impl.tiled_attention(q, k, v, causal=True, block_size=block)
    _, largest = largest_tensor(impl.tiled_attention, q, k, v, causal=True, block_size=block)
    scores = (q[0, 0, row] @ k[0, 0].T / math.sqrt(16)).double()  # (n,) the row's scores
    m, total, maxes, sums = -math.inf, 0.0, [], []
    for b in reads.visited:
        s = scores[b * block : min(n, (b + 1) * block, row + 1)]  # causal: keys <= row
        if len(s):
            m_new = max(m, s.max().item())
            total = total * math.exp(m - m_new) + torch.exp(s - m_new).sum().item()
            m = m_new
        maxes.append(m)
        sums.append(total)
    return FlashRun(n, block, reads.visited, maxes, sums, row, n * n * 4, largest.nbytes)
