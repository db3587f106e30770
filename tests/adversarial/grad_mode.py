"""Cheat: generate decodes with autograd on (often a slip rather than a plan).

Without torch.no_grad() every model call records an autograd graph of the weights, tens of MB
for a hundred tokens, that nobody will ever use; the tokens are the same. Caught because the
shared model logs whether grad mode was on for each call, and the guard fails any call of the
implementation that ran the model with it on.
"""

KATA = "kv_cache"
TESTS = ["test_generate_matches_the_uncached_generator"]
EXPECT = "grad mode: generate ran the model with autograd on"
EDITS = [
    ("@torch.no_grad()\ndef generate(", "def generate("),
]
