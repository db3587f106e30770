"""Bug: a block's key is dropped when its last holder lets it go.

Freeing feels like the end of a block's story. But the point of prefix caching is the next
request with the same system prompt, which usually arrives after the last one finished: the
block keeps its contents and its key until the pool needs it for other tokens.
"""

CAUGHT_BY = [
    "test_the_same_prompt_again_feeds_only_its_last_block",
    "test_a_request_reads_only_past_its_cached_prefix",
]
EDITS = [
    (
        "                self.queue[block] = None  # registered or not, it waits at the back\n",
        "                self.queue[block] = None\n"
        "                if block in self.key_of:  # free: forget what it held\n"
        "                    del self.cached[self.key_of.pop(block)]\n",
    ),
]
