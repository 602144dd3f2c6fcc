"""The GPU memory model (`llm_runs.memory`): parameter counts against the real architectures,
hand-worked terms, and the one GPU measurement it can be compared with."""

from __future__ import annotations

import pytest

from llm_runs.memory import (
    GIB,
    QWEN3_SHAPES,
    calibration_check,
    engine_bytes,
    learner_bytes,
    markdown_table,
    memory_rows,
)


@pytest.mark.parametrize("name", sorted(QWEN3_SHAPES))
def test_parameter_counts_are_the_architectures(name):
    """Counted from the shape; checked against `Qwen3ForCausalLM` built on the meta device."""
    pytest.importorskip("transformers")
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    shape = QWEN3_SHAPES[name]
    config = Qwen3Config(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        tie_word_embeddings=shape.tied,
    )
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    assert shape.parameters() == sum(p.numel() for p in model.parameters())


def test_hand_worked_terms_at_the_1p7b_shape():
    shape = QWEN3_SHAPES["1.7B"]
    p = shape.parameters()
    assert p == 1_720_574_976  # the count of bench/results/gpu_learner_step_h200.json
    mixed = learner_bytes(shape)  # mixed bf16, 8-bit AdamW, one group of 8 x 5,120 tokens
    assert mixed["parameters"] == mixed["gradients"] == 4 * p  # float32 master weights
    # one float32 maximum per 256-element block of each of the two 8-bit states (bitsandbytes)
    assert mixed["optimizer states"] == 2 * p + 8 * p / 256
    assert mixed["autocast weight copies"] == 2 * p
    assert mixed["checkpointed layer inputs"] == 28 * 40960 * 2048 * 4  # float32 residual
    # q: 16 x 128 = 2048, kv: 8 x 128 = 1024, I = 6144; bf16 intermediates and their gradients,
    # + float32 q and k of the q/k RMSNorm and their gradients
    layer = 2 * 40960 * (2048 + 2 * 1024 + 2 * 2048 + 4 * 6144) * 2 + 2 * 40960 * 3072 * 4
    assert mixed["one layer recomputed"] == layer
    # three float32 [chunk, V] + one bf16, + autocast's bf16 copy of the [V, H] output weight
    assert mixed["log-softmax chunk"] == 4096 * 151936 * 14 + 151936 * 2048 * 2
    assert 151936 * 2048 * 2 / 1e9 == pytest.approx(0.62, abs=0.01)  # the 0.6 GB
    gac = learner_bytes(shape, family="gac")["method extra"]
    assert gac == 4 * p + 2**28  # the float32 previous gradient + 256 MiB of temporaries
    vcpo = learner_bytes(shape, family="vcpo")["method extra"]
    assert vcpo == 4 * p + 151936 * 2048 * 16
    pure = learner_bytes(shape, precision="bfloat16", optimizer="adamw")
    assert pure["parameters"] == 2 * p and pure["optimizer states"] == 4 * p
    assert pure["autocast weight copies"] == 0
    assert pure["log-softmax chunk"] == 4096 * 151936 * 14  # no autocast, no copies
    engine = engine_bytes(shape)
    assert engine["weights"] == 2 * p
    assert engine["KV cache"] == 2 * 28 * 8 * 128 * 2 * 64 * 5120  # 112 KiB per token


def test_the_model_is_within_ten_percent_of_the_one_gpu_measurement():
    check = calibration_check()
    for measured in check["measured_gib"]:
        assert abs(check["modelled_gib"] - measured) < 0.1 * measured, check


def test_table_covers_every_model_and_method_family():
    rows = memory_rows()
    assert {(r["model"], r["family"]) for r in rows} == {
        (m, f) for m in ("1.7B", "4B", "8B") for f in ("grpo/tic/gmc", "vcpo", "gac")
    }
    for r in rows:
        assert r["one_gpu_gib"] == pytest.approx(r["learner_adamw8bit_gib"] + r["engine_gib"])
        # sleep mode: the learner's peak, or its parameters + 8-bit states (6 bytes per
        # parameter under mixed) beside an awake vLLM, whichever is larger
        resident = (6 * r["parameters"] + 8 * r["parameters"] / 256) / GIB
        if r["family"] == "gac":  # + its float32 previous gradient
            resident += 4 * r["parameters"] / GIB
        assert r["resident_gib"] == pytest.approx(resident)
        assert r["one_gpu_sleep_gib"] == pytest.approx(
            max(r["learner_adamw8bit_gib"], resident + r["engine_gib"])
        )
        assert r["learner_adamw_gib"] > r["learner_adamw8bit_gib"]
    # the 8B learner's static memory alone under the mixed default: 12 bytes per parameter
    eight = next(r for r in rows if r["model"] == "8B")
    assert eight["static_gib"] == pytest.approx(
        (12 * QWEN3_SHAPES["8B"].parameters() + 8 * QWEN3_SHAPES["8B"].parameters() / 256) / GIB
    )
    assert markdown_table(rows).count("\n") == len(rows) + 1
