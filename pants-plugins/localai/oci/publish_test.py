"""publish.py (the `pants publish` rule) and push.py (its push), with only the registry
client faked, at its API boundary (has_blob / upload_blob / put_manifest): what is pushed, under
which reference, from which options. The push against a real registry is
tests/integration/test_localai_install.py."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact
from pants.core.goals.publish import PublishProcesses
from pants.engine.addresses import Address
from pants.engine.fs import CreateDigest, Digest, DigestContents, FileContent
from pants.testutil.rule_runner import QueryRule

from localai.oci.publish import PublishImageFieldSet, PublishImageRequest, entry_of
from localai.oci.scripts import push as oci_push
from localai.oci.scripts.layout import write_layout
from localai.testutil import backend_files, make_rule_runner, pex_cli_options, resolve_options


def _processes(*options: str, env: dict[str, str] | None = None) -> tuple[PublishProcesses, object]:
    rule_runner = make_rule_runner(
        QueryRule(PublishProcesses, [PublishImageRequest]), QueryRule(DigestContents, [Digest]), QueryRule(Digest, [CreateDigest])
    )
    rule_runner.write_files(backend_files("silero-vad", {"cpu": ""}))
    rule_runner.set_options(
        [*resolve_options("silero-vad", ["cpu"]), *pex_cli_options(), *options],
        env={**(env or {})},
        env_inherit={"PATH", "PYENV_ROOT", "HOME"},
    )
    tgt = rule_runner.get_target(Address("backends/silero-vad", target_name="cpu"))
    package = rule_runner.request(Digest, [CreateDigest([FileContent("images/silero-vad/cpu/layout/index.json", b"{}")])])
    request = PublishImageRequest(
        field_set=PublishImageFieldSet.create(tgt),
        packages=(BuiltPackage(package, (BuiltPackageArtifact("images/silero-vad/cpu/"),)),),
    )
    return rule_runner.request(PublishProcesses, [request]), rule_runner


def test_entry_names_follow_localai() -> None:
    assert entry_of("backends/silero-vad", "cpu") == ("silero-vad", "cpu-silero-vad")
    # An imported LocalAI folder: the backend name packaging gives its image (images/localai-rerankers/).
    assert entry_of("backends/localai/rerankers/", "cuda13") == ("localai-rerankers", "cuda13-localai-rerankers")


def test_no_registry_pushes_nothing_and_names_the_option() -> None:
    (pkg,), _ = _processes()
    assert pkg.process is None and pkg.names == ("cpu-silero-vad",)
    assert "--localai-oci-registry" in pkg.description


def test_the_push_process_pushes_the_packaged_layout_to_the_options_repository() -> None:
    (pkg,), rule_runner = _processes(
        "--localai-oci-registry=quay.io",
        "--localai-oci-repository=/you/local-ai-backends/",
        "--localai-oci-tag-prefix=latest-",
        env={"LOCALAI_REGISTRY_USER": "u", "LOCALAI_REGISTRY_PASSWORD": "p", "UNRELATED": "x"},
    )
    argv = pkg.process.process.argv
    assert argv[1:] == (
        "push.py",
        "images/silero-vad/cpu/layout",
        "quay.io",
        "you/local-ai-backends",  # slashes stripped: <registry>/<repository>@sha256:...
        "--tag",
        "latest-cpu-silero-vad",
    )  # https: no --plain-http for a remote host
    assert pkg.names == ("quay.io/you/local-ai-backends cpu-silero-vad",)
    # Only the credential variables reach the push; the packaged layout and the script are its input.
    assert dict(pkg.process.process.env) == {"LOCALAI_REGISTRY_USER": "u", "LOCALAI_REGISTRY_PASSWORD": "p"}
    files = {fc.path for fc in rule_runner.request(DigestContents, [pkg.process.process.input_digest])}
    assert files == {"push.py", "images/silero-vad/cpu/layout/index.json"}


def test_localhost_is_plain_http_and_an_empty_tag_prefix_adds_no_tag() -> None:
    (pkg,), _ = _processes("--localai-oci-registry=127.0.0.1:5000", "--localai-oci-tag-prefix=")
    argv = pkg.process.process.argv
    assert "--plain-http" in argv and "--tag" not in argv
    assert argv[3:5] == ("127.0.0.1:5000", "local-ai-backends")  # the default repository


class FakeRegistry:
    """The registry client's API (push.Registry), recording what the push asks of it."""

    instances: list["FakeRegistry"] = []
    preexisting: set[str] = set()

    def __init__(self, host: str, repository: str, plain_http: bool):
        self.host, self.repository, self.plain_http = host, repository, plain_http
        self.blobs = set(self.preexisting)
        self.uploaded: list[str] = []
        self.manifests: list[tuple[str, bytes, str]] = []
        FakeRegistry.instances.append(self)

    def has_blob(self, digest: str) -> bool:
        return digest in self.blobs

    def upload_blob(self, path: Path, digest: str) -> None:
        assert "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest() == digest
        self.blobs.add(digest)
        self.uploaded.append(digest)

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> None:
        self.manifests.append((reference, body, media_type))


@pytest.fixture
def layout(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "run.sh").write_text("#!/bin/sh\n")
    (folder / "run.sh").chmod(0o755)
    (folder / "backend.pex").write_bytes(b"P" * 4096)
    write_layout(folder, tmp_path / "layout", ref_name="cpu-x", annotations={}, own_layer_bytes=1024)
    FakeRegistry.instances, FakeRegistry.preexisting = [], set()
    monkeypatch.setattr(oci_push, "Registry", FakeRegistry)
    return tmp_path / "layout"


