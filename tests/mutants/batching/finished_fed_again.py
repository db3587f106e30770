"""Bug: a finished request stays in the batch for one more step and is fed its last token.

Removing finished requests at the start of the next step, after it has been scheduled, is an
easy ordering slip. The tokens stay right (its extra output is thrown away), but every finished
request costs a row of work and holds a slot a waiting request could have had.
"""

CAUGHT_BY = [
    "test_continuous_tokens_equal_decoding_alone_on_the_clock",
    "test_continuous_beats_static_on_a_chat_workload",
]
EDITS = [
    (
        "for (seq, _), out in zip(batch, logits, strict=True) if not seq.pending]",
        "for (seq, _), out in zip(batch, logits, strict=True) if not seq.pending and not seq.done]",
    ),
    (
        "for seq in [s for s in running if s.done]:  # they leave at once",
        "for seq in [s for s in running if s.done and s.finished < step]:",
    ),
]
