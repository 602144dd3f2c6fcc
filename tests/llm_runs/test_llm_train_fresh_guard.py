"""A fresh `llm train` in a folder that holds records but no checkpoint stops before any compute
and erases nothing (issue 15: "a fresh run erases records")."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import cpu_config, even_first_char, quiet  # noqa: E402

from gmc_grpo.run_writer import RecordsExistError  # noqa: E402
from llm_runs.train import Trainer  # noqa: E402


def test_fresh_run_refuses_a_folder_with_records_and_no_checkpoint(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    rows = '{"step": 0, "reward/mean": 0.5}\n{"step": 1, "reward/mean": 0.75}\n'
    (out / "metrics.jsonl").write_text(rows)
    config = cpu_config(out, tiny_model={"seed": 0, "num_layers": 1, "hidden_size": 64})
    with pytest.raises(
        RecordsExistError, match=r"metrics.jsonl: 2 rows.*fresh run erases.*--resume"
    ):
        Trainer(config, reward_fn=even_first_char, notice=quiet)
    assert (out / "metrics.jsonl").read_text() == rows
