"""FlashAttention: exact attention that never writes the N x N score matrix.

Your file. Read katas/flash_attention/README.md first, then fill in the functions in order:
level 1 (`tiled_attention`, plain PyTorch), level 2 (`flash_attention`, a Triton kernel),
level 3 (`flash_attention_with_lse`, `combine_partials`, `split_kv_decode`).

Conventions for every function:
- q is (B, H, Nq, D); k and v are (B, Hkv, Nk, D); H % Hkv == 0 and query head h reads
  key/value head h // (H // Hkv) (grouped-query attention);
- causal masking is aligned bottom-right: query i sees keys j <= i + Nk - Nq; a query that sees
  no key returns zeros, never NaN;
- sm_scale defaults to 1 / sqrt(D) when it is None; any other value is used as given (0.0 and
  negative scales are scales like any other);
- inputs come in float32, float16 or bfloat16 (not on Triton's interpreter), possibly as
  non-contiguous views; outputs have q's dtype; scores, exponentials and every sum run in
  float32, also over thousands of keys and for scores in the hundreds (subtract the running max);
- every visible score may lie below any finite mask constant (about -1e30): mask with -inf and
  start the running max at -inf;
- inputs are never modified.

Every function raises ValueError, naming the argument or size at fault, before any work when:
q, k or v is not 4-D or has a size 0; k and v differ in shape; q and k differ in batch size B
(a batch of 1, of q or of k and v, is not broadcast) or head dim D; H is not a multiple of Hkv;
q, k and v do not share one floating-point dtype. The README's "Errors" section lists each
function's own cases too.

Every call is checked by the harness (README, "Rules every call follows"):
- no argument is changed in place (tensors, lists);
- unchanged means bit for bit, layout and autograd state included, the models and modules you
  are given too (weights, buffers, train/eval mode), and also after the call has returned;
- the work is done with PyTorch (or Triton) on tensors (no NumPy, no DLPack, no bit-casts, no
  .tolist() or .item() of more than 256 float elements in a call);
- the work happens in the call's own thread (no threads or processes);
- results are plain torch.Tensor objects, never subclasses;
- the judge (the harness, the tests, Hypothesis's settings) is left alone, and PyTorch's global
  settings (grad mode, default dtype, ...) are as they were when a call returns;
- answers are computed when asked, never remembered from earlier calls (nor by the tensors'
  identity), and two calls never return the same tensor;
- the code behaves the same whether or not it is measured;
- no function calls PyTorch's fused attention (scaled_dot_product_attention);
- levels 2 and 3 launch a Triton kernel on every call, and split_kv_decode spreads the keys over
  its programs however long the cache (no program reads more than ceil(Nk / num_splits) + 256
  keys);
- outside the kernel PyTorch multiplies only q and the output (or the partial results), never k
  or v: every q·kᵀ and p·v is the kernel's, one decoding query's included;
"""

from __future__ import annotations

import torch


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
    block_size: int = 64,
) -> torch.Tensor:
    """softmax(q k^T * sm_scale) v, computed one block of `block_size` keys at a time.

    q (B, H, Nq, D); k, v (B, Hkv, Nk, D). Returns (B, H, Nq, D) in q's dtype.

    Per query keep, in float32, m (the largest score so far), l (the sum of exp(s - m) so far)
    and acc (the sum of exp(s - m) v so far). For each key block with scores s (B, H, Nq, n):

        m_new = max(m, max_j s_j)
        l     = l * exp(m - m_new) + sum_j exp(s_j - m_new)
        acc   = acc * exp(m - m_new) + sum_j exp(s_j - m_new) v_j
        m     = m_new

    and at the end return acc / l. Never build an (Nq, Nk) tensor, not even one query at a
    time (at Nq = 1 a row of scores over every key is one): scores live (B, H, Nq, block_size)
    at a time. Group the query heads that share a kv head rather than copying k or v for each.
    ValueError: the shared input checks (module docstring), or block_size < 1.
    """
    # TODO(level 1): the online softmax over key blocks, in plain PyTorch.
    raise NotImplementedError("level 1: tiled_attention is not implemented yet")


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
) -> torch.Tensor:
    """The same computation as `tiled_attention`, as one Triton kernel (forward only).

    q (B, H, Nq, D); k, v (B, Hkv, Nk, D) with D in {16, 32, 64, 128}. Returns (B, H, Nq, D)
    in q's dtype. One program per (block of queries, batch x head): it loads its queries once,
    streams the keys and values of its kv head through in blocks, and writes its output once.
    Pass each tensor's own strides to the kernel: q, k and v may be views with different ones.
    No attention work in PyTorch beside the kernel (its matrix products are counted).
    ValueError: the shared input checks (module docstring), or D not in {16, 32, 64, 128}.
    """
    # TODO(level 2): a Triton kernel with masks for partial blocks and for causality.
    raise NotImplementedError("level 2: flash_attention is not implemented yet")


