from __future__ import annotations

import json

from localai.model.lockfile import parse
from localai.package.provenance import PREDICATE_TYPE, STATEMENT_TYPE, provenance_statement
from localai.package.sbom import cyclonedx_sbom, purl
from localai.package.source_checkout import NO_CHECKOUT, SourceCheckout
from localai.testutil import fake_lockfile

LOCK = json.dumps(
    {
        "locked_resolves": [
            {
                "locked_requirements": [
                    {"project_name": "torch", "version": "2.13.0+cpu", "requires_dists": ["jinja2", "sympy>=1.13.3"],
                     "artifacts": [{"algorithm": "sha256", "hash": "67" * 32,
                                    "url": "file://${WHEELHOUSE}/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"}]},
                    {"project_name": "Jinja2", "version": "3.1.6", "requires_dists": ["MarkupSafe>=2.0", "Babel>=2.7; extra == \"i18n\""],
                     "artifacts": [{"algorithm": "sha256", "hash": "ab" * 32, "url": "https://files.example/jinja2-3.1.6-py3-none-any.whl"},
                                   {"algorithm": "sha256", "hash": "cd" * 32, "url": "https://files.example/jinja2-3.1.6.tar.gz"}]},
                    {"project_name": "markupsafe", "version": "3.0.2", "requires_dists": [],
                     "artifacts": [{"algorithm": "sha256", "hash": "ef" * 32, "url": "https://files.example/markupsafe-3.0.2.tar.gz"}]},
                    {"project_name": "colorama", "version": "0.4.6", "requires_dists": [],  # locked for Windows, not installed
                     "artifacts": [{"algorithm": "sha256", "hash": "c0" * 32, "url": "https://files.example/colorama-0.4.6-py2.py3-none-any.whl"}]},
                ]
            }
        ]
    }
)
# What site-packages/ holds (FileTree.deps): the wheel each was installed from, the tree sha256
# of its installed files, and its RECORD.
DEPS = (
    ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "01" * 32, "site-packages/torch-2.13.0+cpu.dist-info/RECORD"),
    ("jinja2-3.1.6-py3-none-any.whl", "02" * 32, "site-packages/jinja2-3.1.6.dist-info/RECORD"),
    ("MarkupSafe-3.0.2-cp311-cp311-linux_x86_64.whl", "03" * 32, "site-packages/MarkupSafe-3.0.2.dist-info/RECORD"),  # built from the sdist
)
TORCH_URL = "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"


def _sbom(**kw) -> dict:
    return json.loads(
        cyclonedx_sbom(
            name="rerankers", version="0.1.0", artifact="site-packages", artifact_sha256="ee" * 32,
            lockfile="lockfiles/rerankers-cpu.lock", lockfile_sha256="11" * 32,
            requirements=parse(LOCK.encode(), "lockfiles/demo-cpu.lock"), deps=DEPS, original_urls={"67" * 32: TORCH_URL}, **kw,
        )
    )


def test_one_component_per_installed_distribution_hashed_as_the_file_inside() -> None:
    sbom = _sbom()
    assert (sbom["bomFormat"], sbom["specVersion"]) == ("CycloneDX", "1.5")
    by_name = {c["name"]: c for c in sbom["components"]}
    assert sorted(by_name) == ["Jinja2", "markupsafe", "torch"]  # colorama is locked, not installed
    torch = by_name["torch"]
    assert torch["version"] == "2.13.0+cpu" and torch["purl"] == "pkg:pypi/torch@2.13.0+cpu"
    assert torch["hashes"] == [{"alg": "SHA-256", "content": "01" * 32}]
    assert {"name": "localai:path", "value": "site-packages/torch-2.13.0+cpu.dist-info/RECORD"} in torch["properties"]
    assert {"name": "localai:wheel", "value": "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"} in torch["properties"]
    # The wheelhouse placeholder is not an IRI: the original URL of that sha256 replaces it.
    assert [(r["url"], r["hashes"][0]["content"]) for r in torch["externalReferences"]] == [(TORCH_URL, "67" * 32)]
    jinja = by_name["Jinja2"]
    assert jinja["purl"] == "pkg:pypi/jinja2@3.1.6"
    # The wheel that was chosen, not every artifact of the lock entry.
    assert [r["url"] for r in jinja["externalReferences"]] == ["https://files.example/jinja2-3.1.6-py3-none-any.whl"]
    assert by_name["markupsafe"]["externalReferences"][0]["url"] == "https://files.example/markupsafe-3.0.2.tar.gz"
    assert sbom["metadata"]["component"]["hashes"] == [{"alg": "SHA-256", "content": "ee" * 32}]
    deps = {d["ref"]: d["dependsOn"] for d in sbom["dependencies"]}
    assert deps["localai-backend:rerankers@0.1.0"] == [c["bom-ref"] for c in sbom["components"]]
    assert deps["pkg:pypi/torch@2.13.0+cpu"] == ["pkg:pypi/jinja2@3.1.6"]  # sympy is not installed
    assert deps["pkg:pypi/jinja2@3.1.6"] == ["pkg:pypi/markupsafe@3.0.2"]


def test_an_unmapped_placeholder_url_is_left_out_not_written() -> None:
    sbom = json.loads(
        cyclonedx_sbom(name="r", version="1", artifact="site-packages", artifact_sha256="ee" * 32, lockfile="l", lockfile_sha256="11" * 32,
                       requirements=parse(LOCK.encode(), "l"), deps=DEPS[:1])
    )
    torch = sbom["components"][0]
    assert torch["externalReferences"] == [] and "${" not in json.dumps(torch["externalReferences"])
    assert {"name": "localai:lock_url", "value": "file://${WHEELHOUSE}/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"} in torch["properties"]


