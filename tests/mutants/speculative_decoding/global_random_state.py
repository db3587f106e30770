"""Bug: tokens are sampled from the global random state instead of `generator`.

The distribution is right, but runs cannot be reproduced or isolated: seeding the generator no
longer fixes the output.
"""

CAUGHT_BY = [
    "test_the_generator_makes_sampling_reproducible",
    "test_accept_reject_takes_its_randomness_from_the_generator",
]
EDITS = [
    (
        ("return torch.multinomial(probs.to(device), 1, generator=generator).to(probs.device)"),
        "return torch.multinomial(probs.to(device), 1).to(probs.device)",
    ),
]
