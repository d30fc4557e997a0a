from __future__ import annotations

import hashlib
import io
import tarfile

import pytest
from pants.engine.fs import EMPTY_DIGEST, DigestContents
from pants.engine.internals.scheduler import ExecutionError
from pants.testutil.rule_runner import QueryRule, RuleRunner

from localai.package.portable_python import PortablePython, PortablePythonRequest
from localai.testutil import make_rule_runner, pex_cli_options


def _archive() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in {"python/bin/python3.11": b"\x7fELF", "python/lib/python3.11/os.py": b"# os\n"}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _runner(*options: str) -> RuleRunner:
    rule_runner = make_rule_runner(QueryRule(PortablePython, [PortablePythonRequest]), QueryRule(DigestContents, [type(EMPTY_DIGEST)]))
    # The unpack runs under a Python found like the build's (pex tool from ~/.cache, not GitHub).
    rule_runner.set_options([*pex_cli_options(), *options], env_inherit={"PATH", "PYENV_ROOT", "HOME"})
    return rule_runner


def test_off_by_default_run_sh_starts_the_backend_with_the_hosts_python() -> None:
    portable = _runner().request(PortablePython, [PortablePythonRequest("3.11")])
    assert not portable.enabled and portable.digest == EMPTY_DIGEST
    assert portable.run_sh("3.11").endswith('exec python3.11 -I -S -B "$dir/start.py" "$@"\n')
    assert portable.sbom_components() == () and portable.materials() == ()


def test_a_local_archive_is_unpacked_and_named_by_sha256() -> None:
    archive = _archive()
    rule_runner = _runner("--localai-portable-python-archive=//py:cpython")
    rule_runner.write_files({"py/BUILD": 'file(name="cpython", source="cpython.tar.gz")', "py/cpython.tar.gz": archive})
    portable = rule_runner.request(PortablePython, [PortablePythonRequest("3.11")])
    record = portable.record()
    assert record["archive_sha256"] == hashlib.sha256(archive).hexdigest() and record["url"] is None
    assert record["target"] == "py:cpython" and record["executable"] == "python/bin/python3.11"
    files = {fc.path: fc for fc in rule_runner.request(DigestContents, [portable.digest])}
    assert set(files) == {"python/bin/python3.11", "python/lib/python3.11/os.py"}
    assert files["python/bin/python3.11"].is_executable
    run_sh = portable.run_sh("3.11")
    assert 'exec "$dir/python/bin/python3.11" -I -S -B "$dir/start.py" "$@"' in run_sh
    assert "dirname" not in run_sh  # only sh builtins: the host's PATH may be empty
    (component,) = portable.sbom_components()
    assert component["hashes"] == [{"alg": "SHA-256", "content": record["archive_sha256"]}]
    assert portable.materials()[0]["digest"] == {"sha256": record["archive_sha256"]}


def test_an_http_source_archive_is_downloaded_checked_and_unpacked() -> None:
    """The pinned target's path (http_source, hydrated as codegen), here from a file:// mirror."""
    archive = _archive()
    rule_runner = _runner("--localai-portable-python-archive=//py:cpython")
    url = f"file://{rule_runner.build_root}/mirror/cpython.tar.gz"
    rule_runner.write_files(
        {
            "mirror/cpython.tar.gz": archive,
            "py/BUILD": f'file(name="cpython", source=http_source("{url}", len={len(archive)}, '
            f'sha256="{hashlib.sha256(archive).hexdigest()}", filename="cpython-3.11.9+20240713-x86_64-unknown-linux-gnu-install_only.tar.gz"))',
        }
    )
    record = rule_runner.request(PortablePython, [PortablePythonRequest("3.11")]).record()
    assert record["url"] == url and record["version"] == "3.11.9"
    assert record["archive_sha256"] == hashlib.sha256(archive).hexdigest()


def test_an_unreachable_pinned_archive_names_the_option_and_the_fix() -> None:
    rule_runner = _runner("--localai-portable-python-archive=//py:cpython")
    rule_runner.write_files(
        {
            "py/BUILD": 'file(name="cpython", source=http_source("file:///nonexistent-localai/cpython.tar.gz", '
            'len=10, sha256="' + "0" * 64 + '", filename="cpython.tar.gz"))'
        }
    )
    with pytest.raises(ExecutionError) as e:
        rule_runner.request(PortablePython, [PortablePythonRequest("3.11")])
    msg = str(e.value)
    assert "[localai-portable-python].archive = '//py:cpython': cannot get the portable Python archive" in msg
    assert "from file:///nonexistent-localai/cpython.tar.gz" in msg
    assert "--localai-portable-python-archive" in msg and "http_source(url=<mirror" in msg


def test_an_archive_without_the_variant_python_is_refused() -> None:
    rule_runner = _runner("--localai-portable-python-archive=//py:cpython")
    rule_runner.write_files({"py/BUILD": 'file(name="cpython", source="cpython.tar.gz")', "py/cpython.tar.gz": _archive()})
    with pytest.raises(ExecutionError, match=r"no python/bin/python3\.12 .*not a CPython 3\.12 install_only archive"):
        rule_runner.request(PortablePython, [PortablePythonRequest("3.12")])
