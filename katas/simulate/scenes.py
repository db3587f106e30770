"""What the simulation shows, computed from real runs of the katas' implementations.

Nothing here is an animation of its own: each scene calls an implementation through its public
API and reads back what it did (the shared model's log of batched calls, the calls a target model
received, the key blocks an attention function read), so a wrong implementation shows its mistake.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from grading.cost import largest_tensor
from grading.model import greedy_generate_no_cache, make_model
from grading.workload import poisson_workload

# The background story's customers: (name, order, new tokens, arrival step).
CUSTOMERS = [("A", "Hello", 2, 0), ("B", "How are you today?", 6, 0), ("C", "Hi", 1, 1)]
STRATEGIES = ("static", "dynamic", "continuous")


def tokens_of(text: str, vocab: int) -> list[int]:
    return [ord(ch) % vocab for ch in text]


# ----------------------------------------------------------------------------------------------
# Batching and the KV cache


@dataclass
class Settings:
    """What the person can change on the batching and KV-cache screens."""

    workload: str = "customers"  # or "poisson"
    rate: float = 0.5  # arrivals per step (poisson)
    n_requests: int = 10
    batch_size: int = 3
    max_wait: int = 1
    kv_blocks: int | None = None
    block_size: int = 4
    seed: int = 0


def adjust_settings(s: Settings, key: str) -> bool:
    """Apply one key of the batching and KV-cache screens; False if the key means nothing."""
    changes = {
        "a": ("rate", round(max(0.1, s.rate - 0.1), 1)),
        "A": ("rate", round(min(3.0, s.rate + 0.1), 1)),
        "b": ("batch_size", max(1, s.batch_size - 1)), "B": ("batch_size", s.batch_size + 1),
        "w": ("max_wait", max(0, s.max_wait - 1)), "W": ("max_wait", s.max_wait + 1),
        "k": ("kv_blocks", max(4, (s.kv_blocks or 24) - 2)),
        "K": ("kv_blocks", (s.kv_blocks or 22) + 2),
        "l": ("workload", "poisson" if s.workload == "customers" else "customers"),
    }  # fmt: skip
    if key not in changes:
        return False
    setattr(s, *changes[key])
    return True


@dataclass
class Cell:
    request: int | None = None  # index into the workload; None: an empty slot
    kind: str = "empty"  # prefill, decode, waste (held by a finished request), wait, empty, idle


@dataclass
class BatchingRun:
    strategy: str
    names: list[str]  # one short name per request
    arrivals: list[int]
    grid: list[list[Cell]]  # [slot][step]
    produced: list[int]  # new tokens that came out at each step
    completions: list
    wrong: set[int]  # requests whose tokens differ from decoding them alone
    lengths: list[dict[int, int]]  # per step: request -> tokens cached after that step
    preempted: list[tuple[int, int]]  # (step, request): a preempted request starting over

    @property
    def steps(self) -> int:
        return len(self.produced)

    def counters(self, upto: int) -> dict[str, float]:
        """Tokens per step, time to first token, latency percentiles and waste up to `upto`."""
        done = [c for c in self.completions if c.finished <= upto]
        first = [c.first_token - c.arrival + 1 for c in self.completions if c.first_token <= upto]
        latency = sorted(c.finished - c.arrival + 1 for c in done)
        return {
            "tokens/step": sum(self.produced[: upto + 1]) / (upto + 1),
            "ttft": statistics.fmean(first) if first else math.nan,
            "p50": percentile(latency, 50),
            "p99": percentile(latency, 99),
            "waste": sum(row[s].kind == "waste" for row in self.grid for s in range(upto + 1)),
            "done": len(done),
        }


def percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return math.nan
    index = max(0, math.ceil(q / 100 * len(sorted_values)) - 1)
    return float(sorted_values[index])


def workload(impl, settings: Settings, vocab: int, max_len: int):
    """The requests of the chosen workload, and a short name for each."""
    if settings.workload == "customers":
        requests = [
            impl.Request(i, tokens_of(f"{name}: {order}", vocab), new, arrival)
            for i, (name, order, new, arrival) in enumerate(CUSTOMERS)
        ]
        return requests, [name for name, *_ in CUSTOMERS]
    drawn = poisson_workload(
        settings.n_requests, rate=settings.rate, seed=settings.seed, vocab_size=vocab,
        max_seq_len=max_len, scale=0.05,
    )  # fmt: skip
    requests = [impl.Request(r.id, r.prompt, r.max_new_tokens, r.arrival) for r in drawn]
    return requests, [chr(ord("A") + i % 26) for i in range(len(requests))]


class Oracle:
    """The model every batching scene runs, and each request's tokens decoded alone (memoised)."""

    def __init__(self) -> None:
        self.model = make_model(0, torch.float64, max_seq_len=64)
        self.memo: dict[tuple, list[int]] = {}

    def solo_tokens(self, request) -> list[int]:
        key = (tuple(request.prompt), request.max_new_tokens)
        if key not in self.memo:
            prompt = torch.tensor([request.prompt])
            out = greedy_generate_no_cache(self.model, prompt, request.max_new_tokens)
            self.memo[key] = out[0, len(request.prompt) :].tolist()
        return self.memo[key]


