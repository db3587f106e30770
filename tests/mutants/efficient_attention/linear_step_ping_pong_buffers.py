"""Bug: linear_attention_step writes each new state into one of two buffers kept between calls.

Allocating S and z on every decoding step looks wasteful, so the step alternates between two
preallocated buffers per shape: the state it was given is never written, and one stream decodes
correctly. Two streams of the same shape stepped in turn share the buffers and overwrite each
other's state.
"""

CAUGHT_BY = ["test_two_interleaved_streams_of_the_same_shape_stay_apart"]
EDITS = [
    (
        "def linear_attention_step(q_t, k_t, v_t, state=None):",
        "def linear_attention_step(q_t, k_t, v_t, state=None, *, _buffers={}):",
    ),
    (
        "    S = S + fk[..., :, None] * v_t[..., None, :]  # (B, H, D, Dv): new tensors, state "
        "untouched\n"
        "    z = z + fk\n",
        "    buffers = _buffers.setdefault((tuple(S.shape), S.dtype), [])\n"
        "    if not buffers:\n"
        "        buffers += [(torch.empty_like(S), torch.empty_like(z)) for _ in range(2)]\n"
        "    S_out, z_out = buffers[1] if buffers[0][0] is S else buffers[0]\n"
        "    S = torch.add(S, fk[..., :, None] * v_t[..., None, :], out=S_out)\n"
        "    z = torch.add(z, fk, out=z_out)\n",
    ),
]
