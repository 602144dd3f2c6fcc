"""theory: derivations and checks of every constant and rate of the paper (§2-§4).

Imports no torch (numpy, scipy, sympy, mpmath, matplotlib only). The appendix with the paper's
proofs is not in our copy, so each constant is derived here from §3-§4 and checked; constants the
paper does not print are marked "ours". Reads no run record: the bounds beside runs and the
claims table's run rows are computed by the evidence layer (`evidence/`), which hands the checks
what the runs showed (`theory.run_rows.RunFinding`).

Modules:

* `theory.constants`: the KL denominators `c_eps(eps)` (TIC, Theorem 2), `gmc_denominator(eps)`
  (`log(1+2eps)`, Theorem 1), their tight versions, the delay penalties, the improvement factor.
* `theory.bounds`: numeric evaluators with explicit constants of Lemma 1, Proposition 1 (second
  moment and bias), the §4.2 chain, Theorems 1-2 and Corollary 2 (`theorem_terms`,
  `lemma1_terms`, ...), for measured toy-run quantities to sit next to.
* `theory.chain`: the §4.2 proof chain in sympy (where each constant comes from).
* `theory.trees`: log-linear token trees (tabular softmax and shared-parameter features), exact.
* `theory.exact`: exact group expectations (mean, bias, second moment, removed mass) of IS, TIC,
  GMC, VCPO and vanilla GRPO by enumeration.
* `theory.adversarial`: searches for the examples that come closest to each bound.
* `theory.class_search`: Proposition 1's second moment over eq. 5's whole class (the worst
  weighting per group); `theory.grpo_worst`: vanilla GRPO's second moment in `C` (our bounds and
  their search).
* `theory.divergences`: KL and removed importance mass for finite laws.
* `theory.symbolic`, `theory.rates`: sympy derivations (`Derivation` objects with an `ok` flag).
* `theory.numerics`: numeric minimisation of the bounds, log-log slope fits, interval arithmetic.
* `theory.checks`: one check per claim, with the claimed value as a parameter.
* `theory.claims`: `evaluate_claims(runs=None)` -> rows (paper's claims and ours),
  `claims_markdown(rows)`; `theory.run_rows`: the rows whose evidence is runs (`RunFinding`,
  `needs runs` without them); `theory.run_terms`: Theorems 1-2 at a run's recorded constants.
* `theory.curves` (arrays) and `theory.plots` (figures; `write_plots(out_dir)`).
* `theory.cli`: `gmc-grpo theory [--json] [--out DIR]` (`--runs DIR` is read by
  `evidence.theory_runs`, through which the router runs it).
* `theory.explorer` (numbers), `theory.explorer_plots`, `theory.explorer_widgets` (ipywidgets),
  `theory.explorer_page` (the static HTML page): the bounds explorer (`docs/explorer.md`).
"""