def run_batching(impl, strategy: str, settings: Settings, oracle: Oracle) -> BatchingRun:
    """Run one strategy of the batching implementation and lay its calls out on the clock."""
    model = oracle.model
    requests, names = workload(impl, settings, model.config.vocab_size, model.config.max_seq_len)
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
    calls = list(model.batch_log)
    expected = [oracle.solo_tokens(r) for r in requests]
    wrong = {i for i, (c, e) in enumerate(zip(out, expected, strict=True)) if c.tokens != e}
    return lay_out(strategy, requests, names, out, expected, calls, wrong, settings.batch_size)


def lay_out(strategy, requests, names, out, expected, calls, wrong, slots) -> BatchingRun:
    """Place each logged call on its step and each request in a slot (see the module doc)."""
    full = [r.prompt + e for r, e in zip(requests, expected, strict=True)]
    owner: dict[int, int] = {}  # cache id -> request
    rows_at, preempted, seen = [], [], set()
    for call in calls:
        rows = []
        for row in call.rows:
            if row.start == 0:  # a new cache: whose prompt (and tokens so far) did it read?
                match = [i for i, f in enumerate(full) if f[: len(row.tokens)] == list(row.tokens)]
                fresh = [i for i in match if i not in owner.values()] or match
                if fresh:
                    if fresh[0] in seen:
                        preempted.append((len(rows_at), fresh[0]))
                    owner[row.cache] = fresh[0]
                    seen.add(fresh[0])
            if row.cache in owner:
                rows.append((owner[row.cache], row.start, len(row.tokens)))
        rows_at.append(rows)
    # Each call's step: pinned where a token came out that the completions date; otherwise the
    # step after the previous call (idle steps go just before the call that ends them).
    steps, previous = [], -1
    for rows in rows_at:
        pinned = []
        for r, start, n in rows:
            index = start + n - len(requests[r].prompt)  # the new token this row produced
            if index == 0:
                pinned.append(out[r].first_token)
            elif index == requests[r].max_new_tokens - 1:
                pinned.append(out[r].finished)
        previous = max([previous + 1, *pinned])
        steps.append(previous)
    preempted = [(steps[call], r) for call, r in preempted]  # when each came back
    total = (steps[-1] + 1) if steps else 0
    grid = [[Cell(kind="idle") for _ in range(total)] for _ in range(slots)]
    produced, lengths = [0] * total, [dict() for _ in range(total)]
    slot_of: dict[int, int] = {}
    for step, rows in zip(steps, rows_at, strict=True):
        in_call = {r for r, _, _ in rows}
        for r, start, n in rows:
            if r not in slot_of:
                free = [s for s in range(slots) if s not in slot_of.values()]
                slot_of[r] = free[0] if free else len(slot_of) % slots
            prompt = len(requests[r].prompt)
            grid[slot_of[r]][step] = Cell(r, "prefill" if start < prompt else "decode")
            produced[step] += start + n >= prompt
            lengths[step][r] = start + n
        for r, slot in list(slot_of.items()):
            if r not in in_call:
                finished = out[r].finished <= step
                grid[slot][step] = Cell(r, "waste" if finished else "wait")
        for s in range(slots):
            if grid[s][step].kind == "idle":
                grid[s][step] = Cell(None, "empty")
        # Slots free up: at once in continuous batching, when the whole batch is done otherwise.
        done = {r for r in slot_of if out[r].finished <= step}
        if strategy == "continuous":
            for r in done:
                del slot_of[r]
        elif done == set(slot_of):
            slot_of.clear()
    return BatchingRun(
        strategy, names, [r.arrival for r in requests], grid, produced, out, wrong, lengths,
        preempted,
    )  # fmt: skip


