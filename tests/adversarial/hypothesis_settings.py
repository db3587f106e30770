"""Cheat: the implementation turns every property test down to one example.

Loading a Hypothesis profile of its own from inside the implementation leaves the tests and the
grading modules untouched. Caught because the active Hypothesis settings are part of the judge.
"""

KATA = "kv_cache"
TESTS = ["test_kv_cache_bytes_of_real_models"]
EXPECT = "hypothesis.settings"
EDITS = [
    (
        "import torch\n",
        "import torch\n"
        "from hypothesis import settings\n\n"
        'settings.register_profile("one_example", max_examples=1)\n'
        'settings.load_profile("one_example")\n',
    ),
]
