"""Bug: gate_w must be in x's dtype, like the experts' weights.

Checking every weight against x's dtype looks thorough, but the router casts gate_w to float32
anyway: a float32 router next to bfloat16 experts, common in mixed-precision models, is valid
and refused.
"""

CAUGHT_BY = ["test_moe_forward_takes_gate_w_in_any_float_dtype"]
EDITS = [
    (
        "    _check_dtypes(x, w1=w1, w3=w3, w2=w2)\n\n\ndef moe_forward",
        "    _check_dtypes(x, gate_w=gate_w, w1=w1, w3=w3, w2=w2)\n\n\ndef moe_forward",
    ),
]
