"""Bug: the base check insists on a Python float, so an int base such as 10000 raises.

Configs write rope_theta as 10000 or 500000; an int is a finite number > 1 as much as a float.
"""

CAUGHT_BY = ["test_an_int_base_is_a_number"]
EDITS = [
    (
        "if not 1 < base < math.inf:",
        "if not isinstance(base, float) or not 1 < base < math.inf:",
    ),
]
