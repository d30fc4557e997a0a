"""Checks of a user-supplied model file or folder, run before a library sees it.

Libraries answer a bad file with whatever they raise (a Hub lookup error, an onnxruntime status,
a pickle error), which the server could only call INTERNAL. These checks read just the headers a
format defines (magic bytes, the safetensors header, the GGUF key/value section, the top-level
fields of an ONNX protobuf, a zip's central directory, JSON) and raise InvalidArgument naming the
file and the format expected; ``load_failure`` turns what a library still raises into
FailedPrecondition naming the file. No library is imported: this runs before torch loads.
"""

import json
import os
import struct
import zipfile

from .errors import FailedPrecondition, InvalidArgument, NotFound

# What each format is called in messages.
NAMES = {
    "safetensors": "safetensors",
    "gguf": "GGUF",
    "ggml": "ggml (whisper.cpp)",
    "json": "JSON",
    "onnx": "ONNX",
    "zip": "zip (torch.save / .npz)",
    "pickle": "pickle (legacy torch.save)",
    "ctranslate2": "CTranslate2 model.bin",
}
# The format a file of a model folder must be in, by its name's ending (".bin" is checked for
# emptiness only: PyTorch, CTranslate2 and ggml all use it).
BY_SUFFIX = {
    ".json": ("json",),
    ".safetensors": ("safetensors",),
    ".gguf": ("gguf",),
    ".onnx": ("onnx",),
    ".pth": ("zip", "pickle"),
    ".pt": ("zip", "pickle"),
    ".ckpt": ("zip", "pickle"),
    ".npz": ("zip",),
    ".bin": (),
}
GGUF_TYPE_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # 8: string, 9: array


class Corrupt(Exception):
    """A file of the right kind that does not parse; the message says where."""


def sniff(path: str) -> str:
    """The format a file's first bytes announce, or "" when none is recognised."""
    with open(path, "rb") as f:
        head = f.read(16)
    # First: a safetensors file starts with its header's length, whose low byte may be any
    # other format's first byte ("{", 0x80, 0x08); a length with the next byte "{" is no accident.
    if len(head) >= 9 and head[8:9] == b"{" and struct.unpack("<Q", head[:8])[0] <= os.path.getsize(path) - 8:
        return "safetensors"
    if head.startswith(b"GGUF"):
        return "gguf"
    if head.startswith(b"lmgg"):  # ggml's 0x67676d6c, little endian
        return "ggml"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    if head.lstrip()[:1] in (b"{", b"["):
        return "json"
    if len(head) >= 6 and 1 <= struct.unpack("<I", head[:4])[0] <= 16 and 0 < struct.unpack("<H", head[4:6])[0] < 256:
        return "ctranslate2"
    if head[:1] == b"\x08":  # ModelProto field 1 (ir_version), a varint: how ONNX files start
        return "onnx"
    return ""


def _read(f, fmt: str):
    raw = f.read(struct.calcsize(fmt))
    if len(raw) < struct.calcsize(fmt):
        raise Corrupt("it ends inside its header (truncated?)")
    return struct.unpack(fmt, raw)


def _check_safetensors(f, size: int) -> None:
    (n,) = _read(f, "<Q")
    if n > size - 8:
        raise Corrupt(f"its header claims {n} bytes but the file has {size - 8} after the length")
    try:
        header = json.loads(f.read(n))
    except ValueError as exc:
        raise Corrupt(f"its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise Corrupt("its header is not a JSON object")
    end = 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        offsets = t.get("data_offsets") if isinstance(t, dict) else None
        shape = t.get("shape") if isinstance(t, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1] or not isinstance(shape, list)
                or not all(isinstance(d, int) and d >= 0 for d in shape) or not isinstance(t.get("dtype"), str)):
            raise Corrupt(f"its header entry {name!r} is not a tensor (dtype, shape, data_offsets)")
        end = max(end, offsets[1])
    if 8 + n + end != size:
        raise Corrupt(f"its tensors end at byte {8 + n + end} but the file has {size} bytes (truncated?)")


def _skip(f, n: int, size: int) -> None:
    if f.tell() + n > size:
        raise Corrupt("it ends inside its header (truncated?)")
    f.seek(n, os.SEEK_CUR)


def _gguf_value(f, kind: int, size: int, depth: int = 0) -> None:
    if kind in GGUF_TYPE_SIZES:
        _skip(f, GGUF_TYPE_SIZES[kind], size)
    elif kind == 8:
        _skip(f, _read(f, "<Q")[0], size)
    elif kind == 9 and depth == 0:
        item, count = _read(f, "<IQ")
        if item in GGUF_TYPE_SIZES:
            _skip(f, GGUF_TYPE_SIZES[item] * count, size)
        else:
            for _ in range(min(count, size)):
                _gguf_value(f, item, size, depth + 1)
    else:
        raise Corrupt(f"a metadata value has unknown type {kind}")


def _check_gguf(f, size: int) -> None:
    magic, version = _read(f, "<4sI")
    if version not in (2, 3):
        raise Corrupt(f"its version is {version} (GGUF files are version 2 or 3)")
    tensors, kvs = _read(f, "<QQ")
    if tensors > size or kvs > size:
        raise Corrupt(f"it claims {tensors} tensors and {kvs} metadata keys in {size} bytes")
    for _ in range(kvs):
        _skip(f, _read(f, "<Q")[0], size)
        _gguf_value(f, _read(f, "<I")[0], size)
    for _ in range(tensors):
        _skip(f, _read(f, "<Q")[0], size)
        _skip(f, 8 * _read(f, "<I")[0] + 4 + 8, size)


