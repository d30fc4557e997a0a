"""Coverage-guided fuzzing of the C ABI with atheris (libFuzzer), through ctypes.

  pants package engines/minilm:fuzz        # ggml + engine built with -fsanitize-coverage
  python engines/minilm/fuzz/fuzz_abi.py tokenizer dist/engines/minilm/fuzz/libminilm.so MODEL.gguf -max_total_time=60 CORPUS/
  python engines/minilm/fuzz/fuzz_abi.py gguf      dist/engines/minilm/fuzz/libminilm.so MODEL.gguf -max_total_time=60 CORPUS/

The instrumented library calls libFuzzer's __sanitizer_cov_* hooks, which atheris' bundled
libFuzzer provides; they must be global symbols before the library loads, so the script re-executes
itself with that libFuzzer in LD_PRELOAD. libFuzzer then steers mutation by the C++ code's edge
coverage and comparison operands (its "Loaded N modules (M inline 8-bit counters)" line shows the
library's counters). A plain library also works, as uninstrumented mutation fuzzing.
A crash in the library kills the process and libFuzzer reports it; a broken invariant raises.
tokenizer: arbitrary bytes -> minilm_tokenize (ids CLS..SEP, in vocabulary range, length <= 512;
  a too-small buffer must be an error with the needed size).
gguf: the real model's header (key/values, vocabulary, tensor infos; no tensor data) with 1-16
  byte edits, truncated, plus a random tail, written to a file -> minilm_init_from_file must
  return NULL with BAD_FORMAT or WRONG_ARCH.
"""
from __future__ import annotations

import ctypes
import os
import sys
import sysconfig
import tempfile

import atheris

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))  # the repo root
from engines.minilm.binding import CODE, Library, MinilmError  # noqa: E402 (after the sys.path setup above)

LIBFUZZER = os.path.join(os.path.dirname(atheris.__file__), "core_with_libfuzzer" + sysconfig.get_config_var("EXT_SUFFIX"))


def ensure_libfuzzer_preloaded():
    if LIBFUZZER not in os.environ.get("LD_PRELOAD", "").split(":"):
        env = dict(os.environ, LD_PRELOAD=":".join(p for p in (LIBFUZZER, os.environ.get("LD_PRELOAD")) if p))
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def tokenizer_target(lib: Library, model_path: str):
    model = lib.load(model_path, max_tokens=512)

    def one(data: bytes):
        b = data.replace(b"\x00", b"")  # the ABI takes NUL-terminated strings
        ids = model.tokenize(b)
        assert ids[0] == 101 and ids[-1] == 102 and 2 <= len(ids) <= 512, ids[:5]
        assert all(0 <= i < 30522 for i in ids)
        if len(b) < 64:  # the second call halves the exec rate: short inputs only
            n = ctypes.c_int32(0)
            st = lib.lib.minilm_tokenize(model.ctx, b, (ctypes.c_int32 * 1)(), 1, ctypes.byref(n))
            assert st == CODE["MINILM_ERR_INVALID_ARGUMENT"] and n.value == len(ids), (st, n.value)

    return one


def gguf_target(lib: Library, model_path: str):
    import gguf

    # Everything before the tensor data: key/values, vocabulary, tensor infos.
    with open(model_path, "rb") as f:
        seed = f.read(gguf.GGUFReader(model_path).data_offset)
    regions = [(0, 4096), (len(seed) - 16384, len(seed)), (0, len(seed))]  # header, tensor infos, anywhere
    fd, path = tempfile.mkstemp(suffix=".gguf")
    os.close(fd)
    expected = {CODE["MINILM_ERR_BAD_FORMAT"], CODE["MINILM_ERR_WRONG_ARCH"]}

    def one(data: bytes):
        fdp = atheris.FuzzedDataProvider(data)
        buf = bytearray(seed)
        for _ in range(fdp.ConsumeIntInRange(1, 16)):
            lo, hi = regions[fdp.ConsumeIntInRange(0, len(regions) - 1)]
            buf[fdp.ConsumeIntInRange(lo, hi - 1)] = fdp.ConsumeIntInRange(0, 255)
        cut = fdp.ConsumeIntInRange(0, len(buf))
        with open(path, "wb") as f:
            f.write(bytes(buf[:cut]) + fdp.ConsumeBytes(256))
        try:
            lib.load(path).close()
        except MinilmError as e:
            assert e.code in expected, e
        else:
            raise AssertionError("a GGUF without tensor data loaded")
        finally:
            os.unlink(path)  # libFuzzer ends the process with exit(): nothing else would remove it

    return one


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("tokenizer", "gguf"):
        raise SystemExit(__doc__)
    ensure_libfuzzer_preloaded()
    mode, lib_path, model_path = sys.argv[1:4]
    lib = Library(lib_path)
    target = (tokenizer_target if mode == "tokenizer" else gguf_target)(lib, model_path)
    atheris.Setup([sys.argv[0], *sys.argv[4:]], target, internal_libfuzzer=True)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
