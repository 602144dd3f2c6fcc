"""Checkpoint files without pickle (`gmc_grpo.state_files`): any nested state round-trips through
safetensors + a JSON manifest; what the format cannot hold is refused when writing, with its path;
a file that is not safetensors is refused when reading, and nothing in it runs."""

from __future__ import annotations

import builtins
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gmc_grpo.state_files import (
    CheckpointError,
    check_safetensors_file,
    flatten_state,
    list_checkpoints,
    read_state,
    save_step_folder,
    unflatten_state,
    write_state,
)


def assert_same_state(a: Any, b: Any, where: str = "state") -> None:
    """Equal values of equal types (tensors: dtype, shape and bits; NaN equals NaN)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True, msg=where)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert_same_state(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_state(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where


_DTYPES = [torch.float64, torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.uint8]


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    dtype = draw(st.sampled_from([*_DTYPES, torch.bool]))
    shape = draw(st.lists(st.integers(0, 3), max_size=3))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    values = torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * 100
    if dtype.is_floating_point and values.numel() and draw(st.booleans()):
        values.view(-1)[0] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    return values > 0 if dtype is torch.bool else values.to(dtype)


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),  # beyond 64 bits: numpy's PCG64 state holds 128-bit ints
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    tensors(),
    st.builds(lambda t: t.numpy() if t.dtype != torch.bfloat16 else t.float().numpy(), tensors()),
)
keys = st.one_of(st.text(max_size=4), st.integers(-5, 5), st.sampled_from(["$tensor", "$x"]))
states = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(keys, inner, max_size=3),
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=states)
def test_any_nested_state_round_trips_in_memory(state: Any) -> None:
    tensors_, manifest = flatten_state(state)
    assert all(isinstance(t, torch.Tensor) for t in tensors_.values())
    assert_same_state(unflatten_state(tensors_, manifest), state)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=states)
def test_any_nested_state_round_trips_through_the_files(state: Any, tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("state")
    write_state(folder, {"payload": state})
    assert sorted(p.name for p in folder.iterdir()) == ["state.json", "state.safetensors"]
    assert_same_state(read_state(folder), {"payload": state})


def test_shared_and_viewed_tensors_are_stored_apart(tmp_path: Path) -> None:
    base = torch.arange(6.0)
    state = {"whole": base, "again": base, "view": base[1:3], "t": base.view(2, 3).t()}
    write_state(tmp_path, state)
    back = read_state(tmp_path)
    assert_same_state(back, state)
    back["whole"][0] = 99.0  # loaded tensors do not alias one another
    assert back["again"][0] == 0.0


@pytest.mark.parametrize(
    ("state", "where"),
    [
        ({"a": [1, {"b": object()}]}, "a.1.b"),
        ({"a": {1, 2}}, "a"),
        ({"a": {(1, 2): 3}}, "dict key (1, 2)"),
        ({"z": torch.zeros(2, dtype=torch.complex64)}, "complex"),
        ({"o": np.array([object()])}, "numpy object arrays"),
    ],
)
def test_what_needs_pickle_is_refused_with_its_path(state: dict, where: str) -> None:
    with pytest.raises(CheckpointError, match=where.replace("(", r"\(").replace(")", r"\)")):
        flatten_state(state)


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (builtins.open, (str(self.marker), "w"))


@pytest.mark.parametrize("how", ["torch.save", "pickle"])
def test_a_pickle_where_safetensors_belong_is_refused_and_never_runs(tmp_path: Path, how: str):
    folder = tmp_path / "ckpt"
    write_state(folder, {"theta": torch.ones(3)})
    marker = tmp_path / "payload-ran"
    target = folder / "state.safetensors"
    target.unlink()
    if how == "torch.save":
        torch.save({"theta": _Payload(marker)}, target)
    else:
        target.write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(CheckpointError, match="not a safetensors file.*never unpickles"):
        check_safetensors_file(target)
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        read_state(folder)
    assert not marker.exists()


def test_a_damaged_manifest_or_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    write_state(tmp_path, {"x": torch.ones(1)})
    (tmp_path / "state.json").write_text('{"format": "gmc-grpo-state", "version": 1, "sta')
    with pytest.raises(CheckpointError, match="state.json is not valid JSON"):
        read_state(tmp_path)
    (tmp_path / "state.json").write_text('{"format": "other"}')
    with pytest.raises(CheckpointError, match="not a gmc-grpo state manifest"):
        read_state(tmp_path)
    (tmp_path / "state.json").unlink()
    with pytest.raises(CheckpointError, match="state.json is missing"):
        read_state(tmp_path)


def test_step_folders_are_written_whole_and_pruned(tmp_path: Path) -> None:
    for step in (2, 4, 6):
        save_step_folder(tmp_path, step, lambda d, s=step: write_state(d, {"s": s}), keep=2)
    assert sorted(list_checkpoints(tmp_path)) == [4, 6]
    assert read_state(list_checkpoints(tmp_path)[6]) == {"s": 6}

    def broken(folder: Path) -> None:
        write_state(folder, {"s": 8})
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        save_step_folder(tmp_path, 8, broken, keep=2)
    # the failed write leaves neither a step_8 folder nor a temporary one
    assert sorted(list_checkpoints(tmp_path)) == [4, 6]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step_000004",
        "step_000006",
    ]
