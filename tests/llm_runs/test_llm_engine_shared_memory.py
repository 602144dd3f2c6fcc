"""The engine process's weight buffer in a shared-memory folder too small (issue 32): one clear
error naming the folder and `--shm-size`, never a SIGBUS, and no file left behind.

The first two tests mount a real 1 MiB tmpfs (as `/dev/shm` is in a container started with a
small `--shm-size`); they need the right to mount (root) and are skipped without it. The third
simulates the ENOSPC of `posix_fallocate` in an ordinary folder, so the error path runs
everywhere."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the LLM track needs transformers")

from llm_train_checks import alive, one_thread  # noqa: E402, F401

from llm_runs.engines.remote import (  # noqa: E402
    RemoteEngine,
    SharedMemoryError,
    WeightBuffer,
    layout_size,
)

MIB = 2**20


def layout_of(nbytes: int) -> list[dict]:
    """One uint8 tensor of `nbytes` bytes."""
    return [{"name": "w", "shape": [nbytes], "dtype": "uint8", "offset": 0, "nbytes": nbytes}]


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 1 MiB tmpfs mounted at a temporary folder (skipped where mounting is not allowed)."""
    folder = tmp_path / "shm"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_a_buffer_larger_than_the_tmpfs_is_one_clear_error_and_leaves_no_file(tiny_tmpfs):
    path = tiny_tmpfs / f"weights-{uuid.uuid4().hex}"
    with pytest.raises(SharedMemoryError) as error:
        WeightBuffer(path, layout_of(8 * MIB), create=True)
    text = str(error.value)
    assert "\n" not in text
    assert f"needs 0.01 GiB in {tiny_tmpfs}" in text  # 8 MiB = 0.0078 GiB
    assert "No space left on device" in text and "--shm-size=1g" in text
    assert list(tiny_tmpfs.iterdir()) == []
    # what fits is reserved and usable
    fits = WeightBuffer(path, layout_of(512 * 1024), create=True)
    fits.tensors()["w"].fill_(7)
    assert os.path.getsize(path) == layout_size(layout_of(512 * 1024))
    fits.unlink()
    fits.close()
    assert list(tiny_tmpfs.iterdir()) == []


def test_the_old_ftruncate_path_dies_of_sigbus_on_the_same_tmpfs(tiny_tmpfs):
    """What the reservation prevents: ftruncate + mmap succeed on a full tmpfs and the first
    write past its end kills the process (exit 135 from a shell, -SIGBUS here)."""
    script = (
        "import mmap, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
        "os.ftruncate(fd, 8 << 20)\n"
        "m = mmap.mmap(fd, 8 << 20)\n"
        "m[:] = b'x' * (8 << 20)\n"
    )
    path = tiny_tmpfs / "old"
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True)
    assert done.returncode == -7  # SIGBUS
    path.unlink()


def test_a_remote_engine_with_a_full_shared_folder_fails_cleanly(tmp_path, monkeypatch):
    """Simulated ENOSPC (`posix_fallocate` patched) at the engine's first weight sync: the
    `SharedMemoryError`, no file in the folder, and the engine process closes."""
    from transformers import AutoModelForCausalLM

    from llm_runs.tiny import build_tiny_qwen3

    model_dir = build_tiny_qwen3(
        tmp_path / "m", seed=0, num_layers=1, hidden_size=64, intermediate_size=128
    )
    folder = tmp_path / "shm"
    folder.mkdir()

    def no_space(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    engine = RemoteEngine("hf", model_dir, device="cpu", max_model_len=64, shared_dir=folder)
    try:
        state = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
        with pytest.raises(SharedMemoryError, match=f"in {folder} and it has .* GiB free"):
            engine.update_weights(state)
        assert list(folder.iterdir()) == []
    finally:
        engine.close()
    assert not alive(engine.pid)
    assert list(Path(folder).iterdir()) == []
