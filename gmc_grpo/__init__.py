"""gmc-grpo core: estimators, advantages, losses, hooks, the method registry, staleness and
learning-rate schedules, statistics, configs and run records.

Every method of the paper (GRPO, TIC-GRPO, GMC-GRPO, VCPO, GAC, A-3PO) is defined once here, as a
spec of the method registry (`gmc_grpo.methods`), and shared by the toy-MDP learners and the LLM
learner. This package imports no track (`docs/DESIGN.md`, "Layering").
"""

__version__ = "0.1.0"
