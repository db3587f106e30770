"""Bug: a running request preempts others until the blocks of its whole future are free.

Making sure the oldest request can always finish sounds prudent, but growth must ask only for
the blocks its next call writes: this engine preempts requests while the blocks every running
request's next step needs are free, and they recompute for nothing.
"""

CAUGHT_BY = ["test_a_preempted_request_rejoins_with_every_token_it_had"]
EDITS = [
    (
        "            while engine.needs(seq) > len(engine.queue):  # preempt the latest admitted\n",
        "            future = len(seq.request.prompt) + seq.request.max_new_tokens - 1\n"
        "            future = math.ceil(future / engine.block_size) - len(seq.blocks)\n"
        "            while max(future, engine.needs(seq)) > len(engine.queue):\n",
    ),
]
