"""Cheat: moe_forward keeps the router's float32 copy of gate_w, keyed on its data pointer, shape
and first element.

Fresh tensors have another pointer, and a change in place that rewrites every element moves the
first one too, so both recompute; a change that leaves gate_w[0, 0] alone routes with the stale
copy. Caught because a measured call is repeated after its tensors change in place in all but
their first and last elements, and must then agree with a call on copies of the same values.
"""

KATA = "moe"
TESTS = ["test_expert_work_grows_with_k_not_with_E"]
EXPECT = "gave other numbers than on copies of those same values in new tensors"
EDITS = [
    (
        "    logits = x.float() @ gate_w.float().T  # (T, E) router in float32\n",
        "    key = (gate_w.data_ptr(), tuple(gate_w.shape), float(gate_w[0, 0]))\n"
        "    if key not in _GATES:\n"
        "        _GATES[key] = gate_w.float().T.clone()  # kept between calls\n"
        "    logits = x.float() @ _GATES[key]  # (T, E) router in float32\n",
    ),
    (
        "def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:\n",
        "_GATES = {}\n\n\n"
        "def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:\n",
    ),
]
