"""The supervised warm-up's answer fraction: 1 teaches each prompt its sum, 0 the answer format
with sums unrelated to the prompt, 1/2 a model that puts extra mass on the right sum."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_runs.arithmetic import build_prompt, supervised_warmup, target_text  # noqa: E402
from llm_runs.data import Problem  # noqa: E402
from llm_runs.tiny import build_tiny_qwen3, sequence_logprobs  # noqa: E402

POOL = [
    Problem(id="a", problem="1+2", answer="3", source="arithmetic"),
    Problem(id="b", problem="4+4", answer="8", source="arithmetic"),
]


def _answer_logprobs(model, tokenizer) -> torch.Tensor:
    """`[prompt, answer]` log-prob of the completion ` \\boxed{answer}` + EOS."""
    out = torch.zeros(2, 2)
    for i, p in enumerate(POOL):
        prompt = tokenizer.encode(build_prompt(p.problem), add_special_tokens=False)
        for j, q in enumerate(POOL):
            target = tokenizer.encode(target_text(q.answer), add_special_tokens=False)
            with torch.no_grad():
                lp = sequence_logprobs(model, [prompt], [target + [tokenizer.eos_token_id]])[0]
            out[i, j] = lp.sum()
    return out


@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.0])
def test_warmup_answer_fraction(tmp_path, fraction):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    directory = build_tiny_qwen3(tmp_path / "m", seed=0, init_std=0.02)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    losses = supervised_warmup(
        model, tokenizer, POOL, steps=60, lr=1e-3, batch_size=128, seed=0, answer_fraction=fraction
    )
    assert losses[-1] < losses[0]
    lp = _answer_logprobs(model, tokenizer)
    # the probability of each prompt's own answer among the two
    own = torch.softmax(lp, dim=1).diagonal()
    # the target's own sum with probability fraction + (1 - fraction) / 2 (two problems)
    expected = fraction + (1 - fraction) / 2
    assert bool(((own - expected).abs() < 0.15).all()), (own, expected)
    with pytest.raises(ValueError, match="answer_fraction"):
        supervised_warmup(
            model, tokenizer, POOL, steps=1, lr=1e-3, batch_size=2, seed=0, answer_fraction=2.0
        )


def test_warmup_shows_a_progress_bar_only_when_asked(tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    directory = build_tiny_qwen3(tmp_path / "m", seed=0, init_std=0.02)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    capsys.readouterr()  # transformers' own bars
    runs = {}
    for progress in (True, False):
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
        runs[progress] = supervised_warmup(
            model, tokenizer, POOL, steps=3, lr=1e-3, batch_size=4, seed=0, progress=progress
        )
        runs[progress, "stderr"] = capsys.readouterr().err
    bar = runs[True, "stderr"].split("supervised warm-up", 1)
    assert len(bar) == 2 and "3/3" in bar[1]
    assert "loss=" in runs[True, "stderr"]
    assert "supervised warm-up" not in runs[False, "stderr"]
    assert runs[True] == runs[False]  # the bar changes nothing of the computation
