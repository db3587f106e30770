"""Cheat: every call of the engine is logged as a forward_batch call, whatever ran.

The number of calls and the tokens each fed are the real ones, so counting the products through
the model's weights finds nothing amiss; only each row's `cache` field is rewritten, the one
thing that tells forward_batch (the model's own caches) from forward_packed (the engine's). The
reverse, a forward_batch call on the model's caches logged as forward_packed, is the cheat that
would skip the kata's paged KV cache. Caught because the judge reads from the call stack, at the
output head's product, which of the model's entry points each call came in through, and holds
the log to it.
"""

KATA = "serving"
TESTS = ["test_serve_tokens_equal_naive_serve_within_every_budget"]
EXPECT = "ran through model.forward_packed, but model.batch_log records a forward_batch call"
EDITS = [
    (
        "        return model.forward_packed(ids, [start for _, _, start in rows], attention, "
        "feed_forward)\n",
        "        from grading.model import BatchCall, BatchRow\n\n"
        "        out = model.forward_packed(ids, [start for _, _, start in rows], attention, "
        "feed_forward)\n"
        "        call = model.batch_log[-1]\n"
        "        model.batch_log[-1] = BatchCall(tuple(BatchRow(1, r.start, r.tokens) for r in "
        "call.rows))\n"
        "        return out\n",
    ),
]
