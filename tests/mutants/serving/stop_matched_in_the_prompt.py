"""Bug: a request is done when its sequence holds a stop token anywhere, its prompt included.

`eos in seq.tokens` reads naturally, but the sequence starts with the prompt: a prompt that
holds a stop id (a chat template's end-of-turn token, say) ends the request after its first new
token. Only new tokens stop a request.
"""

CAUGHT_BY = [
    "test_a_stop_token_in_the_prompt_means_nothing",
    "test_stopped_tokens_equal_naive_serve_within_every_budget",
]
EDITS = [
    (
        "        return self.stopped or self.generated == self.request.max_new_tokens\n",
        "        stop = set(self.request.stop)\n"
        "        if self.generated and any(t in stop for t in self.tokens):\n"
        "            return True\n"
        "        return self.stopped or self.generated == self.request.max_new_tokens\n",
    ),
]
