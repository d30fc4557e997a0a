#!/usr/bin/env python3
"""A LocalAI-style backend written for this repository's tests (not LocalAI's code).

It follows the shape of LocalAI's backend/python/<name>/backend.py on purpose, so that
`./pants localai-import` is exercised on what LocalAI's folders look like: top-level
`import backend_pb2` (stubs generated at install time), the `../common` sys.path insert for
`grpc_auth`, a `grpc.server` with a servicer class, and `serve()` on `--addr`.
It embeds and reranks with sentence-transformers. `replies` (a sibling module) and `ranking`
(a sibling package) are imported by their bare names, as `python backend.py` finds them.
"""
import argparse
import os
import signal
import sys
import time
from concurrent import futures

import backend_pb2
import backend_pb2_grpc
import grpc
import replies
from ranking import ranked

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from grpc_auth import get_auth_interceptors  # noqa: E402 (after the sys.path setup above)

MAX_WORKERS = int(os.environ.get("PYTHON_GRPC_MAX_WORKERS", "1"))


class BackendServicer(backend_pb2_grpc.BackendServicer):
    def __init__(self):
        self.model = None

    def Health(self, request, context):
        return backend_pb2.Reply(message=replies.HEALTHY)

    def LoadModel(self, request, context):
        from sentence_transformers import SentenceTransformer

        try:
            path = request.Model
            if request.ModelPath and not os.path.isabs(path):
                path = os.path.join(request.ModelPath, path)
            self.model = SentenceTransformer(path, device="cpu")
        except Exception as err:
            return backend_pb2.Result(success=False, message=f"Unexpected {err=}, {type(err)=}")
        return backend_pb2.Result(message="Model loaded successfully", success=True)

    def Embedding(self, request, context):
        if self.model is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no model loaded")
        text = request.Embeddings or request.Prompt
        vector = self.model.encode([text])[0]
        return backend_pb2.EmbeddingResult(embeddings=[float(x) for x in vector], dim=len(vector))

    def Rerank(self, request, context):
        if self.model is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no model loaded")
        from sentence_transformers import util

        query = self.model.encode([request.query], normalize_embeddings=True)
        docs = self.model.encode(list(request.documents), normalize_embeddings=True)
        scores = util.cos_sim(query, docs)[0].tolist()
        order = ranked(scores, request.top_n)
        results = [
            backend_pb2.DocumentResult(index=i, text=request.documents[i], relevance_score=scores[i]) for i in order
        ]
        return backend_pb2.RerankResult(results=results)


def serve(address):
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=MAX_WORKERS),
        options=[
            ("grpc.max_message_length", 50 * 1024 * 1024),
            ("grpc.max_send_message_length", 50 * 1024 * 1024),
            ("grpc.max_receive_message_length", 50 * 1024 * 1024),
        ],
        interceptors=get_auth_interceptors(),
    )
    backend_pb2_grpc.add_BackendServicer_to_server(BackendServicer(), server)
    server.add_insecure_port(address)
    server.start()
    print("Server started. Listening on: " + address, file=sys.stderr)

    def signal_handler(sig, frame):
        print("Received termination signal. Shutting down...")
        server.stop(0)
        sys.exit(0)

    signal.signal(signal.SIGINT, signal_handler)
    signal.signal(signal.SIGTERM, signal_handler)
    try:
        while True:
            time.sleep(60 * 60 * 24)
    except KeyboardInterrupt:
        server.stop(0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Run the gRPC server.")
    parser.add_argument("--addr", default="localhost:50051", help="The address to bind the server to.")
    args = parser.parse_args()
    serve(args.addr)
