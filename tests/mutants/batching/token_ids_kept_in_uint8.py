"""Bug: the new token ids are stored in uint8, which holds only 0..255.

A compact dtype looks right for ids that the small test models keep below 256; in a vocabulary of
thousands (32,000 in Llama 2, 128,256 in Llama 3) every id past 255 wraps around modulo 256, and
the request carries on from the wrong token.
"""

CAUGHT_BY = ["test_every_strategy_serves_token_ids_of_a_large_vocabulary"]
EDITS = [
    (
        ".argmax(dim=-1).tolist()  # greedy",
        ".argmax(dim=-1).to(torch.uint8).tolist()  # greedy",
    ),
]
