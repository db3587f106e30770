"""The serving kata: your solution. Read katas/serving/README.md first.

Run the tests with `nox -s serving` (or `pytest katas/serving`).

Build the engine from the other katas' parts: import your own solutions (`from
katas.moe.solution import moe_forward`, ...) or the references (`from reference.moe import
moe_forward`, ...). Every part may also be written here.

The model (grading/model/llama.py) is the shared tiny Llama; here it is a mixture of experts
(`model.config.n_experts` experts, `model.config.top_k` per token, in every block's `mlp`). One
step of the engine is one packed call that the engine feeds from its own KV memory:

    model.forward_packed(rows, starts, attention, feed_forward=None) -> logits
        rows:   B LongTensors [T_b] on the model's device, the tokens each row feeds
        starts: B ints, the position of each row's first token (how many it has cached)
        attention(layer, q, k, v) -> (N, n_heads, head_dim), called in every layer with the
                packed q (N, n_heads, head_dim) and k, v (N, n_kv_heads, head_dim), RoPE applied
                (N = sum of T_b, rows back to back): store k and v, then give each token causal
                attention over its own sequence (its cached keys and the row's keys up to itself)
        feed_forward(layer, x) -> (N, dim), optional: replaces the block's feed-forward (the
                model's own runs every expert on every token)
        logits: B tensors [T_b, vocab_size]; row b's next token is logits[b][-1].argmax()

The clock is the batching kata's: time is counted in steps, every call of the target model is
one step (a draft's calls for that step's proposals belong to it), and a step in which nothing
can run passes idle. A request may be served only at steps >= its `arrival`. Decoding is
greedy; each request's tokens must equal naive_serve's (decoding it alone).

Bad input raises ValueError naming the argument:
- an empty prompt, or prompt tokens that are not Python ints in 0..vocab_size - 1 (a bool, a
  float or a tensor is refused);
- max_new_tokens < 1, or a negative arrival; two requests with the same id;
- a stop that is not a tuple or list of Python ints in 0..vocab_size - 1 (a bool, a float, a
  tensor, None or a bare int is refused; level 4): the message names the request and `stop`;
- len(prompt) + max_new_tokens - 1 > max_seq_len of the model (or of the draft);
- max_batch_size, kv_blocks, block_size or k < 1 (k even without a draft);
- max_tokens_per_step not None or an int >= 1 (a bool or a float is refused; level 5);
- prefix_caching not True or False (level 6);
- a request that cannot fit in kv_blocks even alone:
  ceil((len(prompt) + max_new_tokens - 1) / block_size) > kv_blocks;
- a draft whose vocab_size differs from the model's;
- moe_feed_forward: x not [N, dim] with N >= 1, or not in the dtype of the mixture's weights.

Every call is checked by the harness (README, "Rules every call follows"):
- no argument is changed in place (tensors, lists, requests and their prompts);
- unchanged means bit for bit, layout and autograd state included, the models and modules you
  are given too (weights, buffers, train/eval mode), and also after the call has returned;
- the work is done with PyTorch on tensors (no NumPy, no DLPack, no bit-casts, no
  .tolist() or .item() of more than 256 float elements in a call);
- the work happens in the call's own thread (no threads or processes);
- results are plain torch.Tensor objects, never subclasses;
- the judge (the harness, the tests, Hypothesis's settings) is left alone, and PyTorch's global
  settings (grad mode, default dtype, ...) are as they were when a call returns;
- every call is held to a budget of work (elementwise products and sums count too);
- answers are computed when asked, never remembered from earlier calls (nor by the tensors'
  identity), and two calls never return the same tensor;
- a model's or module's weights may change in place between two calls: use the weights it
  holds at each call, keep nothing derived from them from one call to the next;
- the code behaves the same whether or not it is measured;
- decoding runs under torch.no_grad().
"""

from __future__ import annotations

import torch

from grading.model.naive import Completion, Request  # the batching kata's Request and Completion

__all__ = ["Completion", "Request", "moe_feed_forward", "serve"]


# Level 1: the model's mixture through grouped dispatch


def moe_feed_forward(moe, x: torch.Tensor) -> torch.Tensor:
    """The mixture `moe` (a block's `mlp`: `moe.gate`, `moe.experts`, `moe.top_k`) on x [N, dim].

    Equal to `moe(x)`, the model's own forward (router logits x.float() @ gate.weight.float().T,
    softmax, top_k experts in descending order, weights renormalised to sum to 1), but each
    expert runs once, on the tokens routed to it, instead of every expert on every token. Each
    expert is a SwiGLU: w2(silu(w1(x)) * w3(x)) with nn.Linear weights (w1.weight is [h, dim]).
    The weighted sum is taken in float32 (float64 for float64). Returns [N, dim] in x's dtype.
    """
    # TODO(level 1): route, group the tokens by expert, run each expert once, combine
    raise NotImplementedError("level 1: moe_feed_forward is not implemented yet")


