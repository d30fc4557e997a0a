"""LocalAI's backend contract, from the packaged PEXes over real gRPC: bearer token, model
identity, parent watch, and a lifecycle that survives Free/LoadModel under load."""
from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from backends.proto import backend_pb2
from engines.minilm.convert import convert, default_model_dir
from tests.integration.backend_process import BackendProcess
from tests.integration.tiny_models import minilm_dir

TOKEN = "t0ken-" + "k" * 26
# What LocalAI would run: a parent that starts run.sh as its child and waits for it.
LAUNCHER = (sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))")
WATCH_FAST = {"LOCALAI_BACKEND_PARENT_WATCH_INTERVAL": "200ms"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """The GGUF as a model named "a" in a models folder, as LocalAI passes Model + ModelPath."""
    folder = tmp_path_factory.mktemp("models")
    convert(default_model_dir(), folder / "a", "f32")
    shutil.copy(folder / "a", folder / "b")
    return folder


def load(proc, model_dir, name="a", **kw):
    return proc.stub.LoadModel(
        backend_pb2.ModelOptions(Model=name, ModelPath=str(model_dir)), metadata=proc.metadata, timeout=120, **kw
    )


def code_of(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code()


def test_token_is_required_on_every_rpc_and_never_printed(model_dir):
    with BackendProcess("minilm-ggml", env={"LOCALAI_GRPC_AUTH_TOKEN": TOKEN}) as proc:
        wrong_last_byte = TOKEN[:-1] + chr(ord(TOKEN[-1]) + 1)
        for metadata in ([], [("authorization", "Bearer nope")], [("authorization", f"Bearer {wrong_last_byte}")]):
            calls = {
                "Health": lambda metadata=metadata: proc.stub.Health(backend_pb2.HealthMessage(), metadata=metadata, timeout=30),
                "LoadModel": lambda metadata=metadata: proc.stub.LoadModel(
                    backend_pb2.ModelOptions(Model="a", ModelPath=str(model_dir)), metadata=metadata, timeout=30),
                "Embedding": lambda metadata=metadata: proc.stub.Embedding(
                    backend_pb2.PredictOptions(Embeddings="x"), metadata=metadata, timeout=30),
            }
            for name, call in calls.items():
                assert code_of(call) == grpc.StatusCode.UNAUTHENTICATED, (name, metadata)
        assert load(proc, model_dir).success
        reply = proc.stub.Embedding(backend_pb2.PredictOptions(Embeddings="hello"), metadata=proc.metadata, timeout=60)
        assert len(reply.embeddings) == 384
        output = proc.output()
    assert TOKEN not in output and TOKEN not in proc.log.read_text()


def test_no_token_means_no_authentication(model_dir):
    with BackendProcess("minilm-ggml", env={"LOCALAI_GRPC_AUTH_TOKEN": ""}) as proc:
        assert load(proc, model_dir).success
        assert proc.stub.Embedding(backend_pb2.PredictOptions(Embeddings="x"), timeout=60).embeddings


def test_model_identity_is_checked_on_guarded_rpcs(model_dir):
    with BackendProcess("minilm-ggml") as proc:
        assert load(proc, model_dir, "a").success
        with pytest.raises(grpc.RpcError) as info:
            proc.stub.Embedding(backend_pb2.PredictOptions(Embeddings="x", ModelIdentity="b"), timeout=30)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        assert "model identity mismatch" in info.value.details()
        for identity in ("a", ""):
            assert proc.stub.Embedding(backend_pb2.PredictOptions(Embeddings="x", ModelIdentity=identity), timeout=30).embeddings
        # A new LoadModel records the new identity.
        assert load(proc, model_dir, "b").success
        assert proc.stub.Embedding(backend_pb2.PredictOptions(Embeddings="x", ModelIdentity="b"), timeout=30).embeddings
        assert code_of(lambda: proc.stub.Embedding(
            backend_pb2.PredictOptions(Embeddings="x", ModelIdentity="a"), timeout=30)) == grpc.StatusCode.NOT_FOUND


def backend_pid(launcher_pid: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        children = Path(f"/proc/{launcher_pid}/task/{launcher_pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise TimeoutError("run.sh never started")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_backend_exits_when_its_parent_is_killed():
    proc = BackendProcess("minilm-ggml", env=WATCH_FAST, launcher=LAUNCHER)
    try:
        proc.wait_healthy()
        pid = backend_pid(proc.proc.pid)
        os.kill(proc.proc.pid, signal.SIGKILL)  # LocalAI dies without stopping its backends
        proc.proc.wait()
        deadline = time.monotonic() + 60
        while alive(pid):
            assert time.monotonic() < deadline, f"backend {pid} outlived its parent:\n{proc.output()}"
            time.sleep(0.1)
        assert "parent process" in proc.output()
    finally:
        proc.stop()


def test_with_the_watch_off_the_orphan_keeps_serving():
    proc = BackendProcess("minilm-ggml", env={**WATCH_FAST, "LOCALAI_BACKEND_PARENT_WATCH": "off"}, launcher=LAUNCHER)
    pid = None
    try:
        proc.wait_healthy()
        pid = backend_pid(proc.proc.pid)
        os.kill(proc.proc.pid, signal.SIGKILL)
        proc.proc.wait()
        time.sleep(1.5)  # several watch intervals: a watch that wrongly ran would have fired
        assert alive(pid)
        assert proc.stub.Health(backend_pb2.HealthMessage(), timeout=30).message == b"OK"
    finally:
        if pid and alive(pid):
            os.kill(pid, signal.SIGTERM)
        proc.stop()


CLEAN = {grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION}


def hammer(proc: BackendProcess, reload, request, rounds: int = 15, threads: int = 4) -> dict:
    """Threads call Embedding while another loops Free/LoadModel; returns status counts."""
    stop = threading.Event()
    counts: dict = {}
    lock = threading.Lock()

    def note(code):
        with lock:
            counts[code] = counts.get(code, 0) + 1

    def embed():
        while not stop.is_set():
            try:
                proc.stub.Embedding(request, timeout=120)
                note(grpc.StatusCode.OK)
            except grpc.RpcError as exc:
                note(exc.code())

    workers = [threading.Thread(target=embed) for _ in range(threads)]
    for t in workers:
        t.start()
    try:
        for _ in range(rounds):
            proc.stub.Free(backend_pb2.HealthMessage(), timeout=120)
            assert reload().success
    finally:
        stop.set()
        for t in workers:
            t.join(120)
    assert proc.proc.poll() is None, f"the server died:\n{proc.output()}"
    assert proc.stub.Health(backend_pb2.HealthMessage(), timeout=30).message == b"OK"
    return counts


@pytest.mark.parametrize("workers", ["1", "4"])
def test_native_engine_survives_free_and_load_under_load(model_dir, workers):
    with BackendProcess("minilm-ggml", env={"PYTHON_GRPC_MAX_WORKERS": workers}) as proc:
        assert load(proc, model_dir).success
        texts = ["a sentence to embed, long enough to keep the engine busy " * 8] * 8
        counts = hammer(proc, lambda: load(proc, model_dir), backend_pb2.PredictOptions(Embeddings=texts[0]))
    assert set(counts) <= {grpc.StatusCode.OK} | CLEAN, counts
    assert counts.get(grpc.StatusCode.OK, 0) > 0, counts


def test_python_backend_survives_free_and_load_under_load():
    with BackendProcess("rerankers", env={"PYTHON_GRPC_MAX_WORKERS": "2"}) as proc:
        def reload():
            return proc.stub.LoadModel(
                backend_pb2.ModelOptions(Model=str(minilm_dir()), Type="SentenceTransformer"), timeout=300)

        assert reload().success
        counts = hammer(proc, reload, backend_pb2.PredictOptions(Embeddings="hello world"), rounds=5)
    assert set(counts) <= {grpc.StatusCode.OK} | CLEAN, counts
    assert counts.get(grpc.StatusCode.OK, 0) > 0, counts
