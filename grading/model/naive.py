"""The naive server the serving kata is measured against.

`naive_serve` answers requests the way a first prototype would: one request at a time, in order
of arrival, with no KV cache (every new token re-feeds the whole sequence, so attention builds a
full N x N score matrix each time) and, on a mixture-of-experts model, every expert on every
token (the model's own feed-forward). It is slow on purpose and exact: greedy decoding through
`model(ids)`, the same call the other katas' oracles use.

The clock is the batching kata's: time is counted in steps, every model call is one step, and a
step in which nothing can run passes idle. `Request` and `Completion` are the batching kata's, and
a `Request` may also name stop tokens: its completion ends at the first new token among them, that
token kept (as Hugging Face `generate` keeps `eos_token_id`), so it may hold fewer than
max_new_tokens tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Request:
    id: int
    prompt: list[int]
    max_new_tokens: int
    arrival: int = 0
    stop: tuple[int, ...] = ()  # token ids that end the completion (kept); in the prompt: nothing


@dataclass
class Completion:
    id: int
    tokens: list[int]  # the new tokens only, ending at the first stop token if one comes
    arrival: int
    first_token: int  # the step whose call produced the first new token
    finished: int  # the step whose call produced the last new token


@torch.no_grad()
def naive_serve(model, requests) -> list[Completion]:
    """Every request alone, in arrival order (ties: order in `requests`), one call per token; a
    request ends at max_new_tokens or at its first new token in `stop`, and the next starts the
    step after."""
    device = next(model.parameters()).device
    order = sorted(range(len(requests)), key=lambda i: (requests[i].arrival, i))
    done: dict[int, Completion] = {}
    step = 0
    for i in order:
        r = requests[i]
        step = max(step, r.arrival)  # idle until it arrives
        ids = torch.tensor([r.prompt], device=device)  # (1, T)
        first = step
        for _ in range(r.max_new_tokens):
            next_id = model(ids)[:, -1].argmax(dim=-1, keepdim=True)  # (1, 1): no cache
            ids = torch.cat([ids, next_id], dim=1)
            step += 1
            if int(next_id) in r.stop:
                break
        done[i] = Completion(r.id, ids[0, len(r.prompt) :].tolist(), r.arrival, first, step - 1)
    return [done[i] for i in range(len(requests))]
