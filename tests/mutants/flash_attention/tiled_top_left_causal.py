"""Bug: causal masking is aligned top-left (query i sees keys j <= i), not bottom-right.

Top-left is what torch.tril and PyTorch's is_causal do, and it is right whenever Nq == Nk; with
a cache (Nk > Nq) the new queries must see every older key.
"""

CAUGHT_BY = ["test_tiled_attention_matches_oracle"]
EDITS = [
    (
        "last_key = torch.arange(Nq, device=q.device)[:, None] + (Nk - Nq)",
        "last_key = torch.arange(Nq, device=q.device)[:, None]",
    ),
]
