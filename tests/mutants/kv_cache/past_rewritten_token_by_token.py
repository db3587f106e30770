"""Bug: every update writes the whole sequence again, one token at a time.

Copying the past back into the cache token by token never makes a tensor larger than one
token, so no single allocation gives it away, but a one-token step after 2,000 cached tokens
then reads and writes all 2,000 (the README: the cache never copies the past).
"""

CAUGHT_BY = ["test_update_costs_the_same_however_long_the_past"]
EDITS = [
    (
        "        self.k[layer, :, :, start : start + T] = k\n",
        "        for t in range(start):\n"
        "            self.k[layer, :, :, t] = self.k[layer, :, :, t].clone()\n"
        "        self.k[layer, :, :, start : start + T] = k\n",
    ),
]
