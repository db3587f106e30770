"""Bug: linear_attention_step writes each new state into one of 64 buffers reused in turn.

Two ping-pong buffers clearly break beams and rollbacks, so the step keeps a pool of 64 per shape
and hands them out round-robin: a stream, two interleaved, even a beam a few dozen states deep
all resume exactly. The 65th state alive overwrites the first, which its owner still holds.
"""

CAUGHT_BY = ["test_linear_attention_keeps_more_than_64_live_states"]
EDITS = [
    (
        "def linear_attention_step(q_t, k_t, v_t, state=None):",
        "_POOLS = {}  # (shape, dtype) -> [calls so far, then 64 buffers (S, z)]\n\n\n"
        "def linear_attention_step(q_t, k_t, v_t, state=None):",
    ),
    (
        "    S = S + fk[..., :, None] * v_t[..., None, :]  # (B, H, D, Dv): new tensors, state "
        "untouched\n"
        "    z = z + fk\n",
        "    pool = _POOLS.setdefault((tuple(S.shape), S.dtype), [0])\n"
        "    if len(pool) < 65:\n"
        "        pool.append((torch.empty_like(S), torch.empty_like(z)))\n"
        "    S_out, z_out = pool[1 + pool[0] % 64]\n"
        "    pool[0] += 1\n"
        "    S = torch.add(S, fk[..., :, None] * v_t[..., None, :], out=S_out)\n"
        "    z = torch.add(z, fk, out=z_out)\n",
    ),
]
