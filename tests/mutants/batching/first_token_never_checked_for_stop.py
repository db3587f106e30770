"""Bug: only decode steps check for a stop token, so the prefill's token never stops a request.

The stop check is written in the decode branch of the loop (one new token per row), and the
first token, which the prefill produces, is never compared: a request whose first new token is
a stop id runs on to max_new_tokens.
"""

CAUGHT_BY = [
    "test_a_stop_as_the_first_new_token_ends_at_the_prefill",
    "test_continuous_stopped_requests_leave_at_once",
]
EDITS = [
    (
        "bool(self.generated) and self.generated[-1] in self.request.stop",
        "len(self.generated) > 1 and self.generated[-1] in self.request.stop",
    ),
]