# Levels 2 to 6: the engine


def serve(
    model, requests, *, max_batch_size=32, kv_blocks=None, block_size=16, draft=None, k=4,
    max_tokens_per_step=None, prefix_caching=False,
) -> list[Completion]:  # fmt: skip
    """Answer `requests` with continuous batching over a paged KV cache, grouped experts and,
    given a `draft` model, speculative decoding. Returns one Completion per request, in the
    order of `requests`.

    Level 2 (draft=None). Every step, one `model.forward_packed` call serves the running
    requests (at most max_batch_size): each request's newest token, and the whole prompt of a
    request that joins (its first token comes from that call). Requests leave in the step of
    their last token; arrived requests join at once while there is room, so that with room
    (max_batch_size >= the number of requests and kv_blocks=None) each request's first token
    comes at its arrival step and one more every step after. The target reads every token at
    most once per admission: prompt tokens and every new token but the last.
    KV memory is paged: blocks of block_size tokens, a request with n tokens cached holding
    ceil(n / block_size) of them; `kv_blocks` blocks in all (None: as many as needed). No call
    may feed rows whose positions need more than kv_blocks blocks at once. When a running
    request needs a block and none is free, preempt one (free its blocks; when it rejoins, its
    row feeds its prompt and every token it had generated, and that call gives its next token;
    its tokens and first_token stay).
    Attention reads each request's keys from its blocks; the mixture runs through grouped
    dispatch (level 1).

    Level 3 (a draft model, same vocabulary). Each step, every running request gets
    min(k, tokens it still needs - 1) proposals from the draft (greedy; the draft keeps its own
    paged KV memory, with the same block tables), made by one batched draft call per proposal
    position (a draft that is a mixture runs its experts grouped too); then one target call
    verifies every running request's proposals at once (its pending tokens followed by its
    proposals; they count towards its blocks). A request keeps the longest prefix of proposals
    that match the target's own greedy choices, plus the target's next token; the target's
    cache rolls back to the first len(tokens) - 1 committed tokens, the draft's to the committed
    tokens it has read among those (only rejected proposals are dropped: no token re-read).

    Level 4 (stop tokens). `Request(id, prompt, max_new_tokens, arrival=0, stop=())`: a
    request's completion ends at the first generated token in `stop`, that token kept (as
    Hugging Face `generate` keeps eos_token_id); its `tokens` then have fewer than
    max_new_tokens entries and `finished` is the step of the call that produced the stop token.
    A stop token in the prompt means nothing; one that never comes changes nothing. Without a
    draft the request leaves in the step its stop token comes out, its KV blocks free in that
    step (a waiting request can join the next step). With a draft, if the accepted proposals or
    the target's token (correction or bonus) hold a stop token, the completion ends at the first
    one and nothing past it is kept; the draft proposes min(k, tokens still needed - 1) as
    before, counted from max_new_tokens. The length and block checks stay on max_new_tokens (a
    stop may never come). Without stop tokens every step is as in levels 2 and 3.

    Level 5 (chunked prefill). `max_tokens_per_step` (None: no cap) caps the tokens of every
    target call, proposals included. Each step the running requests come first, oldest admitted
    first, then arrived requests join in arrival order while a slot, budget and blocks are left;
    each row feeds min(pending, budget left) of its pending tokens (its newest, or what is left
    of its prompt or recompute), so a long prompt is fed in chunks, each where the last ended,
    and its first token comes from the call of its last chunk. No budget is left unused while a
    running request has pending tokens or an arrived request could join. With a draft, a row
    whose pending tokens all fit gets min(k, tokens still needed - 1, budget left after them)
    proposals; a chunk gets none; the draft's own calls are not capped. Preemption as in level
    2, a chunk never shrunk to fit the free blocks.

    Level 6 (prefix caching). With prefix_caching=True, full blocks are shared between requests
    as in the kv_cache kata's PrefixCache: a full block is registered under the chained key
    (key of the block before it, its block_size tokens) once the target (and the draft, given
    one) holds all its tokens; a request that joins or rejoins takes the registered blocks of its
    tokens' longest run of full blocks, never the block of its newest token, and feeds only the
    tokens past them. A freed block keeps its contents and key until the pool needs it: free
    blocks go least recently freed first (never-used ones before any). A block another request
    holds is never written; kv_blocks counts a shared block once.
    """
    # TODO(level 2): a paged KV pool, a scheduler, one forward_packed call per step
    # TODO(level 3): draft proposals in batched calls, one verifying call, rollback
    # TODO(level 4): end a request at its first new stop token (kept), freeing its blocks
    # TODO(level 5): a token budget per step: rows of min(pending, budget left), prompts in chunks
    # TODO(level 6): share full blocks by chained key; a joining request feeds past its cached run
    raise NotImplementedError("level 2: serve is not implemented yet")