def flash_attention_with_lse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    sm_scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`flash_attention`, also returning each query's log-sum-exp.

    lse[b, h, i] = log(sum_j exp(s_ij)) over the keys query i sees (natural log), which is
    m + log(l) at the end of the loop. Returns out (B, H, Nq, D) in q's dtype and lse
    (B, H, Nq) in float32, -inf where a query sees no key. Compute lse inside the kernel:
    PyTorch matrix products beside it (q @ k^T) are counted and fail the cost test.
    ValueError: as `flash_attention`.
    """
    # TODO(level 3): write lse from the kernel too.
    raise NotImplementedError("level 3: flash_attention_with_lse is not implemented yet")


def combine_partials(outs: torch.Tensor, lses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge attention results over S disjoint key sets into the result over their union.

    outs (S, B, H, Nq, D) and lses (S, B, H, Nq), in any floating dtype: part s is attention
    over key set s alone. The online softmax once more, over parts instead of keys, in float32:
    with m = max_s lses[s] and w_s = exp(lses[s] - m),

        out = sum_s w_s outs[s] / sum_s w_s        lse = m + log(sum_s w_s)

    A part that saw no key (lse -inf) weighs nothing, whatever its out holds (zeros, NaN or inf:
    leave it out of the sum rather than multiplying it by 0), whichever parts are empty for a
    query (the first ones, the last ones, all of them); a query that no part saw gets zeros and
    lse -inf.
    Returns out (B, H, Nq, D) and lse (B, H, Nq), both float32.
    ValueError: outs not 5-D, lses not of exactly the shape outs.shape[:4] (nothing is
    broadcast, not (S, 1, 1, 1) either), or no parts (S == 0).
    """
    # TODO(level 3): merge partial results through their log-sum-exp.
    raise NotImplementedError("level 3: combine_partials is not implemented yet")


def split_kv_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sm_scale: float | None = None,
    num_splits: int = 8,
) -> torch.Tensor:
    """Attention of one new query per sequence over a long cache, the keys split across programs.

    q (B, H, 1, D); k, v (B, Hkv, Nk, D). One query gives only B*H programs, too few to fill a
    GPU; split the keys into up to `num_splits` ranges (any num_splits >= 1, also more than Nk;
    fewer only when the keys run out, whatever Nk: ranges of whole key blocks of at most 128
    keys, so no program reads more than ceil(Nk / num_splits) + 256 keys), compute a partial
    result and its lse for each range in parallel (in float32), then merge them with
    `combine_partials`; the attention work stays in the kernel (no q·kᵀ or p·v in PyTorch, not
    even as elementwise products). Returns (B, H, 1, D) in q's dtype.
    ValueError: the shared input checks (module docstring), D not in {16, 32, 64, 128}, q with
    other than one query, or num_splits < 1.
    """
    # TODO(level 3): partial results over key ranges, merged through their lse.
    raise NotImplementedError("level 3: split_kv_decode is not implemented yet")
