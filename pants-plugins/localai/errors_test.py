"""The one error family: its message shape, and that every plugin error belongs to it."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import localai
from localai.errors import LocalAIError

# Run as standalone processes in the sandbox (see errors.py): the standard library only, or with
# their own tool PEX (dsse_tool: cryptography from the `signing` resolve).
STANDALONE = {"localai.oci.scripts.push", "localai.package.scripts.elf_scan", "localai.package.scripts.portable_python_unpack",
              "localai.native.scripts.cmake_driver", "localai.package.scripts.dsse_tool"}


def test_message_names_where_cause_and_fix() -> None:
    e = LocalAIError("no lockfile", target="backends/bark:cpu", file="lockfiles/bark-cpu.lock", fix="Run ./pants generate-lockfiles.")
    assert str(e) == "backends/bark:cpu: lockfiles/bark-cpu.lock: no lockfile Run ./pants generate-lockfiles."
    assert (e.target, e.file, e.cause) == ("backends/bark:cpu", "lockfiles/bark-cpu.lock", "no lockfile")
    assert str(LocalAIError("plain message")) == "plain message"


def test_every_plugin_error_derives_from_the_family() -> None:
    names = [m.name for m in pkgutil.walk_packages(localai.__path__, "localai.") if not m.name.endswith("_test")]
    outside = []
    for name in names:
        if name in STANDALONE or name == "localai.macros":
            continue
        module = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, BaseException) and not issubclass(cls, LocalAIError):
                outside.append(f"{name}.{cls_name}")
    assert len(names) > 30, names  # the walk really saw the plugin
    assert outside == []
