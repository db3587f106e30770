"""Bug: the stop token ends the request but is left out of its completion.

Stripping end-of-sequence tokens from the answer (as a tokenizer's `skip_special_tokens` does
when decoding text) looks tidy, but the README keeps the stop token as the completion's last,
as Hugging Face `generate` keeps `eos_token_id`: without it a caller cannot tell a request that
stopped from one cut off by max_new_tokens.
"""

CAUGHT_BY = [
    "test_static_groups_end_when_every_member_is_done",
    "test_continuous_stopped_requests_leave_at_once",
]
EDITS = [
    (
        "Completion(s.request.id, s.generated, s.request.arrival, s.first_token, s.finished)",
        "Completion(s.request.id, [t for t in s.generated if t not in s.request.stop], "
        "s.request.arrival, s.first_token, s.finished)",
    ),
]
