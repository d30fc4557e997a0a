"""A REAPI worker for the tests, and only for the tests: it stands in for buildbox-worker.

No registry reachable here ships a worker (buildbox-worker, Buildbarn's bb_worker, BuildBuddy's
executor), and BuildGrid removed its own Python bots; BuildGrid 0.9.1's server still serves the
Remote Workers API (google.devtools.remoteworkers.v1test2 Bots), which this bot speaks with the
protos from the pinned buildgrid wheel. Run it with that venv's CPython 3.13:

    python reapi_worker.py --server 127.0.0.1:PORT --root DIR --name worker-1 \
        --image IMAGE --caches CACHES

For each lease it fetches the Action, Command and input root from the CAS, materializes the input
root in an empty directory under DIR, runs exactly the Command's arguments with its environment
over the image's (IMAGE_ENV, as a container runtime applies an image's Env; nothing of the
worker's own) in a sandbox, uploads the declared outputs, stdout and stderr, and
completes the lease with the ActionResult. It appends one JSON line per finished action to
DIR/actions.jsonl (what the test counts). Capacity is one lease at a time.

The sandbox (bubblewrap, a mount namespace) shows the action its input root at /worker/exec, the
worker image IMAGE read-only at /opt/localai-worker (the interpreters and wheelhouse the
`worker` environment names, 3rdparty/remote-worker/BUILD), the OS's /usr and /etc read-only (a
worker image's base: bash, coreutils, tar, libc), an empty /tmp, and CACHES at the named-cache
folder of pants.remote.toml. Nothing else of this machine: no home, no /usr/local, no client
folder. The network is shared (the worker reaches PyPI, docs/remote-cache.md).

`python reapi_worker.py probe --server ... -- ARGV` sends one action of its own (an empty input
root) through the Execution service and prints its exit code and stdout as JSON: what the test
uses to look inside the sandbox.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import grpc
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb2
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2_grpc as re_grpc
from buildgrid._protos.google.bytestream import bytestream_pb2, bytestream_pb2_grpc
from buildgrid._protos.google.devtools.remoteworkers.v1test2 import bots_pb2, bots_pb2_grpc, worker_pb2
from buildgrid._protos.google.rpc import code_pb2, status_pb2

# Blobs up to this size travel in batch RPCs; bigger ones through ByteStream (BuildGrid's batch
# requests are capped at 4 MiB).
BATCH_BLOB_LIMIT = 1 << 20
BATCH_TOTAL_LIMIT = 3 << 20
CHUNK = 1 << 20
UPDATE_INTERVAL_S = 2.0
# How long an idle bot's CreateBotSession/UpdateBotSession may wait for work: well under the
# server's bot-session-keepalive-timeout (20 s in execution.yml), which counts from the last
# answer; a longer poll gets the session closed under it.
LONG_POLL_S = 5.0
# Where the sandbox shows an action its input root, the worker image, and the named caches
# (pants.remote.toml's remote_execution_append_only_caches_base_path).
EXEC_ROOT = "/worker/exec"
IMAGE_ROOT = "/opt/localai-worker"
NAMED_CACHES = "/tmp/localai-remote-named-caches"
# The worker image's own environment (an OCI image config's Env), under each Command's: Pants reads
# a remote environment's variables with an `env` action and runs its own tools with that PATH.
IMAGE_ENV = {"PATH": "/usr/bin:/bin"}


def sandboxed(bwrap: str, argv: list[str], exec_root: Path, working_directory: str, image: Path, caches: Path) -> list[str]:
    """`argv` wrapped in bubblewrap: the input root, the worker image, the OS base, nothing else."""
    base = ["--ro-bind", "/usr", "/usr", "--tmpfs", "/usr/local", "--ro-bind", "/etc", "/etc"]
    for top in ("bin", "sbin", "lib", "lib64"):  # merged /usr (Debian 12): links into /usr
        if os.path.islink(f"/{top}"):
            base += ["--symlink", os.readlink(f"/{top}"), f"/{top}"]
        elif os.path.isdir(f"/{top}"):
            base += ["--ro-bind", f"/{top}", f"/{top}"]
    return [
        bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", *base,
        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
        "--ro-bind", str(image), IMAGE_ROOT, "--bind", str(caches), NAMED_CACHES, "--bind", str(exec_root), EXEC_ROOT,
        "--chdir", os.path.join(EXEC_ROOT, working_directory), "--", *argv,
    ]


def digest_of(data: bytes) -> re_pb2.Digest:
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def file_digest(path: Path) -> re_pb2.Digest:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return re_pb2.Digest(hash=h.hexdigest(), size_bytes=path.stat().st_size)


class Cas:
    """The CAS client: reads into a per-worker blob cache (hard links into each input root)."""

    def __init__(self, channel: grpc.Channel, instance: str, cache: Path):
        self.cas = re_grpc.ContentAddressableStorageStub(channel)
        self.bytestream = bytestream_pb2_grpc.ByteStreamStub(channel)
        self.instance = instance
        self.cache = cache
        cache.mkdir(parents=True, exist_ok=True)

    def _resource(self, d: re_pb2.Digest) -> str:
        prefix = f"{self.instance}/" if self.instance else ""
        return f"{prefix}blobs/{d.hash}/{d.size_bytes}"

    def read(self, d: re_pb2.Digest) -> bytes:
        if d.size_bytes == 0:
            return b""
        if d.size_bytes <= BATCH_BLOB_LIMIT:
            resp = self.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(instance_name=self.instance, digests=[d]))
            r = resp.responses[0]
            if r.status.code != code_pb2.OK:
                raise RuntimeError(f"CAS read {d.hash}/{d.size_bytes}: {r.status.message}")
            return r.data
        return b"".join(c.data for c in self.bytestream.Read(bytestream_pb2.ReadRequest(resource_name=self._resource(d))))

    def fetch_files(self, digests: list[re_pb2.Digest]) -> None:
        """Puts every missing blob into the cache (batched when small)."""
        missing = {d.hash: d for d in digests if not (self.cache / d.hash).exists()}
        small = [d for d in missing.values() if d.size_bytes <= BATCH_BLOB_LIMIT]
        for d in missing.values():
            if d.size_bytes > BATCH_BLOB_LIMIT:
                self._store(d, self.read(d))
        batch: list[re_pb2.Digest] = []
        total = 0
        for d in small + [None]:
            if d is None or total + d.size_bytes > BATCH_TOTAL_LIMIT:
                if batch:
                    resp = self.cas.BatchReadBlobs(re_pb2.BatchReadBlobsRequest(instance_name=self.instance, digests=batch))
                    for r in resp.responses:
                        if r.status.code != code_pb2.OK:
                            raise RuntimeError(f"CAS read {r.digest.hash}: {r.status.message}")
                        self._store(r.digest, r.data)
                batch, total = [], 0
            if d is not None:
                batch.append(d)
                total += d.size_bytes

    def _store(self, d: re_pb2.Digest, data: bytes) -> None:
        if hashlib.sha256(data).hexdigest() != d.hash:
            raise RuntimeError(f"CAS returned corrupt blob for {d.hash}")
        tmp = self.cache / f".{d.hash}.{uuid.uuid4().hex}"
        tmp.write_bytes(data)
        tmp.chmod(0o444)
        os.replace(tmp, self.cache / d.hash)

    def get_tree(self, root: re_pb2.Digest) -> dict[str, re_pb2.Directory]:
        if root.size_bytes == 0:
            return {root.hash: re_pb2.Directory()}
        dirs: dict[str, re_pb2.Directory] = {}
        for page in self.cas.GetTree(re_pb2.GetTreeRequest(instance_name=self.instance, root_digest=root)):
            for directory in page.directories:
                dirs[digest_of(directory.SerializeToString()).hash] = directory
        return dirs

    def upload(self, blobs: dict[str, bytes], files: dict[str, Path]) -> None:
        """Uploads in-memory blobs and files (by digest hash) that the CAS does not have."""
        sizes = {h: len(b) for h, b in blobs.items()} | {h: p.stat().st_size for h, p in files.items()}
        wanted = [re_pb2.Digest(hash=h, size_bytes=s) for h, s in sizes.items()]
        if not wanted:
            return
        missing = self.cas.FindMissingBlobs(
            re_pb2.FindMissingBlobsRequest(instance_name=self.instance, blob_digests=wanted)
        ).missing_blob_digests
        batch: list[re_pb2.BatchUpdateBlobsRequest.Request] = []
        total = 0

        def flush() -> None:
            if batch:
                resp = self.cas.BatchUpdateBlobs(re_pb2.BatchUpdateBlobsRequest(instance_name=self.instance, requests=batch))
                for r in resp.responses:
                    if r.status.code != code_pb2.OK:
                        raise RuntimeError(f"CAS write {r.digest.hash}: {r.status.message}")

        for d in missing:
            data = blobs[d.hash] if d.hash in blobs else None
            if d.size_bytes > BATCH_BLOB_LIMIT:
                self._write_stream(d, data if data is not None else files[d.hash])
                continue
            if total + d.size_bytes > BATCH_TOTAL_LIMIT:
                flush()
                batch, total = [], 0
            if data is None:
                data = files[d.hash].read_bytes()
            batch.append(re_pb2.BatchUpdateBlobsRequest.Request(digest=d, data=data))
            total += d.size_bytes
        flush()

    def _write_stream(self, d: re_pb2.Digest, source: bytes | Path) -> None:
        prefix = f"{self.instance}/" if self.instance else ""
        name = f"{prefix}uploads/{uuid.uuid4()}/blobs/{d.hash}/{d.size_bytes}"

        def chunks():
            offset = 0
            f = source.open("rb") if isinstance(source, Path) else None
            try:
                while True:
                    data = f.read(CHUNK) if f else source[offset : offset + CHUNK]
                    last = offset + len(data) >= d.size_bytes
                    yield bytestream_pb2.WriteRequest(resource_name=name, write_offset=offset, data=data, finish_write=last)
                    offset += len(data)
                    if last:
                        return
            finally:
                if f:
                    f.close()

        self.bytestream.Write(chunks())


def materialize(cas: Cas, root: re_pb2.Digest, dest: Path) -> None:
    dirs = cas.get_tree(root)
    files: list[re_pb2.Digest] = [f.digest for d in dirs.values() for f in d.files]
    cas.fetch_files(files)

    def build(directory: re_pb2.Directory, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        for f in directory.files:
            target = path / f.name
            blob = cas.cache / f.digest.hash
            if f.digest.size_bytes == 0:
                target.touch()
            else:
                # A private copy: an action may write to its inputs, which must not touch the cache.
                shutil.copyfile(blob, target)
            target.chmod(0o755 if f.is_executable else 0o644)
        for s in directory.symlinks:
            os.symlink(s.target, path / s.name)
        for sub in directory.directories:
            build(dirs[sub.digest.hash], path / sub.name)

    build(dirs[root.hash], dest)


class Outputs:
    """Collects output files/directories as REAPI messages plus the blobs to upload."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.files: dict[str, Path] = {}

    def add_file(self, path: Path) -> re_pb2.Digest:
        d = file_digest(path)
        self.files[d.hash] = path
        return d

    def add_blob(self, data: bytes) -> re_pb2.Digest:
        d = digest_of(data)
        self.blobs[d.hash] = data
        return d

    def directory(self, path: Path, children: list[re_pb2.Directory]) -> re_pb2.Directory:
        out = re_pb2.Directory()
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            p = Path(entry.path)
            if entry.is_symlink():
                out.symlinks.add(name=entry.name, target=os.readlink(p))
            elif entry.is_dir():
                child = self.directory(p, children)
                children.append(child)
                out.directories.add(name=entry.name, digest=digest_of(child.SerializeToString()))
            elif entry.is_file():
                executable = bool(p.stat().st_mode & stat.S_IXUSR)
                out.files.add(name=entry.name, digest=self.add_file(p), is_executable=executable)
        return out


