"""Bug: without a generator, accept_reject makes one of its own, seeded with torch.initial_seed().

It follows torch.manual_seed, so the same seed gives the same tokens and other seeds give other
ones, and it looks like the global generator; but it starts afresh at every call, so every call
after one torch.manual_seed draws the same numbers, and the outputs no longer follow p.
"""

CAUGHT_BY = ["test_without_a_generator_the_output_has_the_exact_distribution"]
EDITS = [
    (
        "    steps = torch.arange(k, device=p.device)\n",
        "    if generator is None:\n"
        "        generator = torch.Generator(p.device).manual_seed(torch.initial_seed())\n"
        "    steps = torch.arange(k, device=p.device)\n",
    ),
]
