"""Bug: the draft stops proposing for a request once it has drafted one of its stop tokens.

Nothing past a stop token is kept, so drafting past one looks wasted. But the draft's stop token
is only a guess: when the target rejects it the round has fewer proposals than the README's
min(k, tokens still needed - 1), and the request needs more rounds than it should.
"""

CAUGHT_BY = ["test_with_room_and_a_draft_a_request_stops_in_the_round_of_its_stop_token"]
EDITS = [
    (
        "            rows = [s for s in batch if s.propose > i]\n",
        "            rows = [\n"
        "                s for s in batch\n"
        "                if s.propose > i\n"
        "                and not (proposed[s] and proposed[s][-1] in s.request.stop)\n"
        "            ]  # nothing past a drafted stop token could be kept\n"
        "            if not rows:\n"
        "                break\n",
    ),
]
