"""Bug: the greedy argmax is taken on the logits converted to float32.

Converting "to be safe" costs nothing visible on random weights, where the best logit leads by a
wide margin; but two float64 logits closer than float32's resolution become a tie in float32,
and the argmax takes the first of the pair where float64 says the other is larger.
"""

CAUGHT_BY = ["test_every_strategy_takes_the_argmax_in_the_logits_dtype"]
EDITS = [
    (
        "next_ids = torch.stack([last for _, last in ready]).argmax(dim=-1).tolist()",
        "next_ids = torch.stack([last for _, last in ready]).float().argmax(dim=-1).tolist()",
    ),
]
