"""Bug: every append takes ceil(T / block_size) fresh blocks, ignoring room in the last one.

Appending token by token then takes one block per token: decoding drains the pool block_size
times faster than it should, and the blocks a sequence holds no longer match its length.
"""

CAUGHT_BY = ["test_interleaved_appends_gather_back_exactly"]
EDITS = [
    ("needed = math.ceil((start + T) / bs) - len(table)", "needed = math.ceil(T / bs)"),
]
