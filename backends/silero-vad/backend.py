"""LocalAI silero-vad backend: voice activity detection with the Silero VAD ONNX model.

The model is the ``silero_vad.onnx`` shipped inside the ``silero-vad`` PyPI package (found
without importing the package, which would import torch); onnxruntime runs it on CPU.
LoadModel with an empty Model loads that bundled model; a Model path loads another .onnx.
"""

import importlib.util
import os

from backends.common.errors import InvalidArgument, NotFound, require
from backends.common.model_files import check_model
from backends.common.server import BaseServicer, run
from backends.common.vad_segments import speech_segments
from backends.proto import backend_pb2

SAMPLE_RATE = 16000
WINDOW = 512  # samples per model call at 16 kHz
CONTEXT = 64  # samples of the previous window the model expects in front of each window
BUNDLED_MODEL = "silero_vad.onnx"


def bundled_model_path() -> str:
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise NotFound("the silero-vad package is not installed: no bundled model")
    for location in spec.submodule_search_locations:
        candidate = os.path.join(location, "data", BUNDLED_MODEL)
        if os.path.isfile(candidate):
            return candidate
    raise NotFound(f"silero-vad package has no data/{BUNDLED_MODEL}")


class SileroVADServicer(BaseServicer):
    allow_empty_model = True
    model_expects = "a Silero VAD ONNX model (.onnx)"

    def load(self, request, path):
        import numpy
        import onnxruntime  # pants: no-infer-dep (in the backend's own resolve)

        path = path or bundled_model_path()
        if not path.endswith(".onnx"):
            raise InvalidArgument(f"{path} is not an .onnx file: expected {self.model_expects}")
        check_model(path, self.model_expects, file_formats=("onnx",))
        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = max(1, request.Threads or 1)
        self.np = numpy
        self.model_file = path
        return onnxruntime.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])

    def probabilities(self, session, audio):
        np = self.np
        state = np.zeros((2, 1, 128), dtype=np.float32)
        context = np.zeros((1, CONTEXT), dtype=np.float32)
        sr = np.array(SAMPLE_RATE, dtype=np.int64)
        probs = []
        for off in range(0, len(audio), WINDOW):
            chunk = audio[off : off + WINDOW]
            if len(chunk) < WINDOW:
                chunk = np.pad(chunk, (0, WINDOW - len(chunk)))
            x = np.concatenate([context, chunk[None, :]], axis=1)
            out, state = session.run(None, {"input": x, "state": state, "sr": sr})
            context = x[:, -CONTEXT:]
            probs.append(float(out[0][0]))
        return probs

    def VAD(self, request, context):
        require(len(request.audio) > 0, "audio is empty: send 16 kHz mono float samples")
        session = self.require_model()
        audio = self.np.asarray(request.audio, dtype=self.np.float32)
        require(bool(self.np.isfinite(audio).all()), "audio contains NaN or infinite samples")
        probs = self.probabilities(session, audio)
        segs = speech_segments(probs, total_samples=len(audio))
        return backend_pb2.VADResponse(segments=[backend_pb2.VADSegment(start=s, end=e) for s, e in segs])


def main(argv=None):
    run(SileroVADServicer, argv)


if __name__ == "__main__":
    main()
