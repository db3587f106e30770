"""Reference solution for the speculative-decoding kata. Read it after trying the kata yourself.

Short names: V vocabulary size, k draft tokens proposed per round, T prompt length, N new tokens,
n tokens committed so far (prompt included).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from reference.kv_cache import KVCache


def _check_int(name: str, value, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(f"{name}: expected an int >= {least}, got {value!r}")


def _sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token drawn from probs (V,), on the generator's device; returned as a (1,) tensor."""
    device = probs.device if generator is None else generator.device
    return torch.multinomial(probs.to(device), 1, generator=generator).to(probs.device)


# ----------------------------------------------------------------------------------------------
# Level 1: the acceptance rule


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)) over the last dim; p itself in rows where p <= q everywhere."""
    if not isinstance(p, torch.Tensor) or not isinstance(q, torch.Tensor):
        raise ValueError("p and q: expected two tensors of probabilities [..., V]")
    if p.dim() < 1 or p.shape != q.shape:
        raise ValueError(
            f"p and q: expected one shape [..., V] for both, got {list(p.shape)} and "
            f"{list(q.shape)}"
        )
    excess = (p - q).clamp_min(0)  # (..., V)
    mass = excess.sum(dim=-1, keepdim=True)  # (..., 1): the probability of a rejection
    has_mass = mass > 0
    return torch.where(has_mass, excess / torch.where(has_mass, mass, 1), p)


def accept_reject(
    p: torch.Tensor,
    q: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Keep the longest accepted prefix of draft_tokens (k,), then add one token of the target's.

    p (k + 1, V) and q (k, V) are the target's and the draft's distributions at the same positions.
    """
    if not isinstance(draft_tokens, torch.Tensor) or draft_tokens.dim() != 1:
        raise ValueError("draft_tokens: expected a LongTensor of shape [k]")
    if draft_tokens.dtype != torch.long:
        raise ValueError(f"draft_tokens: expected dtype torch.int64, got {draft_tokens.dtype}")
    k = draft_tokens.shape[0]
    if not isinstance(q, torch.Tensor) or q.dim() != 2 or q.shape[0] != k:
        got = list(getattr(q, "shape", []))
        raise ValueError(f"q: expected shape [k, V] = [{k}, V], got {got}")
    V = q.shape[1]
    if not isinstance(p, torch.Tensor) or tuple(p.shape) != (k + 1, V):
        raise ValueError(
            f"p: expected shape [k + 1, V] = [{k + 1}, {V}], got {list(getattr(p, 'shape', []))}"
        )
    if ((draft_tokens < 0) | (draft_tokens >= V)).any():
        raise ValueError(f"draft_tokens: expected token ids in 0..{V - 1}, got {draft_tokens}")
    steps = torch.arange(k, device=p.device)
    p_x, q_x = p[steps, draft_tokens], q[steps, draft_tokens]  # (k,): each draft token's chances
    device = p.device if generator is None else generator.device
    u = torch.rand(k, generator=generator, device=device, dtype=torch.float64).to(p.device)
    accepted = u * q_x < p_x  # u < p / q: probability min(1, p / q), and never when p = 0
    rejected = (~accepted).nonzero()  # (r, 1)
    n = k if rejected.numel() == 0 else int(rejected[0, 0])  # tokens kept before the first "no"
    last = p[k] if n == k else residual_distribution(p[n], q[n])  # the bonus, or the correction
    return torch.cat([draft_tokens[:n], _sample(last, generator)])


# ----------------------------------------------------------------------------------------------
# Level 2: greedy speculative decoding with two caches (level 3 adds temperature)


@dataclass
class SpecStats:
    target_calls: int = 0  # forward calls of the target
    draft_calls: int = 0  # forward calls of the draft
    proposed: int = 0  # draft tokens proposed, over all rounds
    accepted: int = 0  # draft tokens kept


def _check_prompt(prompt_ids, max_new_tokens: int, models: dict) -> None:
    """prompt_ids int64 [1, T] of ids in the first model's vocabulary, within every model's
    max_seq_len together with max_new_tokens."""
    if (
        not isinstance(prompt_ids, torch.Tensor)
        or prompt_ids.dtype != torch.long
        or prompt_ids.dim() != 2
        or prompt_ids.shape[0] != 1
        or prompt_ids.shape[1] < 1
    ):
        got = f"{prompt_ids.dtype} {list(prompt_ids.shape)}" if torch.is_tensor(prompt_ids) else ""
        raise ValueError(f"prompt_ids: expected a LongTensor of shape [1, T], T >= 1, got {got}")
    V = next(iter(models.values())).config.vocab_size
    if ((prompt_ids < 0) | (prompt_ids >= V)).any():
        raise ValueError(f"prompt_ids: expected token ids in 0..{V - 1}, got {prompt_ids}")
    _check_int("max_new_tokens", max_new_tokens, 1)
    total = prompt_ids.shape[1] + max_new_tokens
    for name, model in models.items():
        if total > model.config.max_seq_len:
            raise ValueError(
                f"prompt_ids: {prompt_ids.shape[1]} tokens + max_new_tokens={max_new_tokens} "
                f"pass the {name}'s max_seq_len={model.config.max_seq_len}"
            )


def _new_cache(model, max_seq_len: int) -> KVCache:
    """A batch-1 cache for `model` in the dtype and on the device of its parameters."""
    c, weight = model.config, next(model.parameters())
    return KVCache(
        c.n_layers, 1, c.n_kv_heads, c.head_dim, max_seq_len, weight.dtype, weight.device
    )


