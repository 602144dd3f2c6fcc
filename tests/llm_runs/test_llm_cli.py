"""`gmc-grpo llm`: routing, help without heavy imports, clear errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llm_runs.cli import SUBCOMMANDS, build_subparser, main


def test_top_level_help_lists_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "gmc-grpo llm" in text
    for name in SUBCOMMANDS:
        assert name in text


@pytest.mark.parametrize("argv", [["--help"], ["eval", "--help"], ["data", "--help"]])
def test_help_does_not_import_torch_or_transformers(argv: list[str]) -> None:
    code = (
        "import sys\n"
        "from llm_runs.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('torch', 'transformers', 'vllm', 'math_verify') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "--model" in result.stdout or "<subcommand>" in result.stdout or "--out" in result.stdout


def test_eval_help_shows_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    parser, _ = build_subparser("eval")
    text = parser.format_help()
    for flag in ("--model", "--out", "--benchmarks", "--data-dir", "--engine", "--n", "--limit"):
        assert flag in text
    assert parser.prog == "gmc-grpo llm eval"


def test_errors_are_one_line_with_exit_status_2(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", "--out", str(tmp_path / "o")]) == 2
    assert "--model" in capsys.readouterr().err
    assert main(["eval", "--model", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["eval", "--model", "m", "--out", "o", "--n", "0"]) == 2
    assert "EvalConfig.n" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["nosuch"])


def test_config_file_and_flags_merge(tmp_path) -> None:
    from llm_runs.evaluation.cli import config_from_args

    path = tmp_path / "eval.toml"
    path.write_text('[eval]\nbenchmarks = ["math500", "amc23"]\nn = 4\nseed = 3\n')
    parser, _ = build_subparser("eval")
    args = parser.parse_args(["--config", str(path), "--model", "m", "--out", "o", "--n", "2"])
    cfg = config_from_args(args)
    assert cfg.benchmarks == ("math500", "amc23") and cfg.n == 2 and cfg.seed == 3
    bad = tmp_path / "bad.toml"
    bad.write_text("colour = 1\n")
    with pytest.raises(ValueError, match="colour"):
        config_from_args(parser.parse_args(["--config", str(bad), "--model", "m", "--out", "o"]))


def test_top_level_cli_routes_to_llm(capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.cli import main as top_main

    assert top_main(["llm", "--help"]) == 0
    assert "eval" in capsys.readouterr().out


def test_shipped_eval_recipe_is_the_paper_protocol(tmp_path) -> None:
    from pathlib import Path

    from llm_runs.evaluation.config import EvalConfig, read_config_file

    recipe = Path(__file__).resolve().parents[2] / "llm_runs" / "configs" / "eval_b1.toml"
    cfg = EvalConfig(model="m", out="o", **read_config_file(recipe))
    assert cfg == EvalConfig(model="m", out="o", engine="vllm", dtype="bfloat16")


def test_no_progress_silences_transformers_bars() -> None:
    """`--no-progress` (LLMTrainConfig.progress False) turns transformers' own bars ("Loading
    weights", "Writing model shards") off for the run and restores the setting afterwards."""
    from transformers.utils import logging as hf_logging

    from llm_runs.models import transformers_progress

    before = hf_logging.is_progress_bar_enabled()
    with transformers_progress(False):
        assert not hf_logging.is_progress_bar_enabled()
        bar = hf_logging.tqdm(range(3), desc="Loading weights")
        assert type(bar).__name__ == "EmptyTqdm"  # transformers' silent stand-in
        with transformers_progress(True):
            assert hf_logging.is_progress_bar_enabled()
        assert not hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled() == before
