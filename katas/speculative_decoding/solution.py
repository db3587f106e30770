"""The speculative-decoding kata: your solution. Read katas/speculative_decoding/README.md first.

Run the tests with `nox -s speculative_decoding` (or `pytest katas/speculative_decoding`).

Short names: V vocabulary size, k draft tokens proposed per round, T prompt length, N new tokens,
n tokens committed so far (prompt included).

Both models follow the shared contract of grading/model/llama.py: `model(ids, cache) -> logits`, ids
[1, t] -> logits [1, t, V], the new tokens placed at positions cache.seq_len ... onwards. For the
caches, use the KVCache of the KV-cache kata (`from reference.kv_cache import KVCache`, or your
own), made in the dtype and on the device of its own model's `next(model.parameters())` (the draft
may have another dtype than the target), with room for T + max_new_tokens tokens (not for the
model's config.max_seq_len, which may be far more).
`k`, `max_new_tokens` and `max_ngram` are Python ints (not bool); token ids lie in
0 .. vocab_size - 1.

Every call is checked by the harness (README, "Rules every call follows"):
- no argument is changed in place (tensors, lists);
- unchanged means bit for bit, layout and autograd state included, the models and modules you
  are given too (weights, buffers, train/eval mode), and also after the call has returned;
- the work is done with PyTorch on tensors (no NumPy, no DLPack, no bit-casts, no
  .tolist() or .item() of more than 256 float elements in a call);
- the work happens in the call's own thread (no threads or processes);
- results are plain torch.Tensor objects, never subclasses;
- the judge (the harness, the tests, Hypothesis's settings) is left alone, and PyTorch's global
  settings (grad mode, default dtype, ...) are as they were when a call returns;
- answers are computed when asked, never remembered from earlier calls (nor by the tensors'
  identity), and two calls never return the same tensor;
- a model's or module's weights may change in place between two calls: use the weights it
  holds at each call, keep nothing derived from them from one call to the next;
- the code behaves the same whether or not it is measured;
- decoding runs under torch.no_grad();
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# ----------------------------------------------------------------------------------------------
# Level 1: the acceptance rule


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Where to sample from after the target rejects a draft token.

    p, q [..., V] probabilities (the target's and the draft's) -> [..., V]:
        r = max(0, p - q) / sum_v max(0, p - q)      over the last dim, row by row
    In a row where p <= q everywhere (no mass left, e.g. p == q), return that row of p; a mass
    above zero, however small (1e-300), is normalised like any other.
    ValueError (naming p and q) unless p and q are tensors of one shape with at least one dim.
    """
    # TODO(level 1): clamp p - q at zero, normalise each row, fall back to p where the sum is 0
    raise NotImplementedError("level 1: residual_distribution is not implemented yet")


