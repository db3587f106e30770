"""Bug: the experts' stacked weights are kept from the first call, keyed on the mixture.

Stacking the experts' weights costs a copy per call, so it is tempting to do it once per module;
but a module's weights may change in place (a checkpoint loaded into a live model), and the
stack then serves the old ones.
"""

CAUGHT_BY = ["test_moe_feed_forward_follows_weights_changed_in_place_between_calls"]
EDITS = [
    (
        "def _expert_weights(moe) -> tuple[torch.Tensor, ...]:\n"
        '    """The MoE kata\'s layout: gate_w [E, d]; w1, w3 [E, d, h]; w2 [E, h, d]."""\n',
        "_STACKED = {}\n"
        "\n"
        "\n"
        "def _expert_weights(moe) -> tuple[torch.Tensor, ...]:\n"
        "    if id(moe) not in _STACKED:\n"
        "        _STACKED[id(moe)] = _stacked(moe)\n"
        "    return _STACKED[id(moe)]\n"
        "\n"
        "\n"
        "def _stacked(moe) -> tuple[torch.Tensor, ...]:\n"
        '    """The MoE kata\'s layout: gate_w [E, d]; w1, w3 [E, d, h]; w2 [E, h, d]."""\n',
    ),
]
