"""Bug: a preempted request's recompute is fed whole, past max_tokens_per_step.

The budget is thought of as a limit on prompts; a request coming back after a preemption has
already been read once, so feeding everything it had in one row feels like catching up. But
those tokens cost the target the same as a prompt's: the call runs past the budget, and the step
is as slow as the cap was meant to prevent.
"""

CAUGHT_BY = ["test_chunks_in_a_tight_pool_preempt_rather_than_shrink"]
EDITS = [
    (
        "        seq.feed = min(seq.pending, budget)\n",
        "        recompute = seq.generated and seq.cached == 0\n"
        "        seq.feed = seq.pending if recompute else min(seq.pending, budget)\n",
    ),
]
