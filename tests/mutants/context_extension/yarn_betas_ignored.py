"""Bug: yarn_inv_freq always uses the default betas 32 and 1, whatever is passed.

Copying the defaults into the formula (i(32), i(1)) instead of the arguments is easy to miss,
since most callers never change them; models tuned with other betas get the wrong ramp.
"""

CAUGHT_BY = ["test_yarn_known_values", "test_yarn_inv_freq_matches_oracle"]
EDITS = [
    (
        "_correction_pair(beta_fast, head_dim",
        "_correction_pair(32.0, head_dim",
    ),
    (
        "_correction_pair(beta_slow, head_dim",
        "_correction_pair(1.0, head_dim",
    ),
]
