"""Adapters that run the core estimators inside existing distributed RL engines.

- `gmc_grpo.integrations.trl`: `GMCGRPOTrainer`, a subclass of TRL's `GRPOTrainer` (TRL 1.16)
  that keeps each group's `G` completions together through TRL's shuffling and micro-batch
  splitting and replaces the token-level PPO loss by the core library's trajectory-level
  surrogate (`gmc_grpo.losses.policy_loss`). Importing it imports TRL; install with
  `pip install gmc-grpo[trl]`.
- `gmc_grpo.integrations.verl`: a policy loss registered in verl's `register_policy_loss`
  registry (verl 0.9.1) plus the step that computes the group-level coefficients where verl's
  batch still carries its group ids (`uid`) and both log-probs. Importing the module does not
  import verl: its pure-tensor parts (regrouping a flat batch by `uid`, the coefficients) work
  without it; `gmc_grpo.integrations.verl_plugin` is the module verl imports to register.

The core (`gmc_grpo.*` outside this folder) never imports these modules, TRL or verl.
"""
