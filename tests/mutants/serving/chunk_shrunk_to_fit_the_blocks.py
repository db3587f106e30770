"""Bug: a running request's chunk is shrunk to the free blocks instead of preempting anybody.

Feeding fewer tokens looks kinder than throwing a request's keys away: when the pool is short,
take what fits. But the README pins the rule of level 2: the chunk is min(pending, budget left),
and when its blocks are not free the latest admitted request is preempted (possibly itself). A
shrunk chunk leaves budget unused and a schedule that no other engine would produce.
"""

CAUGHT_BY = [
    "test_chunks_in_a_tight_pool_preempt_rather_than_shrink",
    "test_chunked_tokens_equal_naive_serve_within_every_budget",
]
EDITS = [
    (
        "            while engine.needs(seq) > len(engine.queue):  # preempt the latest admitted\n",
        "            while 1 < seq.feed < seq.pending and engine.needs(seq) > len(engine.queue):\n"
        "                seq.feed -= 1\n"
        "            while engine.needs(seq) > len(engine.queue):  # preempt the latest admitted\n",
    ),
]
