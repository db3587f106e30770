"""Bug: flash_attention_with_lse takes out from the kernel but computes lse from the full scores.

torch.logsumexp over q kᵀ is one line and obviously right, so it is tempting to leave the kernel
alone; it brings back the (Nq, Nk) score matrix the kernel exists to avoid, and the N² work.
"""

CAUGHT_BY = ["test_level_3_leaves_no_attention_work_to_pytorch"]
EDITS = [
    (
        """    out, lse = _attention_forward(q, k, v, causal, sm_scale, num_splits=1)
    return out[0], lse[0]""",
        """    out, _ = _attention_forward(q, k, v, causal, sm_scale, num_splits=1)
    Nq, Nk = q.shape[2], k.shape[2]
    keys = k.float().repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # (B, H, Nk, D)
    s = (q.float() @ keys.transpose(-1, -2)) * _softmax_scale(sm_scale, q.shape[-1])
    if causal:
        last = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq)  # bottom-right
        s = s.masked_fill(torch.arange(Nk, device=q.device) > last, float("-inf"))
    return out[0], torch.logsumexp(s, dim=-1)""",
    ),
]
