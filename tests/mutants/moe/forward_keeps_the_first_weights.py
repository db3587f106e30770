"""Bug: moe_forward keeps a copy of the expert weights of its first call and reuses it.

Preparing the experts' weights once per weight tensor (remembered by the tensor's id: stacked,
cast or laid out for the kernel) looks like free speed, since the weights "don't change". They
do: an optimizer updates them in place, and every later call runs the old experts.
"""

CAUGHT_BY = ["test_moe_forward_reads_weights_updated_in_place"]
EDITS = [
    (
        "def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:",
        "def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None, *, _kept={}):",
    ),
    (
        "    grouped = dispatch(x, plan)  # (N, d)\n",
        "    grouped = dispatch(x, plan)  # (N, d)\n"
        "    if (id(w1), id(w3), id(w2)) not in _kept:\n"
        "        _kept[id(w1), id(w3), id(w2)] = (w1.clone(), w3.clone(), w2.clone())\n"
        "    w1, w3, w2 = _kept[id(w1), id(w3), id(w2)]\n",
    ),
]
