"""The engine examples in `examples/`, run at tiny size where the engine runs on a CPU.

TRL sync and TRL async train a tiny Qwen3 for a few steps (nothing downloaded); the verl example's
overrides are composed with verl's own config by Hydra (in `.venv-verl`, where verl is installed;
verl's training itself needs GPUs).
"""

from __future__ import annotations

import os
import warnings

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def test_trl_sync_example_trains_on_a_cpu(tmp_path):
    pytest.importorskip("trl")
    from examples import trl_sync_gmc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = trl_sync_gmc.main(["--tiny", "--max-steps", "2", "--output-dir", str(tmp_path)])
    logged = [e for e in trainer.state.log_history if "gmc/ratio/log_max" in e]
    assert trainer.state.global_step == 2 and logged


def test_trl_async_example_trains_on_a_cpu_and_keeps_stale_samples(tmp_path):
    pytest.importorskip("trl.experimental.async_grpo")
    from examples import trl_async_gmc
    from gmc_grpo.integrations.trl_async import (
        SAMPLE_LOG,
        TRL_DEFAULT_MAX_STALENESS,
        read_sample_log,
    )

    trainer = trl_async_gmc.main(
        ["--local-tiny", "--max-steps", "8", "--output-dir", str(tmp_path)]
    )
    assert trainer.state.global_step == 8
    lags = [r["lag"] for r in read_sample_log(str(tmp_path / SAMPLE_LOG))]
    assert max(lags) > TRL_DEFAULT_MAX_STALENESS


@pytest.mark.parametrize("method", ["gmc", "vcpo"])
def test_verl_example_overrides_compose_with_verls_config(method):
    pytest.importorskip("verl")
    from examples import verl_gmc

    result = verl_gmc.main(["--check", "--method", method])
    assert result["loss_mode"] == method and result["rollout_is"] == method
    assert (
        result["adv_estimator"].endswith("rloo")
        and result["loss_agg_mode"] == "seq-mean-token-sum-norm"
    )
    if method == "gmc":
        assert result["eps"] == pytest.approx(0.28)
    else:
        assert result["truncation"] == 8.0
