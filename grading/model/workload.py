"""Serving workloads: requests that arrive at random steps, with heavy-tailed lengths.

Arrivals form a Poisson process on the step clock: the gaps between requests are exponential
with mean 1 / rate steps (rounded down, so several requests can arrive in one step). Prompt and
output lengths are log-normal, the long right tail of real chat traffic. Their means imitate the
ShareGPT conversations that vLLM was benchmarked on (Kwon et al., "Efficient Memory Management for
Large Language Model Serving with PagedAttention", SOSP 2023: 161 prompt tokens and 338 output
tokens on average), scaled down by `scale` so that the tiny model's context holds them. The
spread (log-normal sigma 0.8 for prompts, 1.0 for outputs) is this module's choice: a few outputs
are many times the median, as in chat traffic.

`shared_prefix_workload` is the traffic of a chat service with a few system prompts: every prompt
is one of `n_prefixes` long prefixes followed by a short tail of its own, the workload where a
server that reuses the prefix's keys and values (prefix caching) can skip most of the prefill.

Everything comes from `seed` through Python's `random.Random`: the same workload on every machine.
`held_out_prompts` gives prompts of real text instead, for the trained byte-level models.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

SHAREGPT_MEAN_PROMPT = 161
SHAREGPT_MEAN_OUTPUT = 338


@dataclass(frozen=True)
class WorkloadRequest:
    id: int
    prompt: list[int]
    max_new_tokens: int
    arrival: int


def lognormal(rng: random.Random, mean: float, sigma: float) -> float:
    """A log-normal draw with the given mean (not median): exp(mu + σz), mu = ln mean - σ²/2."""
    return rng.lognormvariate(math.log(mean) - sigma**2 / 2, sigma)


def poisson_workload(
    n_requests: int,
    *,
    rate: float,
    seed: int = 0,
    vocab_size: int = 64,
    max_seq_len: int = 256,
    scale: float = 0.1,
    prompt_sigma: float = 0.8,
    output_sigma: float = 1.0,
) -> list[WorkloadRequest]:
    """`n_requests` requests, arriving `rate` per step on average, sorted by arrival.

    Prompt lengths have mean scale x 161 and output lengths (max_new_tokens) mean scale x 338,
    both log-normal, clipped to at least 1 and so that len(prompt) + max_new_tokens - 1 <=
    max_seq_len (the last new token is never fed back). Ids are 0 .. n_requests - 1.
    """
    if n_requests < 0 or rate <= 0 or scale <= 0 or max_seq_len < 2:
        raise ValueError(
            f"n_requests >= 0, rate > 0, scale > 0 and max_seq_len >= 2 expected, got "
            f"{n_requests}, {rate}, {scale}, {max_seq_len}"
        )
    rng = random.Random(seed)
    now, requests = 0.0, []
    for i in range(n_requests):
        now += rng.expovariate(rate)
        P = min(
            max(1, round(lognormal(rng, scale * SHAREGPT_MEAN_PROMPT, prompt_sigma))),
            max_seq_len // 2,
        )
        n = max(1, round(lognormal(rng, scale * SHAREGPT_MEAN_OUTPUT, output_sigma)))
        n = min(n, max_seq_len - P + 1)
        prompt = [rng.randrange(vocab_size) for _ in range(P)]
        requests.append(WorkloadRequest(i, prompt, n, int(now)))
    return requests


def shared_prefix_workload(
    n_requests: int = 48,
    *,
    rate: float,
    n_prefixes: int = 4,
    prefix_len: int = 64,
    tail: tuple[int, int] = (4, 16),
    seed: int = 0,
    vocab_size: int = 64,
    max_seq_len: int = 256,
    scale: float = 0.1,
    output_sigma: float = 1.0,
) -> list[WorkloadRequest]:
    """`n_requests` requests sharing `n_prefixes` system prompts, arriving `rate` per step on
    average (as in `poisson_workload`), sorted by arrival.

    Each prompt is a prefix of `prefix_len` tokens, request i's being prefix i % n_prefixes (the
    prefixes distinct, each used in turn), then a tail of its own: tail[0] .. tail[1] tokens
    (uniform), no two tails alike. Output lengths (max_new_tokens) are `poisson_workload`'s:
    log-normal with mean scale x 338, clipped to at least 1 and so that len(prompt) +
    max_new_tokens - 1 <= max_seq_len. Ids are 0 .. n_requests - 1.
    """
    low, high = tail
    if n_requests < 0 or rate <= 0 or scale <= 0 or n_prefixes < 1 or prefix_len < 1:
        raise ValueError(
            f"n_requests >= 0, rate > 0, scale > 0, n_prefixes >= 1 and prefix_len >= 1 "
            f"expected, got {n_requests}, {rate}, {scale}, {n_prefixes}, {prefix_len}"
        )
    if not 1 <= low <= high or prefix_len + high > max_seq_len:
        raise ValueError(
            f"tail: expected 1 <= tail[0] <= tail[1] and prefix_len + tail[1] <= max_seq_len = "
            f"{max_seq_len}, got {tail} with prefix_len {prefix_len}"
        )
    tails_possible = sum(vocab_size**t for t in range(low, high + 1))
    if vocab_size**prefix_len < n_prefixes or tails_possible < n_requests:
        raise ValueError(
            f"vocab_size {vocab_size}: too few ids for {n_prefixes} distinct prefixes of "
            f"{prefix_len} tokens and {n_requests} distinct tails of {low}..{high} tokens"
        )
    rng = random.Random(seed)
    prefixes: list[tuple[int, ...]] = []
    while len(prefixes) < n_prefixes:  # redrawn on a repeat: the prefixes are distinct
        prefix = tuple(rng.randrange(vocab_size) for _ in range(prefix_len))
        if prefix not in prefixes:
            prefixes.append(prefix)
    now, seen, requests = 0.0, set(), []
    for i in range(n_requests):
        now += rng.expovariate(rate)
        ending: tuple[int, ...] = ()
        while not ending or ending in seen:  # redrawn on a repeat: every tail is its own
            length = rng.randint(low, high)
            ending = tuple(rng.randrange(vocab_size) for _ in range(length))
        seen.add(ending)
        P = prefix_len + len(ending)
        n = max(1, round(lognormal(rng, scale * SHAREGPT_MEAN_OUTPUT, output_sigma)))
        n = min(n, max_seq_len - P + 1)
        prompt = list(prefixes[i % n_prefixes] + ending)
        requests.append(WorkloadRequest(i, prompt, n, int(now)))
    return requests


def held_out_prompts(lengths: list[int]) -> list[list[int]]:
    """Prompts of real text for the trained byte-level models (`grading.model.train`): one of each
    length in `lengths`, in bytes, cut from the held-out standard-library source. Prompt i starts
    at the first non-blank line at or after i / len(lengths) of the way through the text."""
    from grading.model.train import encode, stdlib_source

    text = encode(stdlib_source(held_out=True)).tolist()
    lines = [0] + [i + 1 for i, byte in enumerate(text[:-1]) if byte == ord("\n")]
    lines = [s for s in lines if text[s] != ord("\n")]
    prompts = []
    for i, length in enumerate(lengths):
        share = i * len(text) // len(lengths)
        start = next((s for s in lines if s >= share and s + length <= len(text)), None)
        if start is None:
            raise ValueError(f"lengths: no room for a prompt of {length} bytes after byte {share}")
        prompts.append(text[start : start + length])
    return prompts
