"""Cheat: generate leaves the caller's model in training mode.

No weight changes and every token is right (the shared model has no dropout), but the caller's
model is not the one it handed over: the next user of it (a benchmark, an evaluation) runs in
training mode. Caught because the guard snapshots every module argument (its submodules' modes,
settings, hooks, parameters and buffers) and compares it after the call.
"""

KATA = "kv_cache"
TESTS = ["test_generate_matches_the_uncached_generator"]
EXPECT = "generate changed its argument `model` (its train/eval mode"
EDITS = [
    (
        "        return prompt_ids.clone()\n    c = model.config\n",
        "        return prompt_ids.clone()\n    model.train()\n    c = model.config\n",
    ),
]
