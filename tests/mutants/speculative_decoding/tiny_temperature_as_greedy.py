"""Bug: a temperature below 1e-3 is rounded to 0, "so that logits / temperature cannot overflow".

Dividing by 1e-4 looks dangerous, and the softmax of such logits is usually one-hot anyway; but
softmax(logits / temperature) overflows nowhere (the softmax subtracts the largest logit), and
logits that differ by less than the temperature give a distribution far from one-hot.
"""

CAUGHT_BY = ["test_a_small_temperature_still_samples"]
EDITS = [
    (
        "    if temperature == 0:\n        return F.one_hot(",
        "    if temperature < 1e-3:\n        return F.one_hot(",
    ),
]
