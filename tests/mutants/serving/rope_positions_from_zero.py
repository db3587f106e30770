"""Bug: every row is passed to forward_packed with start 0.

The engine knows where each row's keys go in its own blocks, so the `starts` argument looks
redundant; but it sets the RoPE position of each token, and a decode step rotated as position 0
matches none of the cached keys.
"""

CAUGHT_BY = ["test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step"]
EDITS = [("[start for _, _, start in rows]", "[0 for _ in rows]")]
