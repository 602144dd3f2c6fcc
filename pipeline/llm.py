"""`gmc-grpo llm`: the Qwen3 track's command line plus the rendering of its reports.

The LLM track formats no report (`tests/test_layering.py`: a track imports no `pipeline`); this
module, one layer above, runs `llm_runs.cli` and hands `llm bias` the renderer of its Markdown
report, `pipeline.llm_bias_stage.bias_table_markdown` (the function the reproduce stage renders
its tables with), so `gmc-grpo llm bias` writes `bias.md` beside `bias.json`.
"""

from __future__ import annotations

import sys
from typing import Any


def render_bias_report(result: dict[str, Any]) -> str:
    """`bias.md` of a `llm_runs.lm_bias.bias_of_run` result (`bias_table_markdown`)."""
    from pipeline.llm_bias_stage import bias_table_markdown

    return bias_table_markdown(result)


def main(argv: list[str] | None = None) -> int:
    """`gmc-grpo llm ...` with the reports rendered."""
    from llm_runs import cli

    return cli.main(argv, renderers={"bias": render_bias_report})


if __name__ == "__main__":
    sys.exit(main())
