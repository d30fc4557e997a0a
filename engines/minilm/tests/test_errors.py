"""Bad inputs through the C ABI give error codes, never a crash."""
from __future__ import annotations

import struct

import pytest
from conftest import _convert_module, level_params  # pants: no-infer-dep
from minilm_ctypes import CODE, MinilmError  # pants: no-infer-dep


def load_error(lib, path) -> int:
    with pytest.raises(MinilmError) as e:
        lib.load(path)
    return e.value.code


@pytest.fixture(params=level_params())
def lib(request, libs):
    return libs[request.param]


def test_missing_file(lib, tmp_path):
    assert load_error(lib, tmp_path / "nope.gguf") == CODE["MINILM_ERR_FILE_NOT_FOUND"]
    assert load_error(lib, None) == CODE["MINILM_ERR_INVALID_ARGUMENT"]


@pytest.mark.parametrize("keep", [0, 3, 4, 100, 4096, 1_000_000, -1])
def test_truncated(lib, gguf_models, tmp_path, keep):
    data = gguf_models["q8_0"].read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: (len(data) - 1 if keep == -1 else keep)])
    assert load_error(lib, cut) == CODE["MINILM_ERR_BAD_FORMAT"]


def test_not_gguf(lib, tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"PK\x03\x04 not a gguf at all" * 100)
    assert load_error(lib, p) == CODE["MINILM_ERR_BAD_FORMAT"]


def test_corrupted_header(lib, gguf_models, tmp_path):
    data = bytearray(gguf_models["q8_0"].read_bytes())
    # tensor count and kv count set to absurd values
    data[8:16] = struct.pack("<Q", 2**62)
    p = tmp_path / "bad.gguf"
    p.write_bytes(bytes(data))
    assert load_error(lib, p) == CODE["MINILM_ERR_BAD_FORMAT"]
    data = bytearray(gguf_models["q8_0"].read_bytes())
    data[16:24] = struct.pack("<Q", 2**40)
    p.write_bytes(bytes(data))
    assert load_error(lib, p) == CODE["MINILM_ERR_BAD_FORMAT"]


@pytest.fixture(scope="module")
def unaligned_gguf(tmp_path_factory):
    conv = _convert_module()
    p = tmp_path_factory.mktemp("unaligned") / "unaligned.gguf"
    conv.convert(conv.default_model_dir(), p, "q8_0", alignment=1)
    return p


def test_unaligned_tensor_data(lib, unaligned_gguf):
    # A valid GGUF whose data is not 32-byte aligned cannot be used in place by ggml's CPU buffer
    # (ggml would abort): an error code instead.
    import gguf

    assert gguf.GGUFReader(unaligned_gguf).data_offset % 32 != 0, "test file must be misaligned"
    assert load_error(lib, unaligned_gguf) == CODE["MINILM_ERR_BAD_FORMAT"]


def test_other_architecture(lib, gguf_models, tmp_path):
    import gguf
    import numpy as np

    p = tmp_path / "llama.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert load_error(lib, p) == CODE["MINILM_ERR_WRONG_ARCH"]


def test_bert_with_wrong_shapes(lib, tmp_path):
    import gguf
    import numpy as np

    p = tmp_path / "tiny-bert.gguf"
    w = gguf.GGUFWriter(str(p), "bert")
    for k, v in (("embedding_length", 8), ("attention.head_count", 2), ("block_count", 1),
                 ("feed_forward_length", 16), ("context_length", 16)):
        w.add_uint32(f"bert.{k}", v)
    w.add_float32("bert.attention.layer_norm_epsilon", 1e-12)
    w.add_tokenizer_model("bert")
    w.add_token_list(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
    for key, i in (("cls", 2), ("seperator", 3), ("unknown", 1), ("padding", 0)):
        w.add_uint32(f"tokenizer.ggml.{key}_token_id", i)
    w.add_tensor("token_embd.weight", np.zeros((5, 7), np.float32))  # wrong width
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert load_error(lib, p) == CODE["MINILM_ERR_WRONG_ARCH"]


def test_random_byte_flips_never_crash(lib, gguf_models, tmp_path):
    import random

    base = gguf_models["q8_0"].read_bytes()
    rng = random.Random(1)
    header_end = 400_000  # inside the metadata (vocabulary) region
    for i in range(40):
        data = bytearray(base[: header_end + 4096])  # also truncated: never a full load, fast
        for _ in range(8):
            data[rng.randrange(0, header_end)] = rng.randrange(256)
        p = tmp_path / f"flip{i}.gguf"
        p.write_bytes(bytes(data))
        assert load_error(lib, p) in (CODE["MINILM_ERR_BAD_FORMAT"], CODE["MINILM_ERR_WRONG_ARCH"])


def test_empty_batch_and_big_input(lib, gguf_models):
    model = lib.load(gguf_models["q8_0"])
    st, _ = model.embed_status([])
    assert st == CODE["MINILM_ERR_EMPTY_BATCH"]
    big = ("lorem ipsum " * 9000)[:100_000]
    out = model.embed([big, "x" * 100_000])
    assert out.shape == (2, 384)
    assert len(model.tokenize(big)) == 256
