"""model_files on files written by the formats' own libraries (safetensors, gguf, numpy's .npz)
and on the damaged copies a user may hand LoadModel: each must be refused naming the file."""
import json
import os
import random
import struct

import numpy as np
import pytest

from backends.common.errors import FailedPrecondition, InvalidArgument, NotFound
from backends.common.model_files import check_directory, check_file, check_model, load_failure, sniff

EXPECTS = "a test model"
# ModelProto{ir_version: 8, graph: GraphProto{name: "g"}}, encoded by hand (no onnx package here).
TINY_ONNX = b"\x08\x08" + b"\x3a\x03\x0a\x01g"


def random_bytes(n=4096, seed=1) -> bytes:
    data = bytes(random.Random(seed).getrandbits(8) for _ in range(n))
    return b"\x93" + data[1:]  # a first byte no format starts with: the test does not hang on chance


@pytest.fixture
def good(tmp_path):
    from gguf import GGUFWriter
    from safetensors.numpy import save_file

    files = {}
    files["safetensors"] = tmp_path / "model.safetensors"
    save_file({"w": np.ones((4, 4), np.float32), "b": np.zeros(3, np.float32)}, str(files["safetensors"]))
    files["gguf"] = tmp_path / "model.gguf"
    writer = GGUFWriter(str(files["gguf"]), "llama")
    writer.add_string("general.name", "tiny")
    writer.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])
    writer.add_tensor("w", np.ones((4, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    files["zip"] = tmp_path / "voices.npz"
    np.savez(files["zip"], v=np.ones(3))
    files["json"] = tmp_path / "config.json"
    files["json"].write_text(json.dumps({"model_type": "tiny"}))
    files["onnx"] = tmp_path / "model.onnx"
    files["onnx"].write_bytes(TINY_ONNX)
    files["ctranslate2"] = tmp_path / "model.bin"
    name = b"WhisperSpec\0"
    files["ctranslate2"].write_bytes(struct.pack("<IH", 6, len(name)) + name + struct.pack("<II", 3, 0))
    return files


def test_real_files_pass_and_are_sniffed(good):
    for kind, path in good.items():
        assert sniff(str(path)) == kind, path
        check_file(str(path), (kind,), EXPECTS)


@pytest.mark.parametrize("kind", ["safetensors", "gguf", "zip", "onnx"])
def test_a_truncated_file_is_invalid_argument_naming_it(good, kind):
    path = good[kind]
    data = path.read_bytes()
    path.write_bytes({"gguf": data[:40], "onnx": data[:-2]}.get(kind, data[:-7]))
    with pytest.raises(InvalidArgument, match=rf"{path} is a damaged .*expected {EXPECTS}"):
        check_file(str(path), (kind,), EXPECTS)


@pytest.mark.parametrize(
    "content,problem",
    [
        (b"", r"is empty \(0 bytes\)"),
        (random_bytes(), "is not .*: its first bytes are no known model format"),
        (b"GGUF" + random_bytes(200), "is a damaged GGUF file: its version is"),
        (b"PK\x03\x04" + random_bytes(200), "is a damaged zip"),
    ],
    ids=["empty", "random", "gguf-magic-then-garbage", "zip-magic-then-garbage"],
)
def test_bad_content_is_invalid_argument_naming_the_file_and_the_format(tmp_path, content, problem):
    path = tmp_path / "model.pth"
    path.write_bytes(content)
    with pytest.raises(InvalidArgument, match=rf"{path} {problem}.*expected {EXPECTS}"):
        check_file(str(path), ("zip", "pickle", "gguf"), EXPECTS)


def test_a_file_of_another_format_names_both(good):
    with pytest.raises(InvalidArgument, match=r"model.gguf is not ONNX: it looks like GGUF; expected a test model"):
        check_file(str(good["gguf"]), ("onnx",), EXPECTS)


def test_a_folder_checks_every_file_it_recognises(tmp_path):
    (tmp_path / "unet").mkdir()
    (tmp_path / "model_index.json").write_text("{}")
    (tmp_path / "unet" / "config.json").write_text("not json {")
    with pytest.raises(InvalidArgument, match=r"unet/config.json is not JSON"):
        check_directory(str(tmp_path), EXPECTS)
    (tmp_path / "unet" / "config.json").write_text('{"a": ')
    with pytest.raises(InvalidArgument, match=r"unet/config.json is a damaged JSON file: it is not valid JSON"):
        check_directory(str(tmp_path), EXPECTS)
    (tmp_path / "unet" / "config.json").write_text("{}")
    (tmp_path / "unet" / "model.safetensors").write_bytes(b"")
    with pytest.raises(InvalidArgument, match=r"unet/model.safetensors is empty"):
        check_directory(str(tmp_path), EXPECTS)
    os.remove(tmp_path / "unet" / "model.safetensors")
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "x.json").write_text("not json")  # not the model's: skipped
    check_directory(str(tmp_path), EXPECTS)
    with pytest.raises(InvalidArgument, match=rf"{tmp_path} has no tokenizer.json: expected {EXPECTS}"):
        check_directory(str(tmp_path), EXPECTS, required=["tokenizer.json"])


def test_check_model_refuses_the_wrong_kind_of_path(tmp_path, good):
    with pytest.raises(NotFound, match=str(tmp_path / "absent")):
        check_model(str(tmp_path / "absent"), EXPECTS, directory=True)
    with pytest.raises(InvalidArgument, match=rf"{tmp_path} is a directory: expected {EXPECTS}"):
        check_model(str(tmp_path), EXPECTS, file_formats=("onnx",))
    with pytest.raises(InvalidArgument, match=rf"config.json is a file: expected {EXPECTS}"):
        check_model(str(good["json"]), EXPECTS, directory=True)
    check_model(str(good["onnx"]), EXPECTS, file_formats=("onnx",))


def test_load_failure_names_the_model_and_the_fix(tmp_path):
    err = load_failure(str(tmp_path), EXPECTS, ValueError("bad weights"))
    assert isinstance(err, FailedPrecondition)
    assert err.message == f"cannot load {tmp_path}: ValueError: bad weights; check that it is {EXPECTS}, complete and readable"
    err = load_failure("org/model", EXPECTS, OSError("offline"))
    assert "cannot load org/model: OSError: offline; it is not a local file or folder" in err.message
    assert "the backend's default model" in load_failure("", EXPECTS, OSError("x")).message


@pytest.mark.parametrize(
    "header", [b'{"a": 1}', b"[1, 2]", b'{"t": {"dtype": "F16", "shape": "x", "data_offsets": [0, 4]}}'],
    ids=["not-a-tensor", "a-list", "bad-shape"],
)
def test_a_safetensors_header_of_the_wrong_json_types_is_invalid_argument(tmp_path, header):
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    with pytest.raises(InvalidArgument, match=r"m.safetensors is (a damaged safetensors file|not safetensors)"):
        check_file(str(path), ("safetensors",), EXPECTS)


@pytest.mark.parametrize("length", [0x7B, 0x0280, 0x0108], ids=["brace", "pickle-like", "onnx-like"])
def test_a_safetensors_header_length_that_looks_like_another_format_is_still_safetensors(tmp_path, length):
    header = json.dumps({"__metadata__": {"pad": ""}}).encode()
    header = header[:-3] + b" " * (length - len(header)) + header[-3:]  # padded to `length` bytes
    path = tmp_path / "m.safetensors"
    path.write_bytes(struct.pack("<Q", length) + header)
    assert sniff(str(path)) == "safetensors"
    check_file(str(path), ("safetensors",), EXPECTS)
