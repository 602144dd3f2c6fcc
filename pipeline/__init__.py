"""pipeline: the layer above the tracks: the `gmc-grpo` command router and `gmc-grpo reproduce`.

`pipeline.cli` routes each subcommand to its track's command line (`theory.cli`, `toy_mdps.cli`,
`llm_runs.cli`, `figures.cli`); `pipeline.toy` adds the figure step to the toy commands
(the toy track imports no `figures`); `pipeline.llm` hands the LLM commands the renderers of
their reports (the track formats none); `pipeline.reproduce` runs every CPU stage and writes the
report. Nothing below this package imports it (`tests/test_layering.py`).
"""
