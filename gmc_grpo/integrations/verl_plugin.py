"""The module verl imports to enable GMC: `VERL_USE_EXTERNAL_MODULES=gmc_grpo.integrations.verl_plugin`.

verl (0.9.1, `verl/__init__.py`) imports the modules named in `VERL_USE_EXTERNAL_MODULES` in every
process that imports verl (driver, trainer, actor workers), which is where the policy-loss
registry and the rollout-correction step live. Importing this module registers the `"gmc"` policy
loss and, when `GMC_VERL_METHOD` is set, installs the group-coefficient step
(`gmc_grpo.integrations.verl.activate_from_environment`). It fails with a clear `ImportError`
when verl is missing or is not verl 0.9.1.
"""

from gmc_grpo.integrations.verl import activate_from_environment

ACTIVE_METHOD = activate_from_environment()
