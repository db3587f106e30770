"""Bug: each running request gets its own model call within the step.

Calling the model row by row is the loop of the naive server with a cache added: the tokens are
exact and the clock can even look right, but the calls are not batched, and the point of the
engine (one packed call serving every running request) is lost.
"""

CAUGHT_BY = ["test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step"]
EDITS = [
    (
        "        logits = self.call(self.model, feeds)  # the target verifies",
        "        logits = [self.call(self.model, [f])[0] for f in feeds]  # the target verifies",
    ),
]