def _varint(f) -> int:
    value = shift = 0
    while True:
        byte = f.read(1)
        if not byte:
            raise Corrupt("it ends inside a protobuf field (truncated?)")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
        if shift > 63:
            raise Corrupt("it holds a malformed protobuf varint")


def _check_onnx(f, size: int) -> None:
    """Walks the top-level fields of ModelProto (varints and length-delimited only); a graph
    (field 7) must be there and the last field must end exactly at the end of the file."""
    seen = set()
    while f.tell() < size:
        tag = _varint(f)
        number, wire = tag >> 3, tag & 7
        if number == 0 or number > 100 or wire not in (0, 2):
            raise Corrupt(f"byte {f.tell()} is not a ModelProto field")
        if wire == 0:
            _varint(f)
        else:
            _skip(f, _varint(f), size)
        seen.add(number)
    if 7 not in seen:
        raise Corrupt("it has no graph")


def _check_zip(path: str) -> None:
    try:
        with zipfile.ZipFile(path) as z:
            z.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise Corrupt(f"its zip directory is unreadable ({exc}; truncated?)") from None


def _check_json(path: str) -> None:
    try:
        with open(path, "rb") as f:
            json.load(f)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Corrupt(f"it is not valid JSON ({exc})") from None


def _check_ctranslate2(f, size: int) -> None:
    version, n = _read(f, "<IH")
    name = f.read(n)
    if len(name) < n or not name.endswith(b"\0") or not name[:-1].isascii():
        raise Corrupt("its model spec name is unreadable (truncated?)")


def _validate(path: str, kind: str) -> None:
    if kind == "zip":
        return _check_zip(path)
    if kind == "json":
        return _check_json(path)
    size = os.path.getsize(path)
    checks = {"safetensors": _check_safetensors, "gguf": _check_gguf, "onnx": _check_onnx, "ctranslate2": _check_ctranslate2}
    if kind in checks:
        with open(path, "rb") as f:
            checks[kind](f, size)


def _expected(formats) -> str:
    return " or ".join(NAMES[k] for k in formats)


def check_file(path: str, formats, expects: str) -> None:
    """``path`` is a non-empty file in one of ``formats`` whose header parses; else
    InvalidArgument naming the file and ``expects`` (what the backend loads, for the message)."""
    if not os.path.isfile(path):
        raise NotFound(f"model file not found: {path}")
    if os.path.getsize(path) == 0:
        raise InvalidArgument(f"{path} is empty (0 bytes): expected {expects}; the download or copy is incomplete")
    if not formats:
        return
    kind = sniff(path)
    if kind not in formats:
        seen = f"it looks like {NAMES[kind]}" if kind else "its first bytes are no known model format"
        raise InvalidArgument(f"{path} is not {_expected(formats)}: {seen}; expected {expects}")
    try:
        _validate(path, kind)
    except Corrupt as exc:
        raise InvalidArgument(f"{path} is a damaged {NAMES[kind]} file: {exc}; expected {expects}") from None


def check_directory(path: str, expects: str, required=()) -> None:
    """Every file of folder ``path`` (and its subfolders, as diffusers lays out a pipeline) whose
    name ends in a suffix of BY_SUFFIX passes check_file; each of ``required`` exists (checked
    second, so a damaged file is named before a missing one)."""
    for root, dirs, files in os.walk(path, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .git, .cache: not the model
        if root.count(os.sep) - path.rstrip(os.sep).count(os.sep) > 2:
            dirs[:] = []
            continue
        for name in sorted(files):
            suffix = os.path.splitext(name)[1].lower()
            if suffix in BY_SUFFIX:
                check_file(os.path.join(root, name), BY_SUFFIX[suffix], expects)
    for name in required:
        if not os.path.isfile(os.path.join(path, name)):
            raise InvalidArgument(f"{path} has no {name}: expected {expects}")


def check_model(path: str, expects: str, *, file_formats=(), directory: bool = False, required=()) -> None:
    """The check a backend's load() runs on a local ``path``: a file in ``file_formats`` (none:
    a file is refused) or, when ``directory``, a folder passing check_directory."""
    if not os.path.exists(path):
        raise NotFound(f"model not found: {path} does not exist")
    if os.path.isdir(path):
        if not directory:
            raise InvalidArgument(f"{path} is a directory: expected {expects}")
        return check_directory(path, expects, required)
    if not file_formats:
        raise InvalidArgument(f"{path} is a file: expected {expects}")
    check_file(path, file_formats, expects)


def load_failure(path: str, expects: str, exc: BaseException) -> FailedPrecondition:
    """What LoadModel answers when a backend's load() raised something else: the library could
    not use this model. Names the model and what the backend expects; the server prints the
    traceback."""
    what = path or "the backend's default model"
    local = bool(path) and os.path.exists(path)
    fix = (f"check that it is {expects}, complete and readable" if local else
           "it is not a local file or folder, and it could not be had from the Hub (offline, or not there): "
           f"download it and name its local path ({expects})")
    return FailedPrecondition(f"cannot load {what}: {type(exc).__name__}: {exc}; {fix}")
