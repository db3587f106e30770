"""Bug: combine_partials merges the parts one at a time and gets NaN after two empty parts.

Folding part s into the running (out, lse) is the online softmax with one "key" per part: weigh
both by exp(lse - max(lse, lse_s)). While every part so far was empty and the next one is empty
too, both lse are -inf, the max is -inf, and -inf - (-inf) is NaN, which every later part keeps.
Zeroing the queries no part saw at the end hides it where every part is empty, not where the
first two parts are empty and a later one is not (a causal split whose first ranges a query
does not see, or ranges past the end of a short cache).
"""

CAUGHT_BY = ["test_combine_partials_weighs_empty_parts_nothing"]
REPLACE = {
    "combine_partials": """
        def combine_partials(outs, lses):
            if outs.dim() != 5 or lses.shape != outs.shape[:4]:
                raise ValueError(
                    f"outs must be (S, B, H, Nq, D) and lses (S, B, H, Nq), got "
                    f"{tuple(outs.shape)} and {tuple(lses.shape)}"
                )
            if outs.shape[0] == 0:
                raise ValueError(f"outs must hold at least one part, got {tuple(outs.shape)}")
            out, lse = outs[0].float(), lses[0].float()  # (B, H, Nq, D), (B, H, Nq)
            for part, part_lse in zip(outs[1:].float(), lses[1:].float()):
                m = torch.maximum(lse, part_lse)
                a, b = torch.exp(lse - m), torch.exp(part_lse - m)  # NaN where both are -inf
                out = (a[..., None] * out + b[..., None] * part) / (a + b)[..., None]
                lse = m + torch.log(a + b)
            unseen = torch.isneginf(lses.float()).all(dim=0)  # no part saw the query
            out = out.masked_fill(unseen[..., None], 0.0)
            return out, lse.masked_fill(unseen, float("-inf"))
    """,
}
