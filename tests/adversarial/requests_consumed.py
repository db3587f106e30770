"""Cheat: serve takes each request out of the caller's list as it arrives.

The caller's `requests` list doubles as the engine's queue of arrivals: every request is removed
from it when it joins, so the list is empty by the end. Every completion is right, and the
returned order too (it was settled before the list was touched); but the caller's requests are
gone. Caught by the guard that compares the plain data of every argument (lists, requests and
their prompts) before and after each call.
"""

KATA = "serving"
TESTS = ["test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step"]
EXPECT = "serve changed its argument `len(requests)` in place"
EDITS = [
    (
        "            waiting.append(arrivals.pop(0))\n",
        "            waiting.append(arrivals.pop(0))\n"
        "            requests.remove(waiting[-1].request)  # the caller's list as the queue\n",
    ),
]
