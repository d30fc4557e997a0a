from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from localai.package.scripts.portable_python_unpack import main


def _archive(path: Path, members: dict[str, bytes | str | None]) -> Path:
    """bytes: a file; str: a symlink to it; None: a directory."""
    with tarfile.open(path, "w:gz") as tar:
        for name, value in members.items():
            info = tarfile.TarInfo(name)
            if value is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(value, str):
                info.type, info.linkname = tarfile.SYMTYPE, value
                tar.addfile(info)
            else:
                info.size, info.mode = len(value), 0o755 if name.endswith("python3.11") else 0o600
                tar.addfile(info, io.BytesIO(value))
    return path


INSTALL_ONLY = {
    "python": None,
    "python/bin/python3.11": b"\x7fELF",
    "python/bin/python3": "python3.11",
    "python/lib/python3.11/os.py": b"# os\n",
    "python/include/python3.11/patchlevel.h": b'#define PY_VERSION "3.11.9"\n',
}


def test_unpacks_files_drops_links_and_reads_the_version(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "cpython-3.11.9+20240713-x86_64-unknown-linux-gnu-install_only.tar.gz", INSTALL_ONLY)
    assert main([str(archive), str(tmp_path / "out"), "--python-version", "3.11"]) == 0
    summary = json.loads((tmp_path / "out/python.json").read_text())
    assert summary["version"] == "3.11.9" and summary["executable"] == "python/bin/python3.11"
    assert summary["dropped_links"] == ["python/bin/python3"] and summary["files"] == 3
    assert not (tmp_path / "out/python/bin/python3").exists()
    assert (tmp_path / "out/python/bin/python3.11").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out/python/lib/python3.11/os.py").stat().st_mode & 0o777 == 0o644


def test_version_from_patchlevel_when_the_name_is_not_python_build_standalone(tmp_path: Path) -> None:
    archive = _archive(tmp_path / "mirror-copy.tar.gz", INSTALL_ONLY)
    assert main([str(archive), str(tmp_path / "out"), "--python-version", "3.11"]) == 0
    assert json.loads((tmp_path / "out/python.json").read_text())["version"] == "3.11.9"


def test_wrong_python_version_or_layout_fails_naming_what_is_missing(tmp_path: Path, capsys) -> None:
    archive = _archive(tmp_path / "a.tar.gz", INSTALL_ONLY)
    assert main([str(archive), str(tmp_path / "out"), "--python-version", "3.12"]) == 1
    assert "no python/bin/python3.12" in capsys.readouterr().err
    other = _archive(tmp_path / "b.tar.gz", {"usr/bin/python3.11": b"x"})
    assert main([str(other), str(tmp_path / "out2"), "--python-version", "3.11"]) == 1
    assert "'usr/bin/python3.11' is outside python/" in capsys.readouterr().err
