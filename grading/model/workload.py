"""Serving workloads: requests that arrive at random steps, with heavy-tailed lengths.

Arrivals form a Poisson process on the step clock: the gaps between requests are exponential
with mean 1 / rate steps (rounded down, so several requests can arrive in one step). Prompt and
output lengths are log-normal, the long right tail of real chat traffic. Their means imitate the
ShareGPT conversations that vLLM was benchmarked on (Kwon et al., "Efficient Memory Management for
Large Language Model Serving with PagedAttention", SOSP 2023: 161 prompt tokens and 338 output
tokens on average), scaled down by `scale` so that the tiny model's context holds them. The
spread (log-normal sigma 0.8 for prompts, 1.0 for outputs) is this module's choice: a few outputs
are many times the median, as in chat traffic.

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
