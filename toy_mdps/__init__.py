"""toy_mdps: small autoregressive token MDPs with exact J, grad J and KL.

Every estimator's bias and second moment is measured against the exact gradient obtained by
enumerating all responses (`gmc-grpo toy ...`).
"""
