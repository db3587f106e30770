"""Bug: linear_attention_step keeps its state S, z in the inputs' dtype (float16/bfloat16).

A few steps look fine; after a thousand, z is in the thousands, where float16 cannot add a 1
(and bfloat16 not even past 256): the sums stop growing and the outputs drift.
"""

CAUGHT_BY = [
    "test_linear_attention_over_thousands_of_tokens_keeps_float32_precision",
    "test_linear_attention_steps_match_parallel_form_and_carry_on",
]
EDITS = [
    (
        ("    acc = _compute_dtype(q_t.dtype)\n    if state is None:"),
        ("    acc = q_t.dtype\n    if state is None:"),
    ),
]
