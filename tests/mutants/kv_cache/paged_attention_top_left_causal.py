"""Bug: paged_attention aligns the causal mask top-left: query i sees keys 0..i.

That is right only when the queries are the whole sequence. With a cache the queries are the
newest tokens, so query i sits at position i + N - Tq and must see every key up to there.
"""

CAUGHT_BY = ["test_paged_attention_is_independent_of_placement"]
EDITS = [
    (
        "visible = torch.arange(N)[None, :] <= torch.arange(Tq)[:, None] + (N - Tq)",
        "visible = torch.arange(N)[None, :] <= torch.arange(Tq)[:, None]",
    ),
]
