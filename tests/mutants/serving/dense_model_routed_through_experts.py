"""Bug: the engine assumes the model is a mixture and hands every model a feed_forward.

Every test model of levels 1 and 2 is a mixture, but the README's engine takes any shared model:
for a dense one there are no experts to group, and a feed_forward built from them fails on the
first step.
"""

CAUGHT_BY = ["test_serve_takes_a_dense_model_too"]
EDITS = [
    (
        "        if experts is not None:\n",
        "        if True:  # every model a mixture\n",
    ),
]
