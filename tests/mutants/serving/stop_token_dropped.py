"""Bug: the stop token ends the completion but is not kept in it.

Tokenizers often strip the end-of-sequence token from the decoded text, so dropping it looks
harmless; but the contract (as Hugging Face `generate` with `eos_token_id`) keeps it as the last
token, and a request whose first new token is its stop token comes back empty.
"""

CAUGHT_BY = [
    "test_stopped_tokens_equal_naive_serve_within_every_budget",
    "test_stopped_serve_matches_naive_serve_on_a_chat_workload",
]
EDITS = [("                del self.tokens[i + 1 :]\n", "                del self.tokens[i:]\n")]
