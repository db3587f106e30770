"""The machinery that judges a kata solution: loading it, tolerances, cost counters, figures."""