def accept_reject(
    p: torch.Tensor,
    q: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The target's verdict on k draft tokens: the accepted prefix plus one token of its own.

    draft_tokens [k] (int64): x_0 ... x_{k-1}, drawn by the draft, x_i from q[i].
    q [k, V]: the draft's distributions that produced them.
    p [k + 1, V]: the target's distributions at the same positions, plus one more after x_{k-1}.

    For i = 0, 1, ...: accept x_i with probability min(1, p[i, x_i] / q[i, x_i]), however small
    q[i, x_i] is (no epsilon: 1e-300 with p >= q is always accepted). At the first
    rejection, draw one token from residual_distribution(p[i], q[i]) and stop. If all k are
    accepted, draw the bonus token from p[k]. Returns [x_0 ... x_{j-1}, that token]: j + 1 tokens
    (int64), 0 <= j <= k. k = 0 is valid (draft_tokens [0], q [0, V], p [1, V]: nothing was
    proposed): the output is one token drawn from p[0]. Every random number comes from
    `generator` (torch.rand, torch.multinomial, ... with generator=generator); with
    generator=None, from torch's global generator (torch.manual_seed fixes the draws; never a
    generator of your own, fixed seed).
    ValueError (naming the argument) unless draft_tokens is an int64 tensor [k] of ids in
    0 .. V - 1, q is [k, V] and p is [k + 1, V]; checked with k = 0 too.
    """
    # TODO(level 1): walk the draft tokens, accept or reject each, then add the last token
    raise NotImplementedError("level 1: accept_reject is not implemented yet")


# ----------------------------------------------------------------------------------------------
# Level 2: speculative decoding with two caches (greedy); level 3: sampling


@dataclass
class SpecStats:
    """What one speculative_decode (or prompt_lookup_decode) call did. (Given: nothing to do.)"""

    target_calls: int = 0  # forward calls of the target
    draft_calls: int = 0  # forward calls of the draft
    proposed: int = 0  # draft tokens proposed, over all rounds
    accepted: int = 0  # draft tokens kept


def speculative_decode(
    target,
    draft,
    prompt_ids: torch.Tensor,
    max_new_tokens: int,
    k: int = 4,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, SpecStats]:
    """Decode max_new_tokens tokens from `target`, with `draft` proposing k tokens per round.

    prompt_ids [1, T] int64 -> (ids [1, T + max_new_tokens] int64, SpecStats).
    temperature 0: greedy. The draft proposes its argmax, the target accepts a proposal when it
    is its own argmax and otherwise puts its argmax there: the output is exactly the target's
    greedy decoding. temperature > 0 (any, however small: only 0 is greedy): both models'
    distributions are softmax(logits / temperature) (the draft samples its proposals from q,
    with `generator`), and each round ends with accept_reject(p, q, proposals, generator): the
    output is distributed exactly as the target's own sampling.

    Each round, with n tokens committed and N - (n - T) still to make:
      - k_round = min(k, T + N - n - 1) (no proposal that could never be kept);
      - the draft is called k_round times: first on every committed token it has not read
        (the whole prompt in the first round), then on each proposal but the last, one at a
        time, proposing one token after each call;
      - the target is called once, on every committed token it has not read followed by the
        k_round proposals; its last k_round + 1 rows of logits verify them;
      - both caches are cropped so that neither holds a token that was not kept. The newest
        committed token has been read by neither model.
    Neither model ever reads a token twice, apart from proposals the target rejected.

    Stats: target_calls and draft_calls count forward calls; proposed sums k_round; accepted
    counts proposals kept. So max_new_tokens == accepted + target_calls.
    generator=None: the random numbers come from torch's global generator, as in accept_reject.
    ValueError (naming the argument) for prompt_ids that is not int64 [1, T] with T >= 1 or holds
    an id outside 0 .. vocab_size - 1, max_new_tokens or k that is not an int >= 1,
    T + max_new_tokens beyond either model's config.max_seq_len, temperature < 0, NaN or
    infinite, and a draft
    whose config.vocab_size differs from the target's; checked on every path (max_new_tokens = 1,
    whose one round proposes nothing, too).
    """
    # TODO(level 2): the greedy rounds with two caches and their rollback
    # TODO(level 3): temperature > 0 with accept_reject and the generator
    raise NotImplementedError("level 2: speculative_decode is not implemented yet")


# ----------------------------------------------------------------------------------------------
# Level 4: prompt-lookup decoding


def lookup_draft(ids: torch.Tensor, k: int, max_ngram: int = 3) -> torch.Tensor:
    """Propose a continuation by finding the context's tail earlier in the context.

    ids [L] int64 -> [m] int64, 0 <= m <= k. For n = min(max_ngram, L - 1) down to 1: look for
    earlier occurrences of the last n tokens, ids[L-n:], that end before the last token (start
    s with s + n <= L - 1). At the first n with any, take the most recent one (the largest s)
    and return ids[s + n : s + n + k] (fewer than k when the context ends first). None for any
    n (or L <= 1, an empty ids included): return an empty tensor. Any length L (the whole
    context is searched), any int64 ids >= 0 up to 2**63 - 1, compared exactly (not as floats).
    ValueError (naming the argument) unless ids is int64 [L] with no negative id, and k and
    max_ngram are ints >= 1; checked whatever L (one token or none too).
    """
    # TODO(level 4): compare the tail with every earlier window (Tensor.unfold helps)
    raise NotImplementedError("level 4: lookup_draft is not implemented yet")


def prompt_lookup_decode(
    target, prompt_ids: torch.Tensor, max_new_tokens: int, k: int = 4, max_ngram: int = 3
) -> tuple[torch.Tensor, SpecStats]:
    """Greedy speculative decoding whose draft is lookup_draft over the committed tokens.

    prompt_ids [1, T] int64 -> (ids [1, T + max_new_tokens] int64, SpecStats): exactly the
    target's greedy decoding. Each round: proposal = lookup_draft(committed, k_round, max_ngram)
    with k_round = min(k, T + N - n - 1) (no lookup when k_round is 0), m = its length, possibly
    0; one target call on the committed tokens it has not read followed by the proposal; keep
    the leading proposals that equal the target's argmax, then the target's argmax; crop the
    cache to n - 1 as in speculative_decode. Stats: draft_calls 0, proposed sums m.
    ValueError (naming the argument) as for speculative_decode, and for max_ngram not an int
    >= 1; checked on every path (max_new_tokens = 1, which never looks anything up, too).
    """
    # TODO(level 4): speculative_decode's greedy rounds, with lookup_draft as the draft
    raise NotImplementedError("level 4: prompt_lookup_decode is not implemented yet")
