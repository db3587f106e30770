"""Bug: the causal mask is aligned top-left: query i sees keys 0 .. i.

That is the mask of a prompt with nothing cached, where queries and keys line up; with cached
keys the newest query must see all of them, and a decode step sees only the first key.
"""

CAUGHT_BY = ["test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step"]
EDITS = [
    (
        "visible = causal_mask(T, k.shape[1], q.device)",
        "visible = torch.ones(T, k.shape[1], dtype=torch.bool, device=q.device).tril()",
    )
]
