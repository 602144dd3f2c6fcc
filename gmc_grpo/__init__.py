"""gmc-grpo core: the estimators, advantages, losses, staleness schedules, run records and CLI.

Every method of the paper (GRPO, TIC-GRPO, GMC-GRPO, VCPO, GAC, A-3PO) is defined once here and
shared by the toy-MDP learners and the LLM learner. This package imports no track.
"""

__version__ = "0.1.0"
