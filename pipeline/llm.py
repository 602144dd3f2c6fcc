"""`gmc-grpo llm`: the Qwen3 track's command line plus the rendering of its reports.

The LLM track formats no report (`tests/test_layering.py`: a track imports no `pipeline`); this
module, one layer above, runs `llm_runs.cli` and hands each subcommand that reports the renderer
of its Markdown (the functions the reproduce stages render their tables with):

- `llm bias`: `pipeline.llm_bias_stage.bias_table_markdown`, so it writes `bias.md` beside
  `bias.json`;
- `llm train --seeds/--methods/--delays` (a suite): `pipeline.llm_report.suite_markdown`, so it
  prints the suite's tables and writes `suite_summary.md` beside `suite_summary.json`.
"""

from __future__ import annotations

import sys
from typing import Any


def render_bias_report(result: dict[str, Any]) -> str:
    """`bias.md` of a `llm_runs.lm_bias.bias_of_run` result (`bias_table_markdown`)."""
    from pipeline.llm_bias_stage import bias_table_markdown

    return bias_table_markdown(result)


def render_suite_report(analysis: Any) -> str:
    """`suite_summary.md` of a `llm_runs.suite.SuiteAnalysis` (`suite_markdown`)."""
    from pipeline.llm_report import suite_markdown

    return suite_markdown(analysis)


def main(argv: list[str] | None = None) -> int:
    """`gmc-grpo llm ...` with the reports rendered."""
    from llm_runs import cli

    return cli.main(argv, renderers={"bias": render_bias_report, "train": render_suite_report})


if __name__ == "__main__":
    sys.exit(main())
