"""What the speculative-decoding tests build, and the oracles they judge by.

- `tiny_model`: the shared model (float64 unless a test asks), built once per recipe;
  `logs_checked(target, draft)`: its call logs checked against the work that really ran.
- `ScriptedModel`: a model that follows the shared contract (it reads and writes its cache like
  any other) but whose logits follow a script: the target's greedy continuation, right or wrong
  at each position as the test decides. As a target it makes a cheap model whose greedy output is
  the script; as a draft it agrees with the target exactly as often as the test says
  (`coin_flips`: independently with probability alpha).
- `MarkovModel`: a cheap model whose next token depends on the current one and the position,
  for the sampling tests' thousands of runs.
- `rounds` and `ideal_schedule`: the rounds greedy decoding goes through when the test knows
  which proposals are wrong, and the model calls the README's schedule makes for them;
  `lookup_rounds`: the same for prompt lookup; `expected_stats`: the SpecStats of such rounds.
- `replay_flops`: the FLOPs of a model over a schedule of calls, with a plain cache
  (`ListCache`); `FlopMeter` counts the FLOPs of a model's calls during a test.
- `sequence_distribution`, `outcome_distribution`, `g_test`: exact distributions by
  enumeration and a fixed-significance G-test against them.
- `lookup_oracle`: prompt lookup on plain Python lists.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from statistics import NormalDist

import torch
from torch import nn

from grading.judge.audit import audited
from grading.judge.cost import count_flops, held_bytes
from grading.model import ModelCall, ModelConfig, TinyLlama, make_model

# Significance of every statistical test. Each runs on fixed seeds, so it gives the same verdict
# on every run; a correct solution that draws its random numbers in another order fails one of
# them with probability 1e-4.
SIGNIFICANCE = 1e-4
Z = NormalDist().inv_cdf(1 - SIGNIFICANCE)  # 3.72: the normal quantile the tests compare with


@functools.lru_cache(maxsize=32)
def tiny_model(seed: int, dtype: torch.dtype = torch.float64, **overrides) -> nn.Module:
    """The shared model, built once per recipe (building is most of a test's time)."""
    return make_model(seed, dtype, **overrides)


def logs_checked(target, draft=None):
    """A block whose shared models' logs (`model.calls`) must match the products that ran
    through their weights (grading/judge/audit.py): a model run past its own call, e.g. through a
    private method, fails. Test models (ScriptedModel, MarkovModel) are not audited."""
    shared = [m if isinstance(m, TinyLlama) else None for m in (target, draft)]
    return audited(*shared, log="calls")


@functools.lru_cache(maxsize=4)
def twin(seed: int, **overrides) -> nn.Module:
    """A second model with tiny_model's weights: a copy of the target that logs its own calls."""
    return make_model(seed, torch.float64, **overrides)


# The three model recipes the greedy tests draw: the default target, and drafts of other sizes.
TARGET = dict(n_kv_heads=2)
SMALL_DRAFT = dict(n_layers=1, n_heads=2, n_kv_heads=1, head_dim=8, hidden_dim=32)
WIDE_DRAFT = dict(n_layers=3, n_heads=6, n_kv_heads=3, head_dim=4, hidden_dim=64)


class ScriptedModel(nn.Module):
    """Logits that put all weight on the script's next token, or on a wrong one.

    At position i (predicting the token at index i + 1) the row's argmax is script[i + 1], or
    (script[i + 1] + 1) % V when `wrong(i + 1)` says so; its logit is `margin`, the others 0
    (a margin of 1e4 makes even softmax(logits / temperature) one-hot, at any temperature up to
    10: sampling becomes as predictable as greedy decoding). Each call reads and advances its cache
    like a real model: through `inner`, a real model whose FLOPs then count, or by writing zeros
    to a one-layer cache of its own config (`max_seq_len`: the script's length unless given).
    With `weigh_cache`, each call records the bytes its cache holds in `cache_bytes`.
    """

    def __init__(
        self,
        script: Sequence[int],
        vocab_size: int,
        wrong: Callable[[int], bool] = lambda index: False,
        inner: nn.Module | None = None,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
        margin: float = 1.0,
        max_seq_len: int | None = None,
        weigh_cache: bool = False,
    ) -> None:
        super().__init__()
        self.script, self.wrong, self.inner, self.margin = list(script), wrong, inner, margin
        self.calls: list[ModelCall] = []  # every call, logged as the shared model logs its own
        self.weigh_cache = weigh_cache
        self.cache_bytes: list[int] = []  # held_bytes(cache) at each call, when weigh_cache
        if inner is not None:
            self.config = inner.config
        else:
            self.config = ModelConfig(
                n_layers=1, n_heads=1, n_kv_heads=1, head_dim=2, vocab_size=vocab_size,
                max_seq_len=len(self.script) if max_seq_len is None else max_seq_len,
            )  # fmt: skip
            self.weight = nn.Parameter(torch.zeros(1, dtype=dtype, device=device))
        if self.config.vocab_size != vocab_size:
            raise ValueError("inner: its vocab_size must be the script's")

    def forward(self, ids: torch.Tensor, cache=None) -> torch.Tensor:
        B, T = ids.shape
        start = 0 if cache is None else int(cache.seq_len)
        cache_len = None if cache is None else start
        self.calls.append(ModelCall(T, B, cache_len, torch.is_grad_enabled()))
        if self.weigh_cache and cache is not None:
            self.cache_bytes.append(held_bytes(cache))
        if self.inner is not None:
            logits = torch.zeros_like(self.inner(ids, cache))  # (B, T, V)
        else:
            V = self.config.vocab_size
            logits = torch.zeros(B, T, V, dtype=torch.float64, device=ids.device)
            if cache is not None:
                zeros = torch.zeros(B, 1, T, 2, dtype=self.weight.dtype, device=self.weight.device)
                cache.update(0, zeros, zeros)
        V = self.config.vocab_size
        chosen = []
        for index in range(start + 1, start + T + 1):
            token = self.script[index] if index < len(self.script) else 0
            chosen.append((token + 1) % V if self.wrong(index) else token)
        logits[:, torch.arange(T), torch.tensor(chosen)] = self.margin
        return logits


class MarkovModel(nn.Module):
    """A cheap model for the sampling tests: the logits at position i are
    table[ids[i]] + bias[i], so the next token depends on the current one and on the position
    (read from the cache, which it advances by writing zeros, as ScriptedModel does). `scale`
    sets the logits' spread (scaled with the temperature, the distributions stay far from
    one-hot however cold); `dtype` the model's parameters, cache and logits."""

    def __init__(
        self,
        vocab_size: int,
        max_seq_len: int,
        seed: int,
        scale: float = 1.5,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.table = torch.randn(vocab_size, vocab_size, generator=gen, dtype=torch.float64)
        self.table = (self.table * scale).to(dtype)  # (V, V): row a holds the logits after token a
        self.bias = torch.randn(max_seq_len, vocab_size, generator=gen, dtype=torch.float64)
        self.bias = (self.bias * scale).to(dtype)  # (max_seq_len, V)
        self.config = ModelConfig(
            n_layers=1, n_heads=1, n_kv_heads=1, head_dim=2, vocab_size=vocab_size,
            max_seq_len=max_seq_len,
        )  # fmt: skip
        self.weight = nn.Parameter(torch.zeros(1, dtype=dtype))
        self.calls: list[ModelCall] = []  # every call, logged as the shared model logs its own

    def forward(self, ids: torch.Tensor, cache=None) -> torch.Tensor:
        B, T = ids.shape
        start = 0 if cache is None else int(cache.seq_len)
        self.calls.append(ModelCall(T, B, None if cache is None else start, False))
        if cache is not None:
            zeros = torch.zeros(B, 1, T, 2, dtype=self.weight.dtype)
            cache.update(0, zeros, zeros)
        return self.table[ids] + self.bias[start : start + T]  # (B, T, V)


def coin_flips(alpha: float, seed: int) -> Callable[[int], bool]:
    """`wrong` for a ScriptedModel that agrees with probability alpha, independently each time."""
    gen = torch.Generator().manual_seed(seed)
    return lambda index: bool(torch.rand((), generator=gen, dtype=torch.float64) >= alpha)


def rounds(T: int, N: int, k: int, wrong: Callable[[int], bool]) -> list[tuple[int, int, int]]:
    """The greedy rounds (n, k_round, accepted) when the proposals at the indices `wrong` names
    are rejected and the others accepted; n counts the tokens committed before the round."""
    out, n = [], T
    while n < T + N:
        k_round = min(k, T + N - n - 1)
        j = 0
        while j < k_round and not wrong(n + j):
            j += 1
        out.append((n, k_round, j))
        n += j + 1
    return out


def ideal_schedule(T: int, plan: list[tuple[int, int, int]]):
    """(target calls, draft calls), each a list of (tokens fed, cache length before the call),
    that the README's schedule makes over the rounds `plan` (from `rounds`)."""
    target, draft = [], []
    draft_read = 0  # tokens the draft's cache holds
    for n, k_round, accepted in plan:
        target.append((T + k_round, 0) if n == T else (1 + k_round, n - 1))
        for i in range(k_round):
            draft.append((n + i - draft_read, draft_read))
            draft_read = n + i
        draft_read = min(draft_read, n + accepted)  # the crop after the round
    return target, draft


def lookup_rounds(script: list[int], T: int, N: int, k: int, max_ngram: int):
    """The rounds (n, k_round, accepted) prompt lookup goes through when the target's greedy
    output is `script`, and each round's proposal length m: (rounds, [m, ...])."""
    plan, lengths, n = [], [], T
    while n < T + N:
        k_round = min(k, T + N - n - 1)
        proposal = lookup_oracle(script[:n], k_round, max_ngram) if k_round else []
        j = 0
        while j < len(proposal) and proposal[j] == script[n + j]:
            j += 1
        plan.append((n, len(proposal), j))
        lengths.append(len(proposal))
        n += j + 1
    return plan, lengths


def expected_stats(plan: list[tuple[int, int, int]], draft_calls: int) -> dict[str, int]:
    """The SpecStats fields of the rounds `plan` (n, proposals, accepted), as a dict."""
    return dict(
        target_calls=len(plan),
        draft_calls=draft_calls,
        proposed=sum(proposed for _, proposed, _ in plan),
        accepted=sum(accepted for _, _, accepted in plan),
    )


def stats_as_dict(stats) -> dict[str, int]:
    """A SpecStats (the solution's own class) as a dict of its four counts."""
    names = ("target_calls", "draft_calls", "proposed", "accepted")
    return {name: getattr(stats, name, None) for name in names}


def schedule_difference(name: str, want: list[tuple[int, int]], got: list[tuple[int, int]]) -> str:
    """Where a model's calls, as (tokens fed, cache length before), first leave the schedule."""
    i = next((i for i, (w, g) in enumerate(zip(want, got, strict=False)) if w != g), None)
    if i is None:
        return (
            f"the {name} made {len(got)} calls where the schedule makes {len(want)}; the first "
            f"{min(len(want), len(got))} agree"
        )
    return (
        f"the {name}'s call {i} fed {got[i][0]} tokens at cache length {got[i][1]}; the "
        f"schedule feeds {want[i][0]} at cache length {want[i][1]}"
    )


class ListCache:
    """The plainest cache: per layer, keys and values concatenated as they come."""

    def __init__(self) -> None:
        self.k: dict[int, torch.Tensor] = {}
        self.v: dict[int, torch.Tensor] = {}

    @property
    def seq_len(self) -> int:
        return 0 if not self.k else self.k[0].shape[2]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if layer in self.k:
            k, v = torch.cat([self.k[layer], k], dim=2), torch.cat([self.v[layer], v], dim=2)
        self.k[layer], self.v[layer] = k, v
        return k, v

    def crop(self, length: int) -> None:
        for layer in self.k:
            self.k[layer] = self.k[layer][:, :, :length]
            self.v[layer] = self.v[layer][:, :, :length]


def replay_flops(model: nn.Module, calls: list[tuple[int, int]]) -> int:
    """FLOPs of `model` over calls (tokens fed, cache length before), cropping as needed."""
    cache, total = ListCache(), 0
    with torch.no_grad():
        for tokens, cache_len in calls:
            if cache_len > cache.seq_len:
                model(torch.zeros(1, cache_len - cache.seq_len, dtype=torch.long), cache)
            cache.crop(cache_len)
            ids = torch.zeros(1, tokens, dtype=torch.long)
            total += count_flops(model, ids, cache)[1]
    return total


class FlopMeter:
    """A model wrapper that counts the FLOPs of each forward call; the rest passes through."""

    def __init__(self, model: nn.Module) -> None:
        self.model, self.flops = model, 0

    def __call__(self, ids: torch.Tensor, cache=None) -> torch.Tensor:
        logits, flops = count_flops(self.model, ids, cache)
        self.flops += flops
        return logits

    def __getattr__(self, name: str):
        return getattr(self.model, name)


def sequence_distribution(model, prompt: list[int], N: int, temperature: float):
    """The exact distribution of the target's own sampled continuations of N tokens, by
    enumeration: P(x_1..x_N) = prod_t softmax(logits_t / temperature)[x_t]."""
    V = model.config.vocab_size
    conts = list(itertools.product(range(V), repeat=N))
    ids = torch.tensor([prompt + list(c) for c in conts])  # (V**N, T + N)
    with torch.no_grad():
        logits = model(ids)[:, len(prompt) - 1 : -1]  # (V**N, N, V)
    probs = (logits.double() / temperature).softmax(dim=-1)
    chosen = probs.gather(-1, ids[:, len(prompt) :, None])[..., 0]  # (V**N, N)
    return {c: float(p) for c, p in zip(conts, chosen.prod(dim=-1), strict=True)}


def outcome_distribution(p: torch.Tensor, q: torch.Tensor) -> dict[tuple[int, ...], float]:
    """The exact distribution of accept_reject's output when draft_tokens[i] ~ q[i]:

    P(x_1..x_j, z) = prod_{i<j} min(p_i, q_i)(x_i) * max(0, p_j - q_j)(z)   for j < k
    P(x_1..x_k, y) = prod_{i<k} min(p_i, q_i)(x_i) * p_k(y)
    """
    k, V = q.shape
    both = torch.minimum(p[:k], q).double()  # (k, V)
    excess = (p[:k] - q).clamp_min(0).double()  # (k, V)
    dist = {}
    for j in range(k + 1):
        last = p[k].double() if j == k else excess[j]
        for xs in itertools.product(range(V), repeat=j + 1):
            prob = float(last[xs[-1]])
            for i, x in enumerate(xs[:-1]):
                prob *= float(both[i, x])
            if prob > 0:
                dist[xs] = prob
    return dist


def chi2_quantile(df: int) -> float:
    """The 1 - SIGNIFICANCE quantile of chi-square with df degrees (Wilson-Hilferty)."""
    h = 2 / (9 * df)
    return df * (1 - h + Z * math.sqrt(h)) ** 3


def g_test(samples: list[tuple[int, ...]], expected: dict[tuple[int, ...], float]):
    """(passed, what happened as text) for samples against `expected`, at SIGNIFICANCE.

    Cells expected fewer than 5 times are pooled into one; an outcome the oracle gives
    probability 0 is a failure by itself, whatever the statistic.
    """
    n = len(samples)
    counts = Counter(samples)
    impossible = sorted((s for s in counts if expected.get(s, 0.0) == 0.0), key=counts.get)
    if impossible:
        worst = impossible[-1]
        return False, (
            f"the outcome {worst} has probability 0 under the exact distribution, yet came out "
            f"{counts[worst]} times in {n} ({len(impossible)} impossible outcome(s) seen)"
        )
    cells, pooled_obs, pooled_exp = [], 0, 0.0
    for outcome, prob in expected.items():
        if prob * n >= 5:
            cells.append((outcome, counts.get(outcome, 0), prob * n))
        else:
            pooled_obs, pooled_exp = pooled_obs + counts.get(outcome, 0), pooled_exp + prob * n
    if pooled_exp > 0:
        cells.append(("others", pooled_obs, pooled_exp))
    g = 2 * sum(o * math.log(o / e) for _, o, e in cells if o > 0)
    critical = chi2_quantile(max(len(cells) - 1, 1))
    worst = max(cells, key=lambda c: abs(c[1] - c[2]) / math.sqrt(c[2]))
    verdict = "passes" if g <= critical else "fails"
    return g <= critical, (
        f"the G-test {verdict} (G = {g:.1f}, critical value {critical:.1f} at significance "
        f"{SIGNIFICANCE:g}); the worst outcome {worst[0]} was expected {worst[2]:.1f} times in "
        f"{n} and came out {worst[1]} times"
    )


def lookup_oracle(ids: list[int], k: int, max_ngram: int) -> list[int]:
    """Prompt lookup on a list: the longest tail (at most max_ngram) seen earlier, its most
    recent earlier occurrence, and up to k tokens after it."""
    L = len(ids)
    for n in range(min(max_ngram, L - 1), 0, -1):
        tail = ids[L - n :]
        for start in range(L - n - 1, -1, -1):
            if ids[start : start + n] == tail:
                return ids[start + n : start + n + k]
    return []
