"""A backend for the runtime's own tests, served by the real ``serve()``: its model is an
object whose calls can be held open from the test through files, so a test can keep an
inference call in flight for as long as it needs, without timing."""
import os
import sys
import time

from backends.common.errors import InvalidArgument
from backends.common.server import BaseServicer, run
from backends.common.streaming import stream_from_thread
from backends.proto import backend_pb2


class ToyModel:
    def __init__(self, name):
        self.name = name
        self.freed = False


class ToyServicer(BaseServicer):
    allow_empty_model = True

    def resolve_path(self, request):
        return request.Model

    def load(self, request, path):
        return ToyModel(path)

    def unload(self):
        self.model.freed = True

    def Predict(self, request, context):
        model = self.require_model()
        gate = request.Prompt  # "hold:<dir>": announce entry, wait for <dir>/release
        if gate.startswith("hold:"):
            folder = gate[len("hold:"):]
            open(os.path.join(folder, "entered"), "w").close()
            while not os.path.exists(os.path.join(folder, "release")):
                time.sleep(0.01)
        # The model this call leased must still be alive when the call ends.
        return backend_pb2.Reply(message=f"{model.name}:{'freed' if model.freed else 'alive'}".encode())

    def PredictStream(self, request, context):
        """A worker thread's stream (streaming.py): "count:N" streams N pieces; "fail" one, then
        an InvalidArgument; "forever:<dir>" pieces until the stream stops it, which it records
        as <dir>/stopped."""
        self.require_model()
        prompt = request.Prompt

        def work(emit, stop):
            if prompt.startswith("count:"):
                for i in range(int(prompt[len("count:"):])):
                    emit(str(i))
                return
            if prompt == "fail":
                emit("0")
                raise InvalidArgument("the worker refused the prompt")
            folder = prompt[len("forever:"):]
            try:
                while True:
                    emit("x")
                    time.sleep(0.01)
            finally:
                open(os.path.join(folder, "stopped"), "w").close()

        for piece in stream_from_thread(work, context):
            yield backend_pb2.Reply(message=piece.encode())


if __name__ == "__main__":
    sys.exit(run(ToyServicer))
