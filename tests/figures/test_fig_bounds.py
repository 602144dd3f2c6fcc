"""figures.bounds_vs_runs (with evidence.runs_vs_theory): measured values equal the records, the
theory columns equal theory's."""

from __future__ import annotations

from pathlib import Path

import pytest
from fig_records import metric_row, write_toy_train_run, write_train_run

from evidence.runs_vs_theory import AGREES, batch_means_interval, stabilisation_step
from figures.bounds_vs_runs import bounds_data, plot_bounds_vs_runs, recorded_panels
from figures.common import pyplot
from figures.discover import discover
from theory.bounds import removed_mass_bound
from theory.constants import gmc_penalty, improvement_factor, tic_penalty

STEPS = 30


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bounds")
    for delay in (0, 4, 8):
        for method in ("tic", "gmc"):
            write_train_run(
                root, f"{method}-{delay}", method=method, delay=delay, steps=STEPS, eval_every=10
            )
    write_train_run(root, "gmc-g32", method="gmc", delay=8, group_size=32, steps=STEPS)
    write_toy_train_run(root, "toy", delays=(0, 4, 8), steps=STEPS)
    return root


def test_fixed_delay_points_equal_the_records(root: Path) -> None:
    data = bounds_data(discover([root]), "fixed_delay")
    assert len(data.points) == 6  # the G = 32 run is not mixed in
    point = next(p for p in data.points if p["method"] == "tic" and p["delay"] == 8)
    rows = [metric_row(s, "tic", 8) for s in range(8, STEPS)]  # steady state: steps >= D
    # the realised tau4, the FIFO's fill (lag n at step n < D) included: not D^4
    tau4 = (sum(n**4 for n in range(8)) + (STEPS - 8) * 8.0**4) / STEPS
    assert point["tau4"] == pytest.approx(tau4) and point["x"] == pytest.approx(tau4**0.25)
    assert point["removed_mass"] == pytest.approx(
        sum(r["ratio/removed_mass"] for r in rows) / len(rows)
    )
    assert point["capped_frac"] == pytest.approx(
        sum(r["ratio/capped_frac"] for r in rows) / len(rows)
    )
    kl = [r["ratio/kl_estimate"] for r in rows]
    assert point["kl"] == pytest.approx(sum(kl) / len(kl))
    assert point["kl_lo"] <= point["kl"] <= point["kl_hi"]
    assert point["bound"] == pytest.approx(removed_mass_bound(point["kl"], 0.28, "tic"))
    theory = next(t for t in data.theory if t["x"] == pytest.approx(tau4**0.25))
    assert theory["factor"] == pytest.approx(improvement_factor(0.28))
    assert theory["delay_term_gmc"] == pytest.approx((gmc_penalty(0.28) * tau4 / STEPS**4) ** 0.2)
    assert theory["delay_term_tic"] == pytest.approx((tic_penalty(0.28) * tau4 / STEPS**4) ** 0.2)
    gap = next(g for g in data.gaps if g["x"] == pytest.approx(tau4**0.25))
    assert gap["gap"] == pytest.approx(5.0)  # synthetic GMC - TIC sampled Pass@1 at the last eval
    assert {c["claim"].split(" ")[0] for c in data.checks} >= {"removed", "capped", "GMC's"}
    assert r"removed mass $\le \mathrm{KL}/\mathrm{den}$ (step 2 of §4.2): agrees" in data.caption
    assert r"$\bar\tau_4$ = realised mean" in data.caption  # Markdown with LaTeX formulas
    assert "0.331" not in data.caption and "x TIC's" not in data.caption


def test_toy_suite_uses_exact_kl_and_the_lag_moment(root: Path) -> None:
    data = bounds_data(discover([root]), "toy")
    point = next(p for p in data.points if p["method"] == "gmc" and p["delay"] == 4)
    lags = [metric_row(s, "gmc", 4)["staleness/lag"] for s in range(STEPS)]
    assert point["kl_key"] == "ratio/kl_exact"
    assert point["tau4"] == pytest.approx(sum(x**4 for x in lags) / len(lags))
    assert data.gaps and all(g["gap"] == pytest.approx(0.9) for g in data.gaps)
    assert (
        next(c for c in data.checks if c["claim"].startswith("GMC converges"))["verdict"] == AGREES
    )


def test_empty_suite_and_plot(root: Path) -> None:
    runs = discover([root])
    empty = bounds_data(runs, "length_coupled")
    assert not empty.has_data and all(c["verdict"] == "not measurable" for c in empty.checks)
    plt = pyplot()
    for data in (bounds_data(runs, "fixed_delay"), empty):
        fig = plot_bounds_vs_runs(data)
        assert len(fig.axes) == len(recorded_panels(data)) >= 1  # a panel per recorded quantity
        plt.close(fig)
    fig = plot_bounds_vs_runs(empty)
    assert "missing: no length_coupled runs" in [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)
    with pytest.raises(ValueError, match="suite"):
        bounds_data(runs, "nope")


