"""Cheat: static_batching hands back completions whose finaliser empties the caller's prompts.

Right after the call every prompt is as it was, so a check when the call returns passes; once
the caller drops the results, each prompt is cleared. Caught because the guard checks the plain
data (lists, requests, prompts) of every call of a test again when the test ends.
"""

KATA = "batching"
TESTS = ["test_static_groups_are_exactly_as_defined"]
EXPECT = "changed its argument `len(requests[0].prompt)` in place after it returned"
EDITS = [
    (
        "def _completions(seqs: list[_Sequence]) -> list[Completion]:\n",
        "class _Later:\n    def __init__(self, prompt):\n        self.prompt = prompt\n\n"
        "    def __del__(self):\n        self.prompt.clear()\n\n\n"
        "def _completions(seqs: list[_Sequence]) -> list[Completion]:\n",
    ),
    (
        "    return [\n        Completion(s.request.id,",
        "    done = [\n        Completion(s.request.id,",
    ),
    (
        "        for s in sorted(seqs, key=lambda s: s.order)\n    ]\n",
        "        for s in sorted(seqs, key=lambda s: s.order)\n    ]\n"
        "    for c, s in zip(done, sorted(seqs, key=lambda s: s.order)):\n"
        "        c.later = _Later(s.request.prompt)\n"
        "    return done\n",
    ),
]
