"""LoadModel of bad model files against a started backend: what a user hands LocalAI by mistake.

Each case must answer its exact code (NOT_FOUND for a missing path, INVALID_ARGUMENT for a file
or folder whose bytes are not the model the backend reads), with a message naming the bad file
and, past a missing path, the format expected; never OK. After each the server still answers
Health and holds no model. Called from the tests that already package and start each backend, so
the cases cost no packaging of their own.
"""
from __future__ import annotations

import random
from pathlib import Path

from backends.proto import backend_pb2
from tests.integration.rpc_checks import Code, assert_healthy, expect_code, state


def _random_bytes(n: int, seed: int) -> bytes:
    data = bytes(random.Random(seed).getrandbits(8) for _ in range(n))
    return b"\x93" + data[1:]  # a first byte no model format starts with


def bad_models(root: Path, file_name: str, takes_folders: bool) -> list[tuple[str, Path, Code, Path]]:
    """(case, path to load, expected code, the path its message must name), written under ``root``.

    ``file_name``: what the bad single files are called (the backend's own suffix, so the
    content is judged, not the name). ``takes_folders``: whether the backend loads a folder; a
    backend of single files names the folder it was given instead of the file inside."""
    cases = []

    def file(case: str, content: bytes) -> None:
        path = root / case / file_name
        path.parent.mkdir(parents=True)
        path.write_bytes(content)
        cases.append((case, path, Code.INVALID_ARGUMENT, path))

    def folder(case: str, files: dict[str, bytes], bad: str) -> None:
        path = root / case
        path.mkdir(parents=True)
        for name, content in files.items():
            (path / name).write_bytes(content)
        cases.append((case, path, Code.INVALID_ARGUMENT, path / bad if takes_folders else path))

    missing = root / "missing" / file_name
    cases.append(("missing", missing, Code.NOT_FOUND, missing))
    file("empty", b"")
    file("random-bytes", _random_bytes(4096, seed=40))
    file("gguf-magic-then-garbage", b"GGUF" + _random_bytes(4092, seed=41))
    folder("config-not-json", {"config.json": b"{not json", "model_index.json": b"{}", "model.bin": b"x"}, "config.json")
    folder("empty-safetensors", {"config.json": b"{}", "model_index.json": b"{}", "model.safetensors": b""}, "model.safetensors")
    return cases


def assert_bad_models_answer_clearly(stub, root: Path, file_name: str = "model.bin", takes_folders: bool = True,
                                     **options) -> None:
    """Every case of ``bad_models``: LoadModel answers its code naming the file, then the server
    is healthy and UNINITIALIZED. ``options``: further ModelOptions fields of every LoadModel."""
    for case, path, code, named in bad_models(root, file_name, takes_folders):
        err = expect_code(code, stub.LoadModel, backend_pb2.ModelOptions(Model=str(path), **options), timeout=300)
        details = err.details()
        assert str(named) in details, f"{case}: the message does not name {named}: {details}"
        if code != Code.NOT_FOUND:
            assert "expected" in details, f"{case}: the message does not say what was expected: {details}"
        assert_healthy(stub)
        assert state(stub) == backend_pb2.StatusResponse.UNINITIALIZED, case
