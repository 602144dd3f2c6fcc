"""figures.llm: each figure's data series equal the records it was given; each table's cells equal
the values; missing runs are shown as missing; the paper's values appear as labelled references."""

from __future__ import annotations

from pathlib import Path

import pytest
from fig_records import SIX, eval_value, metric_row, write_eval_run, write_train_run

from figures import llm, llm_tables
from figures import paper_reference as paper
from figures.common import plot_panels, pyplot
from figures.discover import Run, discover
from figures.tables import Interval, Missing, render_latex, render_markdown

STEPS = 40


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Run]:
    root = tmp_path_factory.mktemp("runs")
    # Figure 2/4 and Table 3: D = 0 and 128 for all three methods; D = 64 has no GRPO run.
    for delay in (0, 64, 128):
        for method in ("grpo", "tic", "gmc"):
            if (delay, method) != (64, "grpo"):
                write_train_run(root, f"fd-{method}-{delay}", method=method, delay=delay)
    # Figure 5 / Table 4: G = 4 only (G = 32 missing; G = 8 comes from the D = 128 runs).
    for method in ("tic", "gmc"):
        write_train_run(root, f"gs-{method}-4", method=method, delay=128, group_size=4)
    # Tables 1, 5 and Figure 6: simulated runs of an 8B model, evaluated by `llm eval` runs.
    for method in ("grpo", "tic", "gmc", "a3po"):
        path = write_train_run(
            root,
            f"sim-{method}",
            method=method,
            schedule="length_coupled",
            model="models/Qwen3-8B-Base",
            eval_every=0,
        )
        write_eval_run(path, "eval-800", model=str(path), step=STEPS, method_values=method)
    write_eval_run(root, "base", model="models/Qwen3-1.7B-Base", step=None, method_values="base")
    return discover([root])


def test_figure2_series_equal_the_eval_records(runs: list[Run]) -> None:
    data = llm.figure2_data(runs)
    assert [p.key for p in data.panels] == [0, 64, 128]
    for delay in (0, 128):
        for method in ("grpo", "tic", "gmc"):
            series = data.series(delay, method)
            assert series is not None and series.run == f"fd-{method}-{delay}"
            assert series.steps == [0.0, 10.0, 20.0, 30.0, 40.0]
            # pass_at_k["1"] of the sampled rows, in percent
            expected = [
                100 * min(1.0, eval_value(s, method, "math500", "sampled"))
                for s in range(0, 41, 10)
            ]
            assert series.values == pytest.approx(expected)
    panel64 = data.panels[1]
    assert data.series(64, "grpo") is None
    assert panel64.missing == ["GRPO (no run)"]
    refs = {(r.method, r.x, r.y) for r in data.panels[2].references}
    assert refs == {("grpo", 800, 35.33), ("tic", 800, 55.41), ("gmc", 800, 59.03)}
    assert all(r.label.startswith("paper") for r in data.panels[2].references)


def test_figure4_series_equal_the_entropy_records(runs: list[Run]) -> None:
    data = llm.figure4_data(runs, window=3)
    series = data.series(128, "tic")
    assert series is not None
    assert series.steps == [float(s) for s in range(STEPS)]
    assert series.values == [metric_row(s, "tic", 128)["policy/entropy"] for s in range(STEPS)]
    assert series.smoothed is not None and len(series.smoothed) == STEPS
    assert series.smoothed[5] == pytest.approx(sum(series.values[4:7]) / 3)


def test_figure5_and_figure6_series_equal_the_reward_records(runs: list[Run]) -> None:
    data = llm.figure5_data(runs)
    assert [p.key for p in data.panels] == [4, 8, 32]
    for g, name in ((4, "gs-gmc-4"), (8, "fd-gmc-128")):
        series = data.series(g, "gmc")
        assert series is not None and series.run == name
        assert series.values == [metric_row(s, "gmc", 128)["reward/mean"] for s in range(STEPS)]
    assert data.panels[2].series == []
    assert sorted(data.panels[2].missing) == ["GMC-GRPO (no run)", "TIC-GRPO (no run)"]
    assert [r.x for r in data.panels[0].references] == [300]
    fig6 = llm.figure6_data(runs)
    a3po = fig6.series("Qwen3-8B", "a3po")
    assert a3po is not None
    assert a3po.values == [metric_row(s, "a3po", 0)["reward/mean"] for s in range(STEPS)]
    assert [(r.x, r.x2) for r in fig6.panels[0].references] == [(430, 440)]


