"""Bug: continuous batching lets a request in one step before it arrives.

Moving arrivals into the queue with `arrival <= step + 1` ("it is arriving anyway") looks like a
harmless head start; on the clock it serves customers who are not in the shop yet.
"""

CAUGHT_BY = ["test_continuous_tokens_equal_decoding_alone_on_the_clock"]
EDITS = [
    (
        "while arrivals and arrivals[0].request.arrival <= step:",
        "while arrivals and arrivals[0].request.arrival <= step + 1:",
    ),
]
