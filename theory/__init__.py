"""theory: sympy and mpmath derivations and checks of every constant and rate of the paper.

Imports no torch (numpy, scipy, sympy, mpmath, matplotlib only). The appendix with the paper's
proofs is not in our copy, so each constant is derived here from §3-§4 and checked.

Modules:

* `theory.constants`: the KL denominators `c_eps(eps)` (TIC, Theorem 2), `gmc_denominator(eps)`
  (`log(1+2eps)`, Theorem 1), `tight_tic_denominator(eps)`, `tight_gmc_denominator(eps)` (Lambert
  W), the delay penalties and the improvement factor; vectorised (scalar in, float out).
* `theory.divergences`: KL and removed importance mass (TIC, GMC, any group size) for finite laws.
* `theory.bounds`: evaluators of Lemma 1, Proposition 1, the §4.2 chain, Theorems 1-2, Corollary 2.
* `theory.symbolic`, `theory.rates`: sympy derivations (`Derivation` objects with an `ok` flag).
* `theory.numerics`: numeric minimisation of the bounds, log-log slope fits, interval arithmetic.
* `theory.softmax_tree`: exact checks of Proposition 1 and the KL drift bound on softmax trees.
* `theory.claims`: `evaluate_claims()` -> rows `claim, where, derived, verdict, how`.
* `theory.curves` (arrays) and `theory.plots` (figures; `write_plots(out_dir)`).
* `theory.cli`: `gmc-grpo theory [--json] [--out DIR]`.
"""
