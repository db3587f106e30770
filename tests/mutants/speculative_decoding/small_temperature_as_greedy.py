"""Bug: a temperature below 0.05 is treated as 0, and decoding turns greedy.

softmax(logits / 0.01) looks one-hot enough, and dividing by a tiny number feels risky; but
when the logits differ by less than the temperature the distribution is far from one-hot, and
the argmax is then a different decoding than the target's own sampling.
"""

CAUGHT_BY = ["test_a_small_temperature_still_samples"]
EDITS = [
    (
        "    if temperature == 0:\n        return F.one_hot(",
        "    if temperature < 0.05:\n        return F.one_hot(",
    ),
]