def _probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / temperature) in float64; at temperature 0, all mass on the argmax."""
    if temperature == 0:
        return F.one_hot(logits.argmax(dim=-1), logits.shape[-1]).double()
    return (logits.double() / temperature).softmax(dim=-1)


@torch.no_grad()
def speculative_decode(
    target,
    draft,
    prompt_ids: torch.Tensor,
    max_new_tokens: int,
    k: int = 4,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, SpecStats]:
    """Rounds of: the draft proposes k tokens, the target checks them all in one call."""
    _check_prompt(prompt_ids, max_new_tokens, {"target": target, "draft": draft})
    _check_int("k", k, 1)
    if not isinstance(temperature, (int, float)) or not 0 <= temperature < math.inf:
        raise ValueError(f"temperature: expected a finite number >= 0, got {temperature!r}")
    V = target.config.vocab_size
    if draft.config.vocab_size != V:
        raise ValueError(
            f"draft: vocab_size {draft.config.vocab_size} differs from the target's vocab_size {V}"
        )
    T = prompt_ids.shape[1]
    total = T + max_new_tokens
    out = torch.zeros(1, total, dtype=torch.long, device=prompt_ids.device)
    out[:, :T] = prompt_ids
    target_cache, draft_cache = _new_cache(target, total), _new_cache(draft, total)
    stats = SpecStats()
    n = T  # tokens committed; out[:, n:] is scratch space for proposals
    while n < total:
        k_round = min(k, total - n - 1)  # never propose a token that could not be kept
        q = torch.zeros(k_round, V, dtype=torch.float64, device=out.device)  # (k_round, V)
        for i in range(k_round):
            unread = out[:, draft_cache.seq_len : n + i]  # (1, t): what the draft hasn't seen
            q[i] = _probs(draft(unread, draft_cache)[0, -1], temperature)
            out[0, n + i] = _sample(q[i], generator)[0]
            stats.draft_calls += 1
        unread = out[:, target_cache.seq_len : n + k_round]  # pending tokens + the proposals
        logits = target(unread, target_cache)[0, -(k_round + 1) :]  # (k_round + 1, V)
        stats.target_calls += 1
        p = _probs(logits, temperature)
        kept = accept_reject(p, q, out[0, n : n + k_round].clone(), generator)  # (j + 1,)
        out[0, n : n + len(kept)] = kept
        stats.proposed += k_round
        stats.accepted += len(kept) - 1
        n += len(kept)
        # Roll back whatever the caches read past the committed tokens. The newest token has
        # been read by neither model: it is the first thing both read next round.
        target_cache.crop(n - 1)
        draft_cache.crop(min(draft_cache.seq_len, n - 1))
    return out, stats


# ----------------------------------------------------------------------------------------------
# Level 4: prompt-lookup decoding, a draft without a model


def lookup_draft(ids: torch.Tensor, k: int, max_ngram: int = 3) -> torch.Tensor:
    """Up to k tokens that followed the most recent earlier occurrence of the context's tail.

    ids (L,) -> (m,) with 0 <= m <= k; the tail tried is the last max_ngram tokens, then fewer.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.long:
        raise ValueError("ids: expected a LongTensor of shape [L]")
    if (ids < 0).any():
        raise ValueError(f"ids: token ids cannot be negative, got {ids}")
    _check_int("k", k, 1)
    _check_int("max_ngram", max_ngram, 1)
    L = ids.shape[0]
    for n in range(min(max_ngram, L - 1), 0, -1):
        windows = ids[: L - 1].unfold(0, n, 1)  # (L - n, n): n-grams ending before the last token
        starts = (windows == ids[L - n :]).all(dim=-1).nonzero()  # (hits, 1)
        if starts.numel():
            follow = int(starts[-1, 0]) + n  # just after the most recent occurrence
            return ids[follow : follow + k].clone()  # a new tensor, not a view of ids
    return ids[:0]


@torch.no_grad()
def prompt_lookup_decode(
    target, prompt_ids: torch.Tensor, max_new_tokens: int, k: int = 4, max_ngram: int = 3
) -> tuple[torch.Tensor, SpecStats]:
    """Greedy speculative decoding whose proposals come from lookup_draft instead of a model."""
    _check_prompt(prompt_ids, max_new_tokens, {"target": target})
    _check_int("k", k, 1)
    _check_int("max_ngram", max_ngram, 1)
    T = prompt_ids.shape[1]
    total = T + max_new_tokens
    out = torch.zeros(1, total, dtype=torch.long, device=prompt_ids.device)
    out[:, :T] = prompt_ids
    cache = _new_cache(target, total)
    stats = SpecStats()
    n = T
    while n < total:
        k_round = min(k, total - n - 1)
        proposal = lookup_draft(out[0, :n], k_round, max_ngram) if k_round else out[0, :0]
        m = len(proposal)
        out[0, n : n + m] = proposal
        logits = target(out[:, cache.seq_len : n + m], cache)[0, -(m + 1) :]  # (m + 1, V)
        stats.target_calls += 1
        best = logits.argmax(dim=-1)  # (m + 1,): the target's own choice after each prefix
        j = int((proposal == best[:m]).cumprod(dim=0).sum())  # leading agreements
        out[0, n + j] = best[j]
        stats.proposed += m
        stats.accepted += j
        n += j + 1
        cache.crop(n - 1)
    return out, stats
