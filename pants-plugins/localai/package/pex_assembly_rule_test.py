"""pex_assembly.py in RuleRunner with real pex processes: the split build (requirements PEX, then
the sources and the files that name them) gives pex's own one-shot build byte for byte.

The requirements are the fixture lock of backend_rule_test.py (lockfiles/minilm-ggml-cpu.lock:
grpcio, protobuf, grpcio-tools), fetched once into the shared pex_root cache.
"""
from __future__ import annotations

import dataclasses
import json

import pytest
from pants.backend.python.target_types import EntryPoint, PexLayout
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import Pex, PexRequest
from pants.backend.python.util_rules.pex_requirements import PexRequirements, Resolve
from pants.engine.fs import CreateDigest, Digest, DigestContents, DigestEntries, FileContent, FileEntry
from pants.testutil.rule_runner import QueryRule, RuleRunner

from localai.package.pex_assembly import IMPORT_HOOK, MAIN, PEX_INFO, SplitPexRequest, pex_code_hash
from localai.testutil import make_rule_runner, pex_cli_options, repo_file, repo_options

LOCK = repo_file("lockfiles/minilm-ggml-cpu.lock")
ROOT = "out/backend.pex"
SOURCES = {
    "localai_backend/backend.py": b"def main():\n    print('one')\n",
    "localai_backend/__init__.py": b"",
    "localai_backend/data/model.json": b'{"a": 1}\n',
    "localai_backend/.hidden": b"not in pex's code hash, still in the PEX\n",
    "backends/common/__init__.py": b"",
    "backends/common/server.py": b"X = 1\n",
    "backend_pb2.py": b"# stubs\n",
}


@pytest.fixture(scope="module")
def rule_runner() -> RuleRunner:
    rule_runner = make_rule_runner(
        QueryRule(Pex, [PexRequest]),
        QueryRule(Pex, [SplitPexRequest]),
        QueryRule(Digest, [CreateDigest]),
        QueryRule(DigestEntries, [Digest]),
        QueryRule(DigestContents, [Digest]),
    )
    rule_runner.write_files({"lockfiles/tiny-cpu.lock": LOCK, "3rdparty/accelerators/cpu.txt": repo_file("3rdparty/accelerators/cpu.txt")})
    rule_runner.set_options(
        [
            *pex_cli_options(),
            *repo_options(),
            "--python-resolves={'tiny-cpu': 'lockfiles/tiny-cpu.lock'}",
            "--python-resolves-to-constraints-file={'tiny-cpu': '3rdparty/accelerators/cpu.txt'}",
        ],
        env_inherit={"PATH", "PYENV_ROOT", "HOME"},
    )
    return rule_runner


def request(rule_runner: RuleRunner, sources: dict[str, bytes], executable: tuple[str, ...] = ()) -> PexRequest:
    digest = rule_runner.request(Digest, [CreateDigest(FileContent(p, c, is_executable=p in executable) for p, c in sources.items())])
    # As build_backend_pex asks for it (package/backend.py).
    return PexRequest(
        output_filename=ROOT,
        internal_only=False,
        layout=PexLayout.PACKED,
        requirements=PexRequirements(("grpcio==1.85.3", "protobuf==7.36.2"), from_superset=Resolve("tiny-cpu", False), description_of_origin="test"),
        interpreter_constraints=InterpreterConstraints(["CPython==3.11.*"]),
        sources=digest,
        main=EntryPoint.parse("localai_backend.backend:main"),
        additional_args=("--venv",),
        description="test pex",
    )


def tree(rule_runner: RuleRunner, pex: Pex) -> dict[str, tuple[str, int, bool]]:
    entries = rule_runner.request(DigestEntries, [pex.digest])
    return {e.path: (e.file_digest.fingerprint, e.file_digest.serialized_bytes_length, e.is_executable) for e in entries if isinstance(e, FileEntry)}


def pex_info(rule_runner: RuleRunner, pex: Pex) -> dict:
    return json.loads(next(fc.content for fc in rule_runner.request(DigestContents, [pex.digest]) if fc.path == f"{ROOT}/{PEX_INFO}"))


@pytest.mark.parametrize(
    "sources,executable",
    [
        (SOURCES, ()),
        # an edit of one line, and an executable data file (an engine's .so is one)
        ({**SOURCES, "localai_backend/backend.py": b"def main():\n    print('two')\n", "localai_backend/lib.so": b"\x7fELF"}, ("localai_backend/lib.so",)),
    ],
)
def test_the_split_build_is_pex_s_one_shot_build_byte_for_byte(rule_runner, sources, executable) -> None:
    one_shot_request = request(rule_runner, sources, executable)
    one_shot = rule_runner.request(Pex, [one_shot_request])
    split = rule_runner.request(Pex, [SplitPexRequest(one_shot_request)])
    expected, got = tree(rule_runner, one_shot), tree(rule_runner, split)
    assert sorted(got) == sorted(expected)
    assert {p: v for p, v in got.items() if v != expected[p]} == {}
    assert any(p.startswith(f"{ROOT}/.deps/grpcio-1.85.3-") for p in got)
    assert all(f"{ROOT}/{p}" in got for p in sources)
    assert got[f"{ROOT}/{MAIN}"][2] and (not executable or got[f"{ROOT}/{executable[0]}"][2])


def test_sources_change_code_hash_and_pex_hash_and_the_bootstrap_names_it(rule_runner) -> None:
    a = rule_runner.request(Pex, [SplitPexRequest(request(rule_runner, SOURCES))])
    b = rule_runner.request(Pex, [SplitPexRequest(request(rule_runner, {**SOURCES, "localai_backend/backend.py": b"def main():\n    pass\n"}))])
    requirements_only = rule_runner.request(Pex, [dataclasses.replace(request(rule_runner, SOURCES), sources=None)])
    infos = [pex_info(rule_runner, p) for p in (a, b, requirements_only)]
    # pex caches its runtime install under pex_hash: each must differ, or a PEX would run another's code.
    assert len({i["pex_hash"] for i in infos}) == 3 and len({i["code_hash"] for i in infos}) == 3
    contents = {fc.path: fc.content for fc in rule_runner.request(DigestContents, [b.digest])}
    for name in (MAIN, IMPORT_HOOK):
        assert infos[1]["pex_hash"].encode() in contents[f"{ROOT}/{name}"]
        assert infos[2]["pex_hash"].encode() not in contents[f"{ROOT}/{name}"]


def test_code_hash_filters_as_pex_does() -> None:
    base = {"a.py": b"1", "pkg/b.py": b"2"}
    assert pex_code_hash(base) == pex_code_hash({**base, "pkg/.dot": b"x", "pkg/__pycache__/b.cpython-311.pyc": b"y", "c.pyc": b"z"})
    assert pex_code_hash(base) != pex_code_hash({**base, "pkg/c.txt": b""})  # names count, empty files too
    assert pex_code_hash(base) != pex_code_hash({"a.py": b"1", "pkg/b.py": b"3"})
    # pex joins names and contents without separators: this is its hash, not a choice made here
    assert pex_code_hash(base) == pex_code_hash({"a.py": b"12", "pkg/b.py": b""})
