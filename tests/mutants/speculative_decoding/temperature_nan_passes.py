"""Bug: speculative_decode checks `temperature < 0`, which NaN and infinity pass.

Every comparison with NaN is false, so `temperature < 0` lets it through, and the run fails
later inside softmax with PyTorch's error (or samples garbage) instead of a ValueError naming
temperature.
"""

CAUGHT_BY = ["test_sampling_bad_input_raises_value_error"]
EDITS = [
    (
        "not isinstance(temperature, (int, float)) or not 0 <= temperature < math.inf:",
        "not isinstance(temperature, (int, float)) or temperature < 0:",
    ),
]