def collect(command: re_pb2.Command, workdir: Path, result: re_pb2.ActionResult, outputs: Outputs) -> None:
    paths = list(command.output_paths) or [*command.output_files, *command.output_directories]
    for rel in paths:
        p = workdir / rel
        if p.is_symlink():
            target = os.readlink(p)
            (result.output_directory_symlinks if p.is_dir() else result.output_file_symlinks).add(path=rel, target=target)
        elif p.is_dir():
            children: list[re_pb2.Directory] = []
            root = outputs.directory(p, children)
            tree = re_pb2.Tree(root=root, children=children)
            result.output_directories.add(path=rel, tree_digest=outputs.add_blob(tree.SerializeToString()))
        elif p.is_file():
            executable = bool(p.stat().st_mode & stat.S_IXUSR)
            result.output_files.add(path=rel, digest=outputs.add_file(p), is_executable=executable)


class Worker:
    def __init__(self, server: str, root: Path, name: str, image: Path, caches: Path, bwrap: str,
                 instance: str = "", client_paths: tuple[str, ...] = ()):
        self.image, self.caches, self.bwrap = image, caches, bwrap
        self.channel = grpc.insecure_channel(
            server, options=[("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
        )
        self.bots = bots_pb2_grpc.BotsStub(self.channel)
        self.root = root
        self.name = name
        self.instance = instance
        self.cas = Cas(self.channel, instance, root / "cas")
        self.log = (root / "actions.jsonl").open("a", buffering=1)
        self.done: dict[str, tuple[re_pb2.ActionResult, status_pb2.Status]] = {}
        self.running: dict[str, threading.Thread] = {}
        self.client_paths = client_paths
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def session(self) -> bots_pb2.BotSession:
        worker = worker_pb2.Worker(
            devices=[worker_pb2.Device(handle=self.name, properties=[
                worker_pb2.Device.Property(key="OSFamily", value="linux"),
            ])],
            configs=[worker_pb2.Worker.Config(key="capacity", value="1")],
        )
        return bots_pb2.BotSession(bot_id=f"{self.name}-{uuid.uuid4().hex[:8]}", status=bots_pb2.BotStatus.OK, worker=worker)

    def open_session(self) -> bots_pb2.BotSession:
        while True:
            try:
                # A fresh bot_id each time: BuildGrid refuses one id in two sessions.
                return self.bots.CreateBotSession(
                    bots_pb2.CreateBotSessionRequest(parent=self.instance, bot_session=self.session()), timeout=LONG_POLL_S
                )
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                    raise
                time.sleep(0.5)

    def serve(self) -> None:
        session = self.open_session()
        print(f"{self.name}: session {session.name}", flush=True)
        while True:
            for lease in session.leases:
                with self.lock:
                    if lease.id in self.done:
                        result, status = self.done[lease.id]
                        lease.state = bots_pb2.LeaseState.COMPLETED
                        lease.status.CopyFrom(status)
                        lease.result.Pack(result)
                    elif lease.id not in self.running and lease.state in (bots_pb2.LeaseState.PENDING, bots_pb2.LeaseState.ACTIVE):
                        lease.state = bots_pb2.LeaseState.ACTIVE
                        t = threading.Thread(target=self.run_lease, args=(lease.id, lease.payload), daemon=True)
                        self.running[lease.id] = t
                        t.start()
            reported = {l.id for l in session.leases if l.state == bots_pb2.LeaseState.COMPLETED}
            try:
                session = self.bots.UpdateBotSession(
                    bots_pb2.UpdateBotSessionRequest(name=session.name, bot_session=session), timeout=LONG_POLL_S
                )
            except grpc.RpcError as e:
                if e.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
                    time.sleep(0.5)
                    continue
                # BuildGrid closed the session (it missed the keepalive): its leases are queued again
                # for other bots, so drop them here and start over.
                print(f"{self.name}: session lost ({e.code().name}: {e.details()}); opening a new one", flush=True)
                with self.lock:
                    self.done.clear()
                    self.running.clear()
                session = self.open_session()
                continue
            with self.lock:
                for lease_id in reported:
                    self.done.pop(lease_id, None)
                    self.running.pop(lease_id, None)
            if self.running and not self.done:
                # While an action runs the server answers at once (the bot is at capacity): report
                # every few seconds to keep the session alive, and at once when the action ends.
                self.finished.wait(UPDATE_INTERVAL_S)
                self.finished.clear()

    def run_lease(self, lease_id: str, payload) -> None:
        start = time.monotonic()
        result = re_pb2.ActionResult()
        status = status_pb2.Status(code=code_pb2.OK)
        argv: list[str] = []
        env: dict[str, str] = {}
        command = re_pb2.Command()
        action_digest = ""
        try:
            action = re_pb2.Action()
            if payload.Is(re_pb2.Action.DESCRIPTOR):
                payload.Unpack(action)
            else:
                d = re_pb2.Digest()
                payload.Unpack(d)
                action.ParseFromString(self.cas.read(d))
            action_digest = digest_of(action.SerializeToString()).hash
            command.ParseFromString(self.cas.read(action.command_digest))
            argv = list(command.arguments)
            exec_root = self.root / "work" / uuid.uuid4().hex
            materialize(self.cas, action.input_root_digest, exec_root)
            (self.root / "running.json").write_text(json.dumps({"lease": lease_id, "action": action_digest, "argv": argv}))
            workdir = exec_root / command.working_directory
            for rel in [*command.output_files, *command.output_directories, *command.output_paths]:
                (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
            env = {**IMAGE_ENV, **{v.name: v.value for v in command.environment_variables}}
            timeout = action.timeout.seconds or None
            try:
                box = sandboxed(self.bwrap, argv, exec_root, command.working_directory, self.image, self.caches)
                proc = subprocess.run(box, cwd=workdir, env=env, capture_output=True, timeout=timeout,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
                result.exit_code = proc.returncode
                stdout, stderr = proc.stdout, proc.stderr
            except subprocess.TimeoutExpired as e:
                status = status_pb2.Status(code=code_pb2.DEADLINE_EXCEEDED, message=f"timed out after {timeout} s")
                result.exit_code = -1
                stdout, stderr = e.stdout or b"", e.stderr or b""
            except OSError as e:
                # e.g. argv[0] missing on this worker: an answer for Pants, not a dead lease.
                result.exit_code = 127
                stdout, stderr = b"", f"reapi_worker: cannot execute {argv[:1]}: {e}\n".encode()
            outputs = Outputs()
            result.stdout_digest.CopyFrom(outputs.add_blob(stdout))
            result.stderr_digest.CopyFrom(outputs.add_blob(stderr))
            if status.code == code_pb2.OK:
                collect(command, workdir, result, outputs)
            self.cas.upload(outputs.blobs, outputs.files)
            shutil.rmtree(exec_root, ignore_errors=True)
        except Exception as e:  # reported to BuildGrid, which retries INTERNAL
            status = status_pb2.Status(code=code_pb2.INTERNAL, message=f"{type(e).__name__}: {e}")
        (self.root / "running.json").unlink(missing_ok=True)
        record = {
            "worker": self.name, "lease": lease_id, "action": action_digest, "argv": argv[:4],
            "exit_code": result.exit_code, "status": status.code, "message": status.message,
            "seconds": round(time.monotonic() - start, 3),
        }
        # Paths of the client machine that the action names (it reads them from the worker's disk,
        # which works only where worker and client share one).
        text = "\0".join([*argv, *env.values()])
        record["client_paths"] = sorted({p for p in self.client_paths if p in text})
        record["env_names"] = sorted(env)
        if result.exit_code != 0 or status.code != code_pb2.OK:
            # Enough to rerun a failed action by hand.
            record.update(argv=argv, env=env, workdir=command.working_directory)
        self.log.write(json.dumps(record) + "\n")
        with self.lock:
            if lease_id in self.running:  # not a lease of a session already lost
                self.done[lease_id] = (result, status)
        self.finished.set()


def probe(server: str, instance: str, argv: list[str]) -> dict:
    """Runs `argv` as an action of its own on the cluster's workers: its digest, exit code, stdout and stderr."""
    channel = grpc.insecure_channel(server)
    outputs = Outputs()
    command = re_pb2.Command(arguments=argv, platform=re_pb2.Platform(properties=[re_pb2.Platform.Property(name="OSFamily", value="linux")]))
    action = re_pb2.Action(command_digest=outputs.add_blob(command.SerializeToString()),
                           input_root_digest=outputs.add_blob(re_pb2.Directory().SerializeToString()), do_not_cache=True)
    action_digest = outputs.add_blob(action.SerializeToString())
    cas = Cas(channel, instance, Path(os.environ.get("TMPDIR", "/tmp")) / f"probe-{uuid.uuid4().hex}")
    cas.upload(outputs.blobs, outputs.files)
    operations = re_grpc.ExecutionStub(channel).Execute(
        re_pb2.ExecuteRequest(instance_name=instance, action_digest=action_digest, skip_cache_lookup=True), timeout=300
    )
    *_, done = operations  # the stream ends with the finished operation
    response = re_pb2.ExecuteResponse()
    done.response.Unpack(response)
    result = {"action": action_digest.hash, "exit_code": response.result.exit_code, "status": response.status.code,
              "stdout": cas.read(response.result.stdout_digest).decode(), "stderr": cas.read(response.result.stderr_digest).decode()}
    shutil.rmtree(cas.cache, ignore_errors=True)
    return result


def main() -> None:
    if sys.argv[1:2] == ["probe"]:
        parser = argparse.ArgumentParser(description="Sends one action and prints its result as JSON.")
        parser.add_argument("--server", required=True)
        parser.add_argument("--instance", default="")
        parser.add_argument("argv", nargs="+")
        args = parser.parse_args(sys.argv[2:])
        print(json.dumps(probe(args.server, args.instance, args.argv)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="host:port of BuildGrid's Bots service")
    parser.add_argument("--root", required=True, type=Path, help="this worker's own working root")
    parser.add_argument("--name", required=True)
    parser.add_argument("--instance", default="")
    parser.add_argument("--image", required=True, type=Path, help=f"the worker image, shown read-only at {IMAGE_ROOT}")
    parser.add_argument("--caches", required=True, type=Path, help=f"the worker's named caches, shown at {NAMED_CACHES}")
    parser.add_argument("--bwrap", default="bwrap", help="bubblewrap (Debian package bubblewrap)")
    parser.add_argument("--client-path", action="append", default=[], help="a client path to report when an action names it")
    args = parser.parse_args()
    args.root.mkdir(parents=True, exist_ok=True)
    args.caches.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    Worker(args.server, args.root, args.name, args.image, args.caches, args.bwrap, args.instance, tuple(args.client_path)).serve()


if __name__ == "__main__":
    main()