def test_stabilisation_step_and_interval() -> None:
    steps = list(range(100))
    values = [1.0 if s < 40 else 0.0 for s in steps]
    assert stabilisation_step(steps, values, window=1) == 40
    assert stabilisation_step(steps[:5], values[:5]) is None
    center, lo, hi = batch_means_interval([float(i) for i in range(20)])
    assert center == 9.5 and lo < 9.5 < hi
    # block means 0.5, 2.5, ..., 18.5: sd = 2 * sqrt(55/6); t(0.975, 9) = 2.2622
    assert hi - center == pytest.approx(2.2622 * 2 * (55 / 6) ** 0.5 / 10**0.5, rel=1e-3)
    assert batch_means_interval([1.0, 2.0] * 10)[1:] == (1.5, 1.5)  # equal blocks: no spread
    assert batch_means_interval([1.0]) is None


def test_seeds_of_one_setting_make_one_point_with_an_interval(tmp_path: Path) -> None:
    """Two seeds of TIC and GMC at D = 4 (removed mass and KL shifted by 0 and +0.01): one point
    per method, the mean over seeds with a Student-t interval; the bound check is per seed."""
    from gmc_grpo.stats import t_quantile

    for method in ("tic", "gmc"):
        for seed, shift in enumerate((0.0, 0.01)):
            write_train_run(
                tmp_path, f"{method}-s{seed}", method=method, delay=4, seed=seed, shift=shift
            )
    data = bounds_data(discover([tmp_path]), "fixed_delay")
    assert len(data.points) == 2
    point = next(p for p in data.points if p["method"] == "gmc")
    assert point["seeds"] == 2 and len(point["per_seed"]) == 2
    rows = [metric_row(s, "gmc", 4) for s in range(4, 40)]
    removed = sum(r["ratio/removed_mass"] for r in rows) / len(rows)
    assert point["removed_mass"] == pytest.approx(removed + 0.005)
    half = t_quantile(1) * (0.01 / 2**0.5) / 2**0.5
    assert point["removed_mass_hi"] - point["removed_mass"] == pytest.approx(half)
    assert point["kl_hi"] - point["kl"] == pytest.approx(half)
    check = next(c for c in data.checks if c["claim"].startswith("removed mass <="))
    assert check["detail"].startswith("4 of 4 GMC/TIC runs")
    fig = plot_bounds_vs_runs(data)
    pyplot().close(fig)


def test_toy_curves_leave_out_worker_and_sgd_studies(tmp_path: Path) -> None:
    """Runs of a mixed-lag or GMC/TIC-gap experiment join no delay curve; a delay sweep's do."""
    import json

    for kind, delays in (("delay_sweep", (0, 4)), ("mixed_delay", (8,)), ("gmc_tic_gap", (12,))):
        experiment = tmp_path / kind
        experiment.mkdir()
        (experiment / "experiment.json").write_text(json.dumps({"name": kind, "kind": kind}))
        write_toy_train_run(experiment, "point", delays=delays, steps=STEPS)
    data = bounds_data(discover([tmp_path]), "toy")
    assert sorted({p["delay"] for p in data.points}) == [0, 4]


@pytest.mark.parametrize(
    ("gmc_shifts", "verdict", "mean"),
    [
        # GMC - TIC per seed = 5 + 100 x shift: 5, 5.5, 6 -> [4.26, 6.74], above 0
        ((0.0, 0.005, 0.01), AGREES, 5.5),
        # -1, 1, 5.5: mean 1.83, t(0.975, 2) = 4.303 x se 1.92 -> the interval holds 0
        ((-0.06, -0.04, 0.005), "not significant", 11 / 6),
        # -3, -2.5, -2 -> [-3.74, -1.26], below 0
        ((-0.08, -0.075, -0.07), "does not agree", -2.5),
    ],
)
def test_llm_seeds_pair_gmc_and_tic_by_seed(
    tmp_path: Path, gmc_shifts: tuple[float, ...], verdict: str, mean: float
) -> None:
    """The synthetic GMC - TIC gap in final sampled Pass@1 is 5 pp; shifting GMC's seeds (a shift
    of 0.01 in Pass@1 is 1 pp) makes the paired interval over seeds lie above 0, hold 0, or lie
    below 0."""
    for seed, shift in enumerate(gmc_shifts):
        write_train_run(tmp_path, f"tic-s{seed}", method="tic", delay=4, seed=seed)
        write_train_run(tmp_path, f"gmc-s{seed}", method="gmc", delay=4, seed=seed, shift=shift)
    data = bounds_data(discover([tmp_path]), "fixed_delay")
    gap = data.gaps[0]
    assert gap["paired"]["n"] == 3 and gap["paired"]["mean"] == pytest.approx(mean)
    check = next(c for c in data.checks if c["claim"].startswith("GMC converges"))
    assert check["verdict"] == verdict


