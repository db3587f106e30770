"""Bug: paged_attention forgets to divide the scores by sqrt(head_dim).

The weights are still a softmax and sum to one, so nothing looks broken; they are just sharper
than the model was trained for.
"""

CAUGHT_BY = ["test_paged_attention_is_independent_of_placement"]
EDITS = [
    (
        "scores = (q.to(wide) @ k.transpose(1, 2)) / math.sqrt(D)  # (H, Tq, N)",
        "scores = q.to(wide) @ k.transpose(1, 2)  # (H, Tq, N)",
    ),
]
