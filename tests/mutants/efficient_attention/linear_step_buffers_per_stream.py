"""Bug: linear_attention_step writes the states of a stream into two buffers, in turn.

Allocating S and z on every decoding step looks wasteful, so each stream gets two buffers, found
by the state it is given: the state passed in is never written, and streams stepped in turn keep
apart. But a state returned two steps ago is overwritten by the next step, so resuming from an
older state (a beam, a rollback) continues a history that is no longer there.
"""

CAUGHT_BY = ["test_linear_attention_states_are_kept_and_resumed"]
EDITS = [
    (
        "def linear_attention_step(q_t, k_t, v_t, state=None):",
        "_PAIRS = []  # per stream: two (S, z) buffers, written in turn\n"
        "\n"
        "\n"
        "def linear_attention_step(q_t, k_t, v_t, state=None):",
    ),
    (
        "    S = S + fk[..., :, None] * v_t[..., None, :]  # (B, H, D, Dv): new tensors, state "
        "untouched\n"
        "    z = z + fk\n",
        "    pair = next((p for p in _PAIRS if S is p[0][0] or S is p[1][0]), None)\n"
        "    if pair is None:  # a new stream\n"
        "        pair = [(torch.empty_like(S), torch.empty_like(z)) for _ in range(2)]\n"
        "        _PAIRS.append(pair)\n"
        "    S_out, z_out = pair[1] if pair[0][0] is S else pair[0]\n"
        "    S = torch.add(S, fk[..., :, None] * v_t[..., None, :], out=S_out)\n"
        "    z = torch.add(z, fk, out=z_out)\n",
    ),
]
