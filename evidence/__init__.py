"""evidence: the theory beside the runs (JSON and CSV only: no torch).

The layer between the tracks and `figures/`: it reads run records (the toy track's through
`toy_mdps.train.run_records`, the reader beside its writer) and compares them with `theory`'s
bounds and claims. `theory` keeps the formulas and the checks that take evidence as an argument;
nothing below this package imports it (`tests/test_layering.py`). `docs/DESIGN.md` says where
each kind of change goes.
"""
