import pytest

from backends.common.errors import InvalidArgument, NotFound
from backends.common.paths import join_model_path, looks_like_hub_id, model_file, resolve_model_path


def test_join_relative_and_absolute():
    assert join_model_path("m", "/models") == "/models/m"
    assert join_model_path("/abs/m", "/models") == "/abs/m"
    assert join_model_path("m", "") == "m"


def test_existing_relative_model_is_joined(tmp_path):
    (tmp_path / "tiny").mkdir()
    assert resolve_model_path("tiny", str(tmp_path), environ={}) == str(tmp_path / "tiny")


def test_missing_local_path_names_the_path(tmp_path):
    with pytest.raises(NotFound, match=str(tmp_path / "absent")):
        resolve_model_path("absent", str(tmp_path), environ={})
    with pytest.raises(NotFound):
        resolve_model_path(str(tmp_path / "nope"), "", environ={})


def test_hub_id_passes_through_unless_offline(tmp_path):
    assert resolve_model_path("org/model", str(tmp_path), environ={}) == "org/model"
    with pytest.raises(NotFound):
        resolve_model_path("org/model", str(tmp_path), environ={"HF_HUB_OFFLINE": "1"})
    assert not looks_like_hub_id("../etc")
    assert not looks_like_hub_id("a/b/c")


def test_empty_model_is_invalid():
    with pytest.raises(InvalidArgument):
        resolve_model_path("", "/models", environ={})


def test_model_file_is_the_file_or_the_one_model_in_a_directory(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "README.md").write_text("not a model")
    assert model_file(str(tmp_path / "m.gguf"), (".gguf",), "GGUF model") == str(tmp_path / "m.gguf")
    assert model_file(str(tmp_path), (".gguf",), "GGUF model") == str(tmp_path / "m.gguf")


def test_model_file_refuses_an_ambiguous_directory_and_names_a_missing_file(tmp_path):
    (tmp_path / "a.gguf").write_bytes(b"")
    (tmp_path / "b.gguf").write_bytes(b"")
    with pytest.raises(InvalidArgument, match=r"expected one GGUF model file \(\.gguf\) in the directory, found \['a.gguf', 'b.gguf'\]"):
        model_file(str(tmp_path), (".gguf",), "GGUF model")
    with pytest.raises(NotFound, match="model file not found: .*absent.bin"):
        model_file(str(tmp_path / "absent.bin"), (".bin",), "ggml Whisper model")