@dataclass
class PoolFrame:
    """The paged KV pool after one step: block owners, each sequence's table, bytes in use."""

    owners: list[int | None]  # per physical block: the request holding it
    tables: dict[int, list[int]]
    used_bytes: int
    contiguous_bytes: int
    error: str = ""


def replay_pool(kv_impl, run: BatchingRun, requests_len: list[int], settings: Settings):
    """Feed the continuous run's cache growth into the KV-cache kata's PagedKVCache, step by step.

    A request's cache grows as the batching run's calls say; it is freed when the request
    finishes, or when it drops out of the batch unfinished (preempted: continuous batching runs
    every admitted request at every step). Each frame reads the pool's own block tables.
    """
    num_blocks = settings.kv_blocks or max(
        1, sum(math.ceil(n / settings.block_size) for n in requests_len)
    )
    hkv, d, per_token = 1, 2, 2 * 1 * 2 * 4  # one head of two floats for k and for v
    pool = kv_impl.PagedKVCache(num_blocks, settings.block_size, hkv, d)
    frames, held, error = [], {}, ""
    for step, lengths in enumerate(run.lengths):
        if lengths:  # a step with a call: whoever is held but not in it was preempted
            for r in [r for r in held if r not in lengths]:
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
        contiguous = sum(requests_len[r] for r in held) * per_token
        frames.append(PoolFrame(owners, tables, used, contiguous, error))
    return frames


# ----------------------------------------------------------------------------------------------
# Speculative decoding


@dataclass
class Round:
    proposed: list[int]
    accepted: int  # how many of the proposals were kept
    extra: int  # the target's correction (after a rejection) or bonus (after full acceptance)


@dataclass
class SpecRun:
    rounds: list[Round]
    target_calls: int
    new_tokens: int
    exact: bool  # the output equals the target's own greedy decoding

    @property
    def acceptance(self) -> float:
        proposed = sum(len(r.proposed) for r in self.rounds)
        return sum(r.accepted for r in self.rounds) / proposed if proposed else math.nan


class RecordingModel(torch.nn.Module):
    """A model that remembers the ids of every call, passing everything else through."""

    def __init__(self, inner) -> None:
        super().__init__()
        self.inner, self.config, self.calls = inner, inner.config, []

    def forward(self, ids, cache=None):
        self.calls.append(ids[0].tolist())
        return self.inner(ids, cache)


def run_speculative(impl, alpha: float, k: int, max_new_tokens: int = 24, seed: int = 1):
    from katas.speculative_decoding.cases import ScriptedModel, coin_flips

    target = RecordingModel(make_model(seed, torch.float64, max_seq_len=64))
    prompt = torch.tensor([tokens_of("Once upon a time", target.config.vocab_size)])
    truth = greedy_generate_no_cache(target.inner, prompt, max_new_tokens)[0].tolist()
    draft = ScriptedModel(truth, target.config.vocab_size, wrong=coin_flips(alpha, seed + 1))
    out, stats = impl.speculative_decode(target, draft, prompt, max_new_tokens, k=k)
    out = out[0].tolist()
    rounds, n, total = [], prompt.shape[1], prompt.shape[1] + max_new_tokens
    for ids in target.calls:  # each target call verifies one round's proposals (its tail)
        k_round = min(k, total - n - 1)
        proposed = ids[len(ids) - k_round :] if k_round else []
        kept = 0
        while kept < k_round and proposed[kept] == out[n + kept]:
            kept += 1
        rounds.append(Round(proposed, kept, out[n + kept] if n + kept < total else -1))
        n += kept + 1
    return SpecRun(rounds, stats.target_calls, max_new_tokens, out == truth)


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