@pytest.fixture
def user_method():
    """A user's method whose spec claims GMC's removed-mass bound: GMC registered again under
    another name (for one test)."""
    import dataclasses

    from gmc_grpo.methods import get_method, register_method, unregister_method

    spec = dataclasses.replace(get_method("gmc"), name="user_gmc", label="user GMC")
    yield register_method(spec, replace=True)
    unregister_method("user_gmc")


def test_a_registered_method_with_a_bound_appears_as_in_the_sweep(tmp_path: Path, user_method):
    """The spec, not a list of names, decides: the user's method gets its removed-mass bound in
    the runs-vs-theory figure and is counted in its check, as the toy sweep checks it and its
    removed-mass figure draws it."""
    from figures.toy_bias import removed_mass_vs_bound_data
    from toy_mdps.sweep.config import SweepConfig
    from toy_mdps.sweep.run import run_sweep

    for delay in (0, 4, 8):
        for method in ("tic", "gmc", "user_gmc"):
            write_train_run(tmp_path / "llm", f"{method}-{delay}", method=method, delay=delay)
    data = bounds_data(discover([tmp_path / "llm"]), "fixed_delay")
    point = next(p for p in data.points if p["method"] == "user_gmc" and p["delay"] == 4)
    assert point["bound"] == pytest.approx(removed_mass_bound(point["kl"], 0.28, "gmc"))
    check = next(c for c in data.checks if c["claim"].startswith("removed mass <="))
    assert check["detail"].startswith("9 of 9 GMC/TIC/USER_GMC runs")
    growth = next(c for c in data.checks if c["claim"].startswith("removed mass grows"))
    assert growth["detail"] == "6 of 6 consecutive delays"  # 2 per bounded method
    fig = plot_bounds_vs_runs(data)
    assert "user GMC" in [line.get_label() for line in fig.axes[0].get_lines()]
    pyplot().close(fig)

    config = SweepConfig.from_dict(
        {"num_prompts": 2, "vocab_size": 3, "max_length": 3, "num_groups": 2,
         "trajectory_steps": 6, "delays": [6], "group_sizes": [4], "num_minibatches": 20,
         "methods": ["gmc", "user_gmc"], "figures": False}
    )  # fmt: skip
    rows = run_sweep(config, tmp_path / "sweep", progress=False)
    from gmc_grpo.json_files import read_json

    claims = read_json(tmp_path / "sweep" / "summary.json")["claims"]
    assert "user_gmc_removed_mass_below_kl_bound" in claims
    assert set(removed_mass_vs_bound_data(rows)) == {"gmc", "user_gmc"}


def test_tracked_llm_runs_give_drift_the_tracker_kl_and_the_mismatch(tmp_path: Path) -> None:
    """LLM runs with the bound tracker (`llm_runs.bound_tracking`): the point's KL is the tracker's (every
    other step here), the drift and its pathwise bound are their steady-state means, the lag-0
    mismatch its mean where logged; the drift checks report the drift / pathwise ratio and the
    smallest L that step 3 needs, 2 KL / (T drift), as measurements."""
    from gmc_grpo.run_writer import RunWriter

    for delay in (0, 4, 8):
        path = tmp_path / f"gmc-{delay}"
        config = {
            "method": "gmc",
            "schedule": "fixed_delay",
            "delay": delay,
            "group_size": 8,
            "rollout_prompts": 8,
            "eps_high": 0.28,
            "total_steps": STEPS,
            "model": "tiny",
            "max_completion_tokens": 12,
        }
        with RunWriter(path, config) as writer:
            for step in range(STEPS):
                row = metric_row(step, "gmc", delay)
                row["bounds/drift_sq"] = 0.01 * delay
                row["bounds/drift_path"] = 0.02 * delay
                if step % 2 == 0:
                    row["bounds/kl_estimate"] = 0.02 * delay
                if step == 0:
                    row["mismatch/logprob_abs_mean"] = 1e-6 * (delay + 1)
                writer.log_metrics(row)
            writer.write_summary({"steps": STEPS})
    data = bounds_data(discover([tmp_path]), "fixed_delay")
    point = next(p for p in data.points if p["delay"] == 8)
    assert point["kl_key"] == "bounds/kl_estimate"
    assert point["kl"] == pytest.approx(0.16)
    assert point["drift_sq"] == pytest.approx(0.08) and point["drift_path"] == pytest.approx(0.16)
    assert point["mismatch"] == pytest.approx(9e-6)
    ratio = next(c for c in data.checks if c["claim"].startswith("drift / its pathwise"))
    assert ratio["verdict"].startswith("measured") and "GMC D=8: 0.50" in ratio["detail"]
    step3 = next(c for c in data.checks if c["claim"].startswith("KL <= (T L / 2)"))
    # 2 KL / (T drift) = 2 x 0.02 D / (12 x 0.01 D) = 1/3 at every delay
    assert step3["detail"].startswith("L >= 0.333")
    fig = plot_bounds_vs_runs(data)
    assert {"drift", "mismatch"} <= set(recorded_panels(data))  # recorded here: drawn
    assert len(fig.axes) == len(recorded_panels(data))
    pyplot().close(fig)
