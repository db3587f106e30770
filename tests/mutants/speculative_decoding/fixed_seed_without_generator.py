"""Bug: without a generator, the code makes one of its own seeded with 0.

"Reproducible by default" sounds kind, but every run then gives the same continuation: the
global seed is ignored and sampling without a generator is not random at all.
"""

CAUGHT_BY = [
    "test_accept_reject_without_a_generator_uses_the_global_one",
    "test_without_a_generator_sampling_follows_the_global_one",
]
EDITS = [
    (
        "    steps = torch.arange(k, device=p.device)\n",
        "    if generator is None:\n"
        "        generator = torch.Generator(p.device).manual_seed(0)\n"
        "    steps = torch.arange(k, device=p.device)\n",
    ),
    (
        "    target_cache, draft_cache = _new_cache(target, total), _new_cache(draft, total)\n",
        "    target_cache, draft_cache = _new_cache(target, total), _new_cache(draft, total)\n"
        "    if generator is None:\n"
        "        generator = torch.Generator().manual_seed(0)\n",
    ),
]
