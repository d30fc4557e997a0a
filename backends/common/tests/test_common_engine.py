"""The native-engine helpers on a real shared library (the C library): load_library applies a
signature table and names what is missing; PackagedLibrary picks a level's file from a package;
EngineServicer loads its engine once and closes each model on unload."""
import ctypes
import ctypes.util
import re
import shutil
import sys

import pytest

from backends.common.engine import EngineServicer, PackagedLibrary
from backends.common.native_library import LibraryLoadError, load_library
from backends.proto import backend_pb2

LIBC = ctypes.util.find_library("c")  # a name the dynamic loader resolves ("libc.so.6")
TABLE = {"strlen": ([ctypes.c_char_p], ctypes.c_size_t), "abs": ([ctypes.c_int], ctypes.c_int)}


def test_load_library_applies_the_table():
    lib = load_library(LIBC, TABLE, "C")
    assert lib.strlen.argtypes == [ctypes.c_char_p] and lib.strlen.restype is ctypes.c_size_t
    assert lib.strlen(b"hello") == 5 and lib.abs(-7) == 7
    with pytest.raises(ctypes.ArgumentError):
        lib.strlen(5)  # the declared argtypes are enforced


def test_a_missing_function_names_the_library_and_the_symbol():
    with pytest.raises(LibraryLoadError, match=r"the whisper\.cpp library does not export no_such_fn_a, no_such_fn_b"):
        load_library(LIBC, {**TABLE, "no_such_fn_b": ([], None), "no_such_fn_a": ([], None)}, "whisper.cpp")


def test_a_missing_file_names_the_path(tmp_path):
    with pytest.raises(LibraryLoadError, match=r"nothing\.so: cannot load the sd library"):
        load_library(tmp_path / "nothing.so", TABLE, "sd")


class Binding:
    """A binding's Library at its API boundary: built from a path, with models to close."""

    loads = 0

    def __init__(self, path, greeting="hi"):
        Binding.loads += 1
        self.path, self.greeting = path, greeting
        self.lib = load_library(path, TABLE, "C")

    def load(self, model):
        return Model(model)


class Model:
    def __init__(self, name):
        self.name, self.closed = name, False

    def close(self):
        self.closed = True


class Engine(PackagedLibrary, Binding):
    engine_dir, library, override_env = "engines/fake", "libfake.so", "LOCALAI_FAKE_CPU"


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package whose engines/fake/fallback/libfake.so is a copy of the C library."""
    ctypes.CDLL(LIBC)
    # The file the loader mapped for it (this process's own libc).
    path = next(line.split()[-1] for line in open("/proc/self/maps") if re.search(r"/libc[.-][^/]*$", line.strip()))
    level = tmp_path / "fakepkg" / "engines" / "fake" / "fallback"
    level.mkdir(parents=True)
    (tmp_path / "fakepkg" / "__init__.py").write_text("")
    shutil.copy(path, level / "libfake.so")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fakepkg", raising=False)
    monkeypatch.delenv("LOCALAI_FAKE_CPU", raising=False)
    return "fakepkg"


def test_packaged_library_loads_the_level_the_package_carries(package):
    engine = Engine(package, greeting="hello")
    assert engine.level == "fallback" and engine.greeting == "hello"
    assert str(engine.path).endswith("engines/fake/fallback/libfake.so")
    assert engine.lib.strlen(b"abc") == 3


def test_an_override_naming_a_level_not_carried_is_invalid(package, monkeypatch):
    from backends.common.errors import InvalidArgument

    monkeypatch.setenv("LOCALAI_FAKE_CPU", "avx512")
    with pytest.raises(InvalidArgument, match=r"LOCALAI_FAKE_CPU=avx512: not one of \['fallback'\]"):
        Engine(package)


def test_engine_servicer_loads_the_engine_once_and_closes_models(package):
    class Servicer(EngineServicer):
        def new_engine(self):
            return Engine(package)

        def resolve_path(self, request):
            return request.Model

        def load(self, request, path):
            return self.engine.load(path)

    from backends.common.testing import FakeContext

    servicer, before = Servicer(), Binding.loads
    assert servicer.LoadModel(backend_pb2.ModelOptions(Model="one"), FakeContext()).success
    first = servicer.model
    assert servicer.LoadModel(backend_pb2.ModelOptions(Model="two"), FakeContext()).success
    assert first.closed and servicer.model.name == "two" and not servicer.model.closed
    second = servicer.model
    assert servicer.Free(backend_pb2.HealthMessage(), FakeContext()).success
    assert second.closed and servicer.model is None
    assert Binding.loads == before + 1  # one engine for the process
