"""evidence: the theory beside the runs (JSON and CSV only: no torch).

The layer between the tracks and `figures/`: it reads run records (the toy track's through
`toy_mdps.train.run_records`, the reader beside its writer) and compares them with `theory`'s
bounds and claims. `theory` keeps the formulas and the checks that take evidence as an argument;
nothing below this package imports it (`tests/test_layering.py`). `docs/DESIGN.md` says where
each kind of change goes.

Modules: `run_evidence` (what the claims table's run rows read, once), `registry` (the registry
of theory-vs-runs checks: `RunCheck`, `register_run_check`, `run_findings`), `checks_runs` (the
built-in checks), `measured` (the bounds beside each tracked toy run), `vacuity`, `bite`, `slack`,
`pairs`, `drift_fit`, `bounds_claims` (the bounds stage's claims as numbers), `runs_vs_theory`
(the figures' runs-vs-theory checks), `measured_report` (untracked runs outside the setting),
`render` (every text of the layer), `theory_runs` (`gmc-grpo theory`, which reads `--runs` here).
"""
