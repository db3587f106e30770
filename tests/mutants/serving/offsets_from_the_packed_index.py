"""Bug: a token's slot in its block is taken from its index in the packed batch.

`arange(N) % block_size` is right for a lone prompt starting at 0 and wrong everywhere else: a
decode token at position 17 lands in slot 0 of its block, over another token's key.
"""

CAUGHT_BY = ["test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step"]
EDITS = [
    (
        "        offsets = (positions % bs).to(device)  # (N,)",
        "        offsets = (torch.arange(len(positions)) % bs).to(device)  # (N,)",
    ),
]
