"""Bug: YaRN's attention_factor comes back as a 0-dim tensor, not a Python float.

It prints like a number and multiplies like one, but it is a tensor the caller did not ask
for: a float is what the logits' temperature is corrected by.
"""

CAUGHT_BY = ["test_yarn_known_values"]
EDITS = [
    (
        "return inv_freq.to(torch.float32), attention_factor",
        "return inv_freq.to(torch.float32), torch.tensor(attention_factor, dtype=torch.float64)",
    ),
]
