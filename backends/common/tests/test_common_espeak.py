"""backends/common/espeak.py with espeakng_loader and phonemizer's EspeakWrapper faked at their API
(the real ones run in the kitten-tts and kokoro integration tests, from a folder at a deep path)."""
import os
import sys
import types

import pytest

from backends.common import espeak
from backends.common.errors import FailedPrecondition


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    data = tmp_path / ("d" * 150) / "espeak-ng-data"  # past espeak-ng's 160-byte data path buffer
    data.mkdir(parents=True)
    (data / "phontab").write_bytes(b"phonemes")
    lib = tmp_path / "libespeak-ng.so"
    lib.write_bytes(b"")

    class EspeakWrapper:
        library = data_path = "unset"

        @classmethod
        def set_library(cls, path):
            cls.library = path

        @classmethod
        def set_data_path(cls, path):
            cls.data_path = path

    loader = types.SimpleNamespace(get_library_path=lambda: str(lib), get_data_path=lambda: str(data))
    monkeypatch.setitem(sys.modules, "espeakng_loader", loader)
    for name in ("phonemizer", "phonemizer.backend", "phonemizer.backend.espeak"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    class EspeakAPI:  # phonemizer's, which copies the library into a temporary directory
        pass

    monkeypatch.setitem(sys.modules, "phonemizer.backend.espeak.api", types.SimpleNamespace(EspeakAPI=EspeakAPI))
    monkeypatch.setitem(sys.modules, "phonemizer.backend.espeak.wrapper",
                        types.SimpleNamespace(EspeakWrapper=EspeakWrapper, EspeakAPI=EspeakAPI))
    monkeypatch.delenv("ESPEAK_DATA_PATH", raising=False)
    monkeypatch.setattr(espeak, "_data_fd", None)
    yield EspeakWrapper, lib, data
    if espeak._data_fd is not None:
        os.close(espeak._data_fd)


def test_the_folders_library_and_a_short_descriptor_path_to_its_data(fakes) -> None:
    wrapper, lib, data = fakes
    given = espeak.use_bundled_espeak()
    assert len(str(data)) >= espeak.N_PATH_HOME and len(given) < 32
    assert given.startswith("/proc/self/fd/") and os.path.samefile(given, data)
    assert open(os.path.join(given, "phontab"), "rb").read() == b"phonemes"  # espeak-ng's reads go through it
    assert wrapper.library == str(lib)
    # phonemizer passes espeak-ng no path (it would resolve one back to the long path): the
    # environment variable espeak-ng reads then is the one set
    assert wrapper.data_path is None and os.environ["ESPEAK_DATA_PATH"] == given
    assert espeak.use_bundled_espeak() == given  # one descriptor for the process
    # phonemizer's per-backend copy of the library is made in memory
    api = sys.modules["phonemizer.backend.espeak.wrapper"].EspeakAPI
    assert api.__name__ == "EspeakInMemory" and api.__bases__ == (sys.modules["phonemizer.backend.espeak.api"].EspeakAPI,)


def test_a_private_copy_is_a_separate_load_from_an_anonymous_memory_file() -> None:
    import _ctypes  # a shared object this interpreter has loaded already

    (copy, fd), (second, fd2) = espeak.load_private_copy(_ctypes.__file__), espeak.load_private_copy(_ctypes.__file__)
    mapped = [line.split(maxsplit=5)[-1] for line in open("/proc/self/maps") if "/memfd:" in line]
    assert any(m.startswith(f"/memfd:{os.path.basename(_ctypes.__file__)}") for m in mapped), mapped
    assert copy._handle and second._handle != copy._handle and fd != fd2  # separate instances
    os.close(fd), os.close(fd2)


def test_without_proc_the_path_is_passed_and_one_too_long_is_failed_precondition(fakes, monkeypatch, tmp_path) -> None:
    wrapper, lib, data = fakes
    monkeypatch.setattr(espeak, "PROC_FD", str(tmp_path / "no-proc"))
    with pytest.raises(FailedPrecondition, match="shorter path") as e:
        espeak.use_bundled_espeak()
    assert str(data) in e.value.message and "159" in e.value.message
    short = tmp_path / "espeak-ng-data"
    short.mkdir()
    monkeypatch.setitem(sys.modules, "espeakng_loader", types.SimpleNamespace(get_library_path=lambda: str(lib), get_data_path=lambda: str(short)))
    assert espeak.use_bundled_espeak() == str(short)
    assert wrapper.data_path == str(short) and "ESPEAK_DATA_PATH" not in os.environ
    # without /proc, phonemizer keeps its own way of copying the library
    assert sys.modules["phonemizer.backend.espeak.wrapper"].EspeakAPI is sys.modules["phonemizer.backend.espeak.api"].EspeakAPI