def test_sbom_is_reproducible_and_its_serial_follows_the_content() -> None:
    assert _sbom() == _sbom()
    assert _sbom()["serialNumber"].startswith("urn:uuid:")
    other = json.loads(
        cyclonedx_sbom(name="rerankers", version="0.2.0", artifact="site-packages", artifact_sha256="ee" * 32,
                       lockfile="l", lockfile_sha256="11" * 32, requirements=(), deps=())
    )
    assert other["serialNumber"] != _sbom()["serialNumber"]
    assert "timestamp" not in json.dumps(_sbom())


def test_purl_normalises_the_name() -> None:
    assert purl("Typing_Extensions", "4.12.2") == "pkg:pypi/typing-extensions@4.12.2"


def test_provenance_statement_names_subjects_and_materials() -> None:
    st = json.loads(
        provenance_statement(
            target="backends/rerankers:cpu", subjects={"run.sh": "aa" * 32, "backend.pex": "bb" * 32},
            lockfile="lockfiles/rerankers-cpu.lock", lockfile_sha256="11" * 32, sources_digest="22" * 32,
            pex_version="v2.1.137", pex_sha256="33" * 32, python="CPython==3.11.*", pants_version="2.17.1",
            source=SourceCheckout("https://github.com/o/r", "ab12" * 10).material(),
        )
    )
    assert st["_type"] == STATEMENT_TYPE and st["predicateType"] == PREDICATE_TYPE
    assert st["subject"] == [{"name": "backend.pex", "digest": {"sha256": "bb" * 32}}, {"name": "run.sh", "digest": {"sha256": "aa" * 32}}]
    build = st["predicate"]["buildDefinition"]
    assert build["externalParameters"]["command"] == "./pants package backends/rerankers:cpu"
    deps = {d["uri"]: d["digest"].get("sha256") for d in build["resolvedDependencies"]}
    assert deps["lockfiles/rerankers-cpu.lock"] == "11" * 32 and deps["pkg:pypi/pex@2.1.137"] == "33" * 32
    source = {"uri": f"git+https://github.com/o/r@{'ab12' * 10}", "digest": {"gitCommit": "ab12" * 10}}
    assert build["externalParameters"]["source"] == source and source in build["resolvedDependencies"]
    assert st["predicate"]["runDetails"]["builder"]["version"] == {"pants": "2.17.1", "pex": "2.1.137"}


def test_no_checkout_is_said_not_guessed() -> None:
    material = SourceCheckout("", "", NO_CHECKOUT).material()
    assert material == {"uri": "git+unknown-repository", "annotations": {"localai:source": NO_CHECKOUT}}


def test_native_engines_list_library_source_archive_and_toolchain() -> None:
    from localai.package.sbom import engine_components

    toolchain = parse(
        fake_lockfile({"ziglang": ("0.17.1", [("https://files.example/ziglang.whl", "99" * 32)])}).encode(), "toolchain.lock"
    )
    comps = engine_components(
        {
            f"localai_backend/engines/minilm/{level}/build-record.json": {
                "name": "minilm", "cpu_level": level, "cpu_flags": flags, "library": "libminilm.so", "sha256": sha * 32,
                "ggml_version": "0.25.3", "target": "x86_64-linux-gnu.2.28",
                "source": {"archive": "3rdparty/native:sdist", "url": "https://files.example/llama_cpp_python-0.3.36.tar.gz",
                           "sha256": "83" * 32},
            }
            for level, flags, sha in (("avx2", ["avx", "avx2"], "aa"), ("fallback", [], "bb"))
        },
        toolchain,
    )
    assert [c["bom-ref"].split(":")[0] for c in comps] == ["native", "native", "source", "toolchain"]  # one source for two levels
    by_ref = {}
    for c in comps:
        by_ref.setdefault(c["bom-ref"].split(":")[0], c)  # the first of each kind: avx2's library
    assert by_ref["native"]["hashes"] == [{"alg": "SHA-256", "content": "aa" * 32}] and by_ref["native"]["version"] == "0.25.3"
    assert by_ref["native"]["name"] == "minilm/avx2/libminilm.so"
    assert {"name": "localai:cpu_flags", "value": "avx avx2"} in by_ref["native"]["properties"]
    assert by_ref["source"]["externalReferences"][0]["hashes"][0]["content"] == "83" * 32
    assert by_ref["toolchain"]["name"] == "ziglang" and by_ref["toolchain"]["scope"] == "excluded"
    sbom = json.loads(
        cyclonedx_sbom(name="minilm-ggml", version="0.1.0", artifact="site-packages", artifact_sha256="ee" * 32,
                       lockfile="l", lockfile_sha256="11" * 32, requirements=(), deps=(), extra_components=comps)
    )
    assert len(sbom["components"]) == 4 and len({c["bom-ref"] for c in sbom["components"]}) == 4
    # Each library: its path in the folder, and a dependency on the archive it was compiled from.
    assert comps[0]["bom-ref"] == "native:localai_backend/engines/minilm/avx2/libminilm.so"
    deps = {d["ref"]: d["dependsOn"] for d in sbom["dependencies"]}
    assert deps[comps[0]["bom-ref"]] == ["source:https://files.example/llama_cpp_python-0.3.36.tar.gz"]
