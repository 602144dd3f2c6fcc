"""`pipeline.llm_report`: the Markdown of a suite's analysis and of its declared comparisons
(the LLM track computes them and formats nothing), and `gmc-grpo llm train` handed its renderer
by `pipeline.llm`."""

from __future__ import annotations

from hand_suite import hand_made_analysis

from llm_runs.comparisons import declared_comparisons
from llm_runs.suite import analyse_records
from pipeline.llm_report import comparisons_markdown, prefix_markdown, suite_markdown


def test_suite_markdown_marks_a_difference_that_holds():
    three = analyse_records(
        {
            (0, m, s): {"consumed_reward_final": base + d}
            for s, d in enumerate([0.0, 0.1, 0.2])
            for m, base in (("grpo", 0.0), ("gmc", 0.5 + 0.1 * s))
        }
    )
    text = suite_markdown(three)
    # gmc - grpo = 0.5, 0.6, 0.7: mean 0.6, half-width 4.3027 * 0.1 / sqrt(3) = 0.248
    assert (
        "| 0 | consumed_reward_final | gmc - grpo | +0.600 | [+0.352, +0.848] | 3 | **holds** |"
        in text
    )
    assert text.startswith("Seeds 0, 1, 2 (3); mean over seeds")
    assert " Machine: a box." in suite_markdown(three, machine="a box")


def test_suite_markdown_names_the_runs_left_out():
    analysis = analyse_records({(2, "gmc", 0): {"mean_reward": 0.1}})
    analysis.skipped = ["gmc_d2_seed1: 1 missing metrics rows (step 3)"]
    text = suite_markdown(analysis)
    assert "Left out (records with gaps, not finished): gmc_d2_seed1" in text


def test_prefix_markdown_says_the_delays_share_updates():
    analysis = analyse_records(
        {(d, "gmc", s): {"mean_reward": 0.1} for d in (32, 64) for s in (0, 1)}
    )
    analysis.prefixes = [
        {"method": "gmc", "seed": s, "delays": [32, 64], "shared_updates": n}
        for s, n in ((0, 33), (1, 34))
    ]
    text = prefix_markdown(analysis)
    assert (
        "- D = 32 and D = 64: the runs of one method and seed have identical records for " in text
    )
    assert "their first 33-34 updates (2 pairs of runs)" in text
    assert "no count is pooled over delays" in text
    assert prefix_markdown(analyse_records({(0, "gmc", 0): {}})) == ""
    assert text.rstrip() in suite_markdown(analysis)


def test_comparisons_markdown_has_the_primary_and_one_row_per_secondary():
    declared = declared_comparisons(hand_made_analysis())
    text = comparisons_markdown(declared)
    assert (
        "**Primary**" in text
        and "**holds**" in text
        and text.count("\n| 0 |") + text.count("\n| 16 |") == 11
    )


def test_comparisons_markdown_lists_identical_runs_apart():
    measures = {}
    for seed in (0, 1, 2):
        for method, value in (("tic", 0.5 + 0.01 * seed), ("gmc", 0.5 + 0.01 * seed)):
            measures[(0, method, seed)] = {"consumed_reward_final": value}
        measures[(16, "tic", seed)] = {"consumed_reward_final": 0.4 + 0.01 * seed}
        measures[(16, "gmc", seed)] = {"consumed_reward_final": 0.5 + 0.02 * seed}
    text = comparisons_markdown(declared_comparisons(analyse_records(measures)))
    assert "Secondary comparisons (0, Holm-adjusted" in text
    assert (
        "Not counted in the family (1): comparisons between identical runs (every seed's value "
        "equal, e.g. GMC and TIC at D = 0, where every ratio is 1): gmc - tic "
        "consumed_reward_final at D = 0." in text
    )


def test_gmc_grpo_llm_hands_train_the_suite_renderer(monkeypatch):
    """`pipeline.llm.main` hands `llm train` (a suite's summary) and `llm bias` their renderers."""
    from llm_runs import cli
    from pipeline import llm

    seen = {}
    monkeypatch.setattr(cli, "main", lambda argv, renderers=None: seen.update(renderers) or 0)
    assert llm.main(["train", "--help"]) == 0
    three = analyse_records({(0, "gmc", s): {"mean_reward": 0.1 * s} for s in (0, 1, 2)})
    assert seen["train"](three) == suite_markdown(three)
    assert set(seen) == {"bias", "train"}
