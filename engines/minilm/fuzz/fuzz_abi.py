"""Fuzz the C ABI with atheris (libFuzzer engine, driven from Python through ctypes).

  python engines/minilm/fuzz/fuzz_abi.py tokenizer LIB MODEL.gguf -max_total_time=60
  python engines/minilm/fuzz/fuzz_abi.py gguf      LIB MODEL.gguf -max_total_time=60

The library is not built with sanitizer coverage, so atheris only sees Python-level coverage:
this is mutation fuzzing seeded with real inputs, not coverage-guided fuzzing of the C++ code.
A crash (SIGSEGV/abort) in the library kills the process and libFuzzer reports it.
tokenizer: arbitrary bytes -> minilm_tokenize + minilm_embed (ids must start/end with CLS/SEP).
gguf: the real model's first 64 kB header with mutations, written to a file -> minilm_init_from_file
(must return NULL + an error code).
"""
from __future__ import annotations

import ctypes
import os
import sys
import tempfile

import atheris

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from minilm_ctypes import Lib, MinilmError  # noqa: E402


def main():
    mode, lib_path, model_path = sys.argv[1:4]
    lib = Lib(lib_path)
    libfuzzer_args = [sys.argv[0], *sys.argv[4:]]
    if mode == "tokenizer":
        model = lib.load(model_path, max_tokens=512)

        def one(data: bytes):
            b = data.replace(b"\x00", b"")
            ids = model.tokenize(b)
            assert ids[0] == 101 and ids[-1] == 102 and 2 <= len(ids) <= 512, ids[:5]
            assert all(0 <= i < 30522 for i in ids)
            if len(b) < 64:
                n = ctypes.c_int32(0)
                st = lib.lib.minilm_tokenize(model.ctx, b, (ctypes.c_int32 * 1)(), 1, ctypes.byref(n))
                assert st == 1 and n.value == len(ids)

        atheris.Setup(libfuzzer_args, one)
    else:
        seed = open(model_path, "rb").read(65536)
        tmp = tempfile.NamedTemporaryFile(suffix=".gguf", delete=False)
        tmp.close()

        def one(data: bytes):
            fdp = atheris.FuzzedDataProvider(data)
            buf = bytearray(seed)
            for _ in range(fdp.ConsumeIntInRange(1, 16)):
                buf[fdp.ConsumeIntInRange(0, len(buf) - 1)] = fdp.ConsumeIntInRange(0, 255)
            cut = fdp.ConsumeIntInRange(0, len(buf))
            with open(tmp.name, "wb") as f:
                f.write(bytes(buf[:cut]) + fdp.ConsumeBytes(256))
            try:
                lib.load(tmp.name).close()
            except MinilmError as e:
                assert e.code in (3, 4), e

        atheris.Setup(libfuzzer_args, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
