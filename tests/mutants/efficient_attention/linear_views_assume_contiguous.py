"""Bug: linear_attention flattens the heads into the batch with .view(B * H, N, D).

.view needs a layout it can reinterpret; q, k and v transposed out of a fused projection are
not laid out that way, and the call fails where reshape would copy.
"""

CAUGHT_BY = [
    "test_linear_attention_reads_strided_inputs",
]
EDITS = [
    (
        "    fq = _phi(q.to(acc))  # (B, H, Nq, D)\n",
        "    fq = _phi(q.to(acc).view(B * H, Nq, D)).view(B, H, Nq, D)\n",
    ),
]
