"""Bug: the kernel keeps its running sum l in the input dtype (float16 for float16 inputs).

Storing l like the inputs halves its registers and is invisible on short sequences; over
thousands of keys l grows past 2048, where float16 steps by 2, and stops counting small weights.
(Written here as a round trip through q's dtype after each key block.)
"""

CAUGHT_BY = ["test_flash_attention_keeps_float32_sums_over_long_sequences"]
EDITS = [
    (
        "l_i = l_i * alpha + tl.sum(p, 1)",
        "l_i = (l_i * alpha + tl.sum(p, 1)).to(q.dtype).to(tl.float32)",
    ),
]
