"""Bug: moe_feed_forward calls the mixture's own forward, every expert on every token.

`moe(x)` is the definition the docstring gives, so it is the first thing that passes the
exactness test; but it pays for all E experts on every token, E/k times the work grouped
dispatch does.
"""

CAUGHT_BY = ["test_each_expert_runs_only_on_its_tokens"]
EDITS = [
    (
        "    return moe_forward(x, *_expert_weights(moe), moe.top_k)\n",
        "    return moe(x)\n",
    ),
]
