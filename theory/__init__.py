"""theory: sympy and mpmath derivations and checks of every constant and rate of the paper.

Imports no torch. `theory.constants` holds the denominators `c_eps`, `log(1 + 2 eps)` and their
tight versions; the rest derives the rates and prints the claims table (`gmc-grpo theory`).
"""