def test_push_uploads_every_blob_then_puts_the_manifest_by_digest_then_tags(layout: Path) -> None:
    index = json.loads((layout / "index.json").read_text())
    digest = index["manifests"][0]["digest"]
    manifest = json.loads((layout / "blobs/sha256" / digest.split(":")[1]).read_bytes())
    result = oci_push.push(layout, "reg.example:5000", "team/backends", ["latest-cpu-x"], plain_http=False)
    (registry,) = FakeRegistry.instances
    assert (registry.host, registry.repository, registry.plain_http) == ("reg.example:5000", "team/backends", False)
    assert registry.uploaded == [manifest["config"]["digest"], *(l["digest"] for l in manifest["layers"])]
    references = [ref for ref, _, _ in registry.manifests]
    assert references == [digest, "latest-cpu-x"]  # by digest first: the bytes the build made
    assert all(body == (layout / "blobs/sha256" / digest.split(":")[1]).read_bytes() for _, body, _ in registry.manifests)
    assert result["reference"] == f"reg.example:5000/team/backends@{digest}"
    assert result["tags"] == ["reg.example:5000/team/backends:latest-cpu-x"]
    assert result["skipped_bytes"] == 0 and result["uploaded_bytes"] == sum(
        b["size"] for b in [manifest["config"], *manifest["layers"]]
    )


def test_blobs_the_registry_has_are_not_uploaded_again(layout: Path) -> None:
    digest = json.loads((layout / "index.json").read_text())["manifests"][0]["digest"]
    manifest = json.loads((layout / "blobs/sha256" / digest.split(":")[1]).read_bytes())
    big = manifest["layers"][0]
    FakeRegistry.preexisting = {big["digest"]}
    result = oci_push.push(layout, "r", "repo", [], plain_http=True)
    assert big["digest"] not in FakeRegistry.instances[0].uploaded
    assert result["skipped_bytes"] == big["size"]


def test_a_tampered_manifest_is_refused_before_anything_is_pushed(layout: Path, capsys) -> None:
    digest = json.loads((layout / "index.json").read_text())["manifests"][0]["digest"]
    blob = layout / "blobs/sha256" / digest.split(":")[1]
    blob.write_bytes(blob.read_bytes().replace(b"schemaVersion", b"schemaVersioN"))
    assert oci_push.main([str(layout), "r:5000", "repo"]) == 1
    err = capsys.readouterr().err
    assert f"the manifest blob does not match {digest}; rebuild with ./pants package" in err
    assert FakeRegistry.instances == []  # no client was even created


def test_registry_errors_fail_the_push_naming_the_target_repository(layout: Path, monkeypatch, capsys) -> None:
    def refuse(self, path, digest):
        raise oci_push.PushError(f"PUT blob {digest}: HTTP 403 Forbidden")

    monkeypatch.setattr(FakeRegistry, "upload_blob", refuse)
    assert oci_push.main([str(layout), "r:5000", "team/backends", "--tag", "t"]) == 1
    err = capsys.readouterr().err
    assert f"push of {layout} to r:5000/team/backends failed: PUT blob sha256:" in err and "403" in err
    assert FakeRegistry.instances[0].manifests == []  # nothing named a manifest that lacks blobs


def test_an_image_index_pushes_each_image_by_digest_then_the_index_then_tags(tmp_path: Path, monkeypatch) -> None:
    from localai.oci.index import index_document

    manifests, out = [], tmp_path / "index-layout"
    (out / "blobs/sha256").mkdir(parents=True)
    for arch in ("arm64", "amd64"):
        folder = tmp_path / arch
        folder.mkdir()
        (folder / "run.sh").write_text(f"#!/bin/sh\n# {arch}\n")
        (folder / "run.sh").chmod(0o755)
        image = write_layout(folder, tmp_path / f"layout-{arch}", ref_name="cpu-x", annotations={}, architecture=arch)
        for blob in (tmp_path / f"layout-{arch}/blobs/sha256").iterdir():
            (out / "blobs/sha256" / blob.name).write_bytes(blob.read_bytes())
        manifests.append((image.manifest.digest, image.manifest.size, "linux", arch))
    index = index_document(manifests)
    digest = "sha256:" + hashlib.sha256(index).hexdigest()
    (out / "blobs/sha256" / digest.split(":")[1]).write_bytes(index)
    media_index = "application/vnd.oci.image.index.v1+json"
    (out / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [{"mediaType": media_index, "digest": digest, "size": len(index)}]}))
    FakeRegistry.instances, FakeRegistry.preexisting = [], set()
    monkeypatch.setattr(oci_push, "Registry", FakeRegistry)

    result = oci_push.push(out, "r", "repo", ["latest-cpu-x"], plain_http=True)
    (registry,) = FakeRegistry.instances
    by_arch = {arch: d for d, _, _, arch in manifests}
    # index_document orders by architecture; each image before the index that names it.
    assert [ref for ref, _, _ in registry.manifests] == [by_arch["amd64"], by_arch["arm64"], digest, "latest-cpu-x"]
    assert [mt for _, _, mt in registry.manifests][2:] == [media_index, media_index]
    assert json.loads(index)["manifests"][1]["platform"] == {"architecture": "arm64", "os": "linux"}
    assert result["reference"] == f"r/repo@{digest}"