def test_plots_accept_axes_and_return_the_figure(runs: list[Run], tmp_path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3)
    data = llm.figure2_data(runs)
    assert plot_panels(data, ax=axes) is fig
    lines = axes[2].get_lines()
    gmc = [line for line in lines if line.get_label() == "GMC-GRPO"]
    assert list(gmc[0].get_ydata()) == data.series(128, "gmc").values
    note = fig.legends[0].get_title().get_text().replace("\n", " ")  # under the panels
    assert f"{axes[1].get_title()}: missing GRPO" in note
    plt.close(fig)
    for build in (llm.figure4_data, llm.figure5_data, llm.figure6_data):
        fig = plot_panels(build(runs))
        fig.savefig(tmp_path / "x.png")
        plt.close(fig)


def _row(table, **match):
    found = [d for d in table.numbers() if all(d.get(k) == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def test_table1_cells_equal_the_eval_values(runs: list[Run]) -> None:
    table = llm_tables.table1_data(runs)
    ours = _row(table, model="Qwen3-8B", method="gmc", source="ours")
    assert ours["step"] == STEPS and ours["run"] == "sim-gmc"
    for bench in SIX:
        greedy = 100 * eval_value(STEPS, "gmc", bench, "greedy")
        sampled = 100 * eval_value(STEPS, "gmc", bench, "sampled")
        assert ours[bench] == pytest.approx((greedy, sampled))
    g = [100 * eval_value(STEPS, "gmc", b, "greedy") for b in SIX]
    s = [100 * eval_value(STEPS, "gmc", b, "sampled") for b in SIX]
    assert ours["macro"] == pytest.approx((sum(g) / 6, sum(s) / 6))
    lags = [metric_row(step, "gmc", 0)["staleness/lag"] for step in range(STEPS)]
    assert ours["avg_delay"] == pytest.approx(sum(lags) / len(lags))
    ref = _row(table, model="Qwen3-8B", method="gmc", source="paper")
    assert ref["macro"] == paper.table1_cell("Qwen3-8B", "gmc", "macro") == (64.37, 59.62)
    missing = _row(table, model="Qwen3-1.7B", method="vcpo", source="ours")
    assert missing["found"] is False
    md = render_markdown(table)
    assert "missing (no run)" in md and "paper (Table 1)" in md
    cell = f"{ours['math500'][0]:.2f} / {ours['math500'][1]:.2f}"
    assert cell in md and cell in render_latex(table)
    assert "\\begin{tabular}" in render_latex(table)


def test_table5_shows_the_collapse_and_our_values(runs: list[Run]) -> None:
    table = llm_tables.table5_data(runs)
    assert _row(table, model="Qwen3-8B", method="a3po", source="paper")["collapsed"] is True
    ours = _row(table, model="Qwen3-8B", method="a3po", source="ours")
    assert ours["gsm8k"] == pytest.approx(
        (
            100 * eval_value(STEPS, "a3po", "gsm8k", "greedy"),
            100 * eval_value(STEPS, "a3po", "gsm8k", "sampled"),
        )
    )
    assert "Training collapsed" in render_markdown(table)


def test_table3_cells_equal_the_eval_values(runs: list[Run]) -> None:
    table = llm_tables.table3_data(runs)
    ours = _row(table, delay=128, method="tic", source="ours")
    sampled = eval_value(STEPS, "tic", "math500", "sampled")
    assert ours["step"] == STEPS
    assert ours["greedy"] == pytest.approx(100 * eval_value(STEPS, "tic", "math500", "greedy"))
    for i, k in enumerate(paper.PASS_AT_K):
        assert ours[f"pass@{k}"] == pytest.approx(100 * min(1.0, sampled * (1 + 0.1 * i)))
    assert _row(table, delay=64, method="grpo", source="ours")["found"] is False
    assert _row(table, delay=None, method="base", source="ours")["run"] == "base"
    # rows for the delays the records have (0, 64, 128), the paper's beside them; asked for, the
    # paper's other delays appear with their reference rows and our cells missing
    assert sorted({d["delay"] for d in table.numbers() if d["delay"] is not None}) == [0, 64, 128]
    everything = llm_tables.table3_data(runs, delays=paper.TABLE3_DELAYS)
    assert _row(everything, delay=512, method="gmc", source="paper")["pass@16"] == 83.40
    assert _row(everything, delay=512, method="gmc", source="ours")["found"] is False
    at_800 = llm_tables.table3_data(runs, step=800)
    assert _row(at_800, delay=128, method="tic", source="ours")["greedy"] is None


def _math500_pair(step: int, method: str) -> tuple[float, float]:
    """Percent (greedy, sampled Pass@1) on MATH500 of the synthetic records."""
    return tuple(100 * eval_value(step, method, "math500", d) for d in ("greedy", "sampled"))


def test_table4_cells_and_delta(runs: list[Run]) -> None:
    table = llm_tables.table4_data(runs, checkpoints=[20, 200])
    ours = _row(table, checkpoint=20, group_size=4, source="ours")
    gmc, tic = _math500_pair(20, "gmc"), _math500_pair(20, "tic")
    assert ours["gmc"] == pytest.approx(gmc) and ours["tic"] == pytest.approx(tic)
    assert ours["delta"] == pytest.approx(gmc[1] - tic[1])
    assert _row(table, checkpoint=20, group_size=32, source="ours")["found"] is False
    assert _row(table, checkpoint=200, group_size=32, source="paper")["delta"] == 7.10
    assert "missing (no run)" in render_markdown(table)


def test_seeds_of_one_setting_are_drawn_as_a_mean_with_a_band(tmp_path: Path) -> None:
    """Three seeds of GMC and TIC at D = 16 (configs equal but for the seed; scores shifted by
    -0.02, 0, +0.02): Figure 2's panels are the delays present (only 16), each curve is the mean
    over seeds with a 95% Student-t band; Table 3's cells are the mean ± half-width."""
    from gmc_grpo.stats import t_quantile

    for method in ("tic", "gmc"):
        for seed, shift in enumerate((-0.02, 0.0, 0.02)):
            write_train_run(
                tmp_path,
                f"{method}_d16_seed{seed}",
                method=method,
                delay=16,
                seed=seed,
                shift=shift,
            )
    # a run of another setting (another lr) at the same cell is not mixed into the mean
    write_train_run(tmp_path, "gmc_other", method="gmc", delay=16, seed=0, model="x/Qwen3-1.7B")
    runs = discover([tmp_path])
    data = llm.figure2_data(runs)
    assert [p.key for p in data.panels] == [16]  # the delays present, not the paper's 0/64/128
    series = data.series(16, "gmc")
    assert series is not None and series.seeds == 3 and series.run.startswith("mean of 3 seeds")
    assert series.steps == [0.0, 10.0, 20.0, 30.0, 40.0]
    center = [100 * min(1.0, eval_value(s, "gmc", "math500", "sampled")) for s in range(0, 41, 10)]
    assert series.values == pytest.approx(center)
    half = t_quantile(2) * 2.0 / 3**0.5  # sd of (-2, 0, 2) percent points is 2
    assert [h - v for h, v in zip(series.hi, series.values, strict=True)] == pytest.approx(
        [half] * 5
    )
    assert [v - lo for lo, v in zip(series.lo, series.values, strict=True)] == pytest.approx(
        [half] * 5
    )
    assert not data.panels[0].references  # the paper has no D = 16
    fig = plot_panels(data)
    assert any("mean of 3 seeds" in t.get_label() for t in fig.axes[0].get_lines())
    assert fig.axes[0].collections  # the band
    pyplot().close(fig)
    table = llm_tables.table3_data(runs)
    ours = _row(table, delay=16, method="tic", source="ours")
    assert ours["seeds"] == 3
    assert ours["greedy"] == pytest.approx(100 * eval_value(STEPS, "tic", "math500", "greedy"))
    assert ours["greedy_hi"] - ours["greedy"] == pytest.approx(half)
    assert f"{ours['greedy']:.2f} ± {half:.2f}" in render_markdown(table)
    assert not any(d["source"] == "paper" and d["delay"] == 16 for d in table.numbers())


def test_table_cells_are_numbers_and_render_by_hand(runs: list[Run]) -> None:
    """Table 4 at checkpoint 20, G = 4: the cells hold the percent pairs and their difference
    (numbers, not text); the renderer writes them with two decimals, the difference signed."""
    table = llm_tables.table4_data(runs, checkpoints=[20])
    ours = next(r for r in table.rows if r.key == {"checkpoint": 20, "group_size": 4})
    gmc, tic = _math500_pair(20, "gmc"), _math500_pair(20, "tic")
    assert ours.cells["gmc"] == pytest.approx(gmc) and ours.cells["tic"] == pytest.approx(tic)
    # gmc sampled 0.45 + 0.0005 x 20 = 0.46, tic 0.41: +5.00 pp
    assert ours.cells["delta"] == pytest.approx(5.0)
    line = f"| 20 | 4 | ours | {gmc[0]:.2f} / {gmc[1]:.2f} | {tic[0]:.2f} / {tic[1]:.2f} | +5.00 |"
    assert line == "| 20 | 4 | ours | 48.00 / 46.00 | 43.00 / 41.00 | +5.00 |"
    assert line in render_markdown(table)
    missing = next(r for r in table.rows if r.key == {"checkpoint": 20, "group_size": 32})
    assert missing.cells["gmc"] == Missing("no run") and missing.cells["delta"] is None
    assert "| 20 | 32 | ours | missing (no run) | missing | missing |" in render_markdown(table)
    assert "48.00 / 46.00 & 43.00 / 41.00 & +5.00 \\\\" in render_latex(table)


def test_table3_seed_cells_are_intervals(tmp_path: Path) -> None:
    for seed, shift in enumerate((-0.02, 0.0, 0.02)):
        write_train_run(tmp_path, f"tic_s{seed}", method="tic", delay=16, seed=seed, shift=shift)
    table = llm_tables.table3_data(discover([tmp_path]))
    row = next(r for r in table.rows if r.key == {"delay": 16, "method": "tic"})
    cell = row.cells["greedy"]
    assert isinstance(cell, Interval) and row.info["seeds"] == 3
    # greedy 0.42 + 0.0005 x 40 = 0.44 -> 44 pp +- 2 pp: sd 2, half-width t(0.975, 2) x 2 / sqrt 3
    assert cell.mean == pytest.approx(44.0)
    assert cell.half_width == pytest.approx(4.302652729911275 * 2 / 3**0.5)
    assert (
        f"| 16 | TIC-GRPO | ours (mean ± 95% CI, 3 seeds) | 40 | 44.00 ± {cell.half_width:.2f} |"
        in (render_markdown(table))
    )


def test_outcome_kl_puts_each_run_at_its_median_kl(tmp_path):
    """One point per fixed-delay run: x the median of its KL rows (here the learner's
    `ratio/kl_estimate`, `0.01 D + 0.001 (step mod 3)` over steps 0-2: median `0.01 D + 0.001`;
    `D = 0` on-policy: 0), y its last sampled evaluation; a run without evaluations is named."""
    from figures.common import eval_curve
    from figures.llm import outcome_kl_data

    for delay in (0, 8):
        for method in ("tic", "gmc"):
            write_train_run(tmp_path, f"{method}-d{delay}", method=method, delay=delay, steps=3,
                            eval_every=3)  # fmt: skip
    write_train_run(tmp_path, "gmc-d16", method="gmc", delay=16, steps=3, eval_every=0)
    runs = discover([tmp_path])
    data = outcome_kl_data(runs)
    points = {(s.method, s.run): (s.steps, s.values) for s in data.panels[0].series}
    assert set(points) == {("tic", "D = 0"), ("gmc", "D = 0"), ("tic", "D = 8"), ("gmc", "D = 8")}
    for method in ("tic", "gmc"):
        run = next(r for r in runs if r.path.name == f"{method}-d8")
        _, scores = eval_curve(run, "math500", "sampled")
        assert points[(method, "D = 8")] == ([pytest.approx(0.081)], [scores[-1]])
        assert points[(method, "D = 0")][0] == [0.0]
    assert any("gmc-d16" in note for note in data.notes)
    assert "ratio/kl_estimate" in data.caption  # no run has the bound tracker's KL
