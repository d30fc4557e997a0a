"""Helpers of the tests that import a LocalAI-style folder into a temporary repository and lock,
package and serve it with real Pants (test_localai_direct_references.py, test_localai_extra_index.py)."""
from __future__ import annotations

import json
from pathlib import Path

from tests.integration.temp_repo import run_pants

# What packaging an imported folder reads besides the build setup (make_temp_repo's `extra`).
IMPORT_SOURCES = ("backends/BUILD", "backends/proto", "backends/localai/common", "3rdparty/grpc-stubs/BUILD", "lockfiles/grpc-stubs.lock")

_BACKEND_PY = '''\
#!/usr/bin/env python3
"""LocalAI's backend.py shape (written for this test): it imports {modules}."""
import argparse
import os
import sys
import time
from concurrent import futures

import backend_pb2
import backend_pb2_grpc
import grpc
{imports}

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from grpc_auth import get_auth_interceptors  # noqa: E402


class BackendServicer(backend_pb2_grpc.BackendServicer):
    def Health(self, request, context):
        return backend_pb2.Reply(message=b"OK")


def serve(address):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1), interceptors=get_auth_interceptors())
    backend_pb2_grpc.add_BackendServicer_to_server(BackendServicer(), server)
    server.add_insecure_port(address)
    server.start()
    print({printed}, flush=True)
    print("Server started. Listening on: " + address, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", default="localhost:50051")
    serve(parser.parse_args().addr)
'''


def backend_py(values: dict[str, str]) -> str:
    """A LocalAI-style backend.py that imports each module and prints `module=<module.attribute>` at start."""
    printed = " + ' ' + ".join(f"'{m}=' + str({m}.{attr})" for m, attr in values.items())
    return _BACKEND_PY.format(
        modules=", ".join(values), imports="\n".join(f"import {m}" for m in values), printed=printed
    )


def pants(repo: Path, *args: str) -> str:
    result = run_pants(repo, *args, timeout=900)
    assert result.returncode == 0, f"./pants {' '.join(args)}:\n{result.stdout[-4000:]}"
    return result.stdout


def read_lock(path: Path) -> dict:
    text = path.read_text()
    return json.loads("\n".join(line for line in text.splitlines() if not line.startswith("//")))


def locked(lock: dict, project: str) -> dict:
    reqs = [r for r in lock["locked_resolves"][0]["locked_requirements"] if r["project_name"] == project]
    assert len(reqs) == 1, f"{project} not locked once: {reqs}"
    return reqs[0]
