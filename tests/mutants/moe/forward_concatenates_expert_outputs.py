"""Bug: moe_forward joins the experts' outputs with torch.cat, which fails when no token comes.

Collecting each busy expert's output in a list and concatenating it is the natural way to
build the grouped result, and right for every batch that holds a token. With T = 0 no expert is
busy, the list is empty and torch.cat raises: a valid, empty batch crashes the layer.
"""

CAUGHT_BY = ["test_the_layer_of_no_tokens_is_empty"]
EDITS = [
    (
        "    out = torch.empty_like(grouped)  # (N, d)\n"
        "    start = 0\n"
        "    for e, count in enumerate(plan.counts.tolist()):\n"
        "        if count:  # an expert with no tokens costs nothing\n"
        "            rows = slice(start, start + count)\n"
        "            out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])\n"
        "            start += count\n"
        "    return combine(out, weights, plan, T)",
        "    outs, start = [], 0\n"
        "    for e, count in enumerate(plan.counts.tolist()):\n"
        "        if count:  # an expert with no tokens costs nothing\n"
        "            rows = slice(start, start + count)\n"
        "            outs.append(expert_mlp(grouped[rows], w1[e], w3[e], w2[e]))\n"
        "            start += count\n"
        "    return combine(torch.cat(outs), weights, plan, T)",
    ),
]
