"""Slow path of ./pants: builds what Pants needs on a fresh machine, then marks it ready.

Runs on CPython 3.9 with the standard library only. Every input is pinned by sha256:
Pants and its dependencies (3rdparty/pants/requirements.txt, pip-compile --generate-hashes),
the pex tool (built from PyPI's pex, checked against 3rdparty/wheelhouse.toml), and the
accelerator wheelhouse (3rdparty/wheelhouse.toml). Host pip configuration is ignored.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path


def log(msg: str) -> None:
    print(f"pants bootstrap: {msg}", file=sys.stderr, flush=True)


def fail(msg: str) -> "NoReturn":  # noqa: F821 (a string annotation: typing is not imported at start)
    log(f"error: {msg}")
    sys.exit(1)


def isolated_env(**extra: str) -> dict[str, str]:
    """Environment for pip/pex runs with no host pip configuration (files or PIP_* vars)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, XDG_CONFIG_DIRS="/nonexistent-localai-build",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    if os.environ.get("PANTS_CA_CERTS_PATH"):  # the system CA bundle ./pants found
        env["PIP_CERT"] = os.environ["PANTS_CA_CERTS_PATH"]
    env.update(extra)
    return env


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run(cmd: list[str], **kw) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout)
        fail(f"command failed ({proc.returncode}): {' '.join(cmd)}")


def parse_manifest(path: Path) -> dict[str, dict[str, str]]:
    """Reads the small TOML subset of wheelhouse.toml: [section] headers and key = "value"."""
    sections: dict[str, dict[str, str]] = {}
    current = None
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1].strip().strip('"'), {})
        elif "=" in line and current is not None:
            key, value = (part.strip() for part in line.split("=", 1))
            current[key] = value.strip('"')
        else:
            fail(f"{path}:{n}: cannot parse {raw!r} (expected [section] or key = \"value\")")
    return sections


def install_pants(py: str, root: Path, venv: Path) -> None:
    log(f"creating the Pants venv at {venv} (once per change of 3rdparty/pants/requirements.txt)")
    if venv.exists():  # left half-built by an interrupted run: no .installed stamp
        shutil.rmtree(venv)
    run([py, "-m", "venv", str(venv)])
    run([str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes",
         "--only-binary=:all:", "-r", str(root / "3rdparty/pants/requirements.txt")],
        env=isolated_env())


def download(url: str, dest: Path) -> None:
    log(f"downloading {url}")
    ctx = ssl.create_default_context(cafile=os.environ.get("PANTS_CA_CERTS_PATH"))
    with urllib.request.urlopen(url, timeout=30, context=ctx) as r, dest.open("wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)


# Zip timestamps of wheels built here (1980-01-01, the earliest a zip can hold): with PEP 517
# isolation and pinned build tools, the same sdist gives the same bytes on every machine.
SOURCE_DATE_EPOCH = "315532800"


def build_from_sdist(entry: dict[str, str], dest: Path, py: str) -> None:
    """A wheel no index has (an sdist pex 2.1.137 cannot read), built from the pinned sdist at
    entry["url"] with the pinned build tools (entry["build_constraints"]); the caller checks the
    wheel's sha256 against the manifest."""
    with tempfile.TemporaryDirectory() as tmp:
        sdist = Path(tmp) / entry["url"].rsplit("/", 1)[-1].split("#", 1)[0]
        try:
            download(entry["url"], sdist)
        except OSError as e:
            fail(f"cannot fetch {sdist.name} ({e}), the sdist {entry['file']} is built from. Download {entry['url']} "
                 f"yourself, or put {entry['file']} in a folder and run again with LOCALAI_WHEELHOUSE_DIRS=<folder>.")
        if sha256_of(sdist) != entry["sdist_sha256"]:
            fail(f"hash mismatch for {sdist.name} (3rdparty/wheelhouse.toml, the sdist of {entry['file']}): expected "
                 f"sha256 {entry['sdist_sha256']}, got {sha256_of(sdist)}. Nothing was built.")
        constraints = Path(tmp) / "build-constraints.txt"
        constraints.write_text("\n".join(entry["build_constraints"].split()) + "\n")
        log(f"wheelhouse: building {entry['file']} from {sdist.name}")
        run([py, "-m", "pip", "wheel", "--quiet", "--use-pep517", "--no-deps", "--no-cache-dir", "-w", tmp, str(sdist)],
            env=isolated_env(PIP_CONSTRAINT=str(constraints), SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH))
        built = Path(tmp) / entry["file"]
        if not built.is_file():
            fail(f"building {sdist.name} gave {sorted(p.name for p in Path(tmp).glob('*.whl'))}, not {entry['file']}")
        shutil.move(str(built), dest)


def fetch(entry: dict[str, str], dest: Path, py: str) -> None:
    """Gets one pinned file: from LOCALAI_WHEELHOUSE_DIRS, its official URL, or the user's pip
    mirror; a wheel pinned with its sdist (`sdist_sha256`) is built from that sdist instead."""
    name = entry["file"]
    for d in filter(None, os.environ.get("LOCALAI_WHEELHOUSE_DIRS", "").split(":")):
        if (Path(d) / name).is_file():
            shutil.copyfile(Path(d) / name, dest)
            return
    if "sdist_sha256" in entry:
        build_from_sdist(entry, dest, py)
        return
    try:
        download(entry["url"], dest)
        return
    except OSError as e:
        log(f"  {e}; trying pip's configured mirrors (find-links, extra indexes) instead")
    # The user's own pip configuration is consulted only here, to find the file; its sha256 is
    # checked against the manifest, so a mirror cannot change what is built.
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([py, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                               "--python-version", entry.get("python", "3.11"), "-d", tmp, entry["requirement"]],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        got = Path(tmp) / name
        if got.is_file():
            shutil.move(str(got), dest)
            return
        sys.stderr.write(proc.stdout[-2000:])
    fail(f"cannot fetch {name}. Download {entry['url']} yourself and run again with "
         f"LOCALAI_WHEELHOUSE_DIRS=<folder holding it>.")


def fill_wheelhouse(py: str, root: Path, cache: Path) -> None:
    manifest = root / "3rdparty/wheelhouse.toml"
    for key, entry in parse_manifest(manifest).items():
        if key == "pex-tool":
            continue
        dest = cache / "wheelhouse" / entry["accelerator"] / entry["file"]
        if dest.is_file() and sha256_of(dest) == entry["sha256"]:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        log(f"wheelhouse: fetching {entry['file']} ({entry['accelerator']})")
        fetch(entry, part, py)
        actual = sha256_of(part)
        if actual != entry["sha256"]:
            part.unlink()
            fail(f"hash mismatch for {entry['file']} (from {manifest}, entry [{key}]): expected sha256 "
                 f"{entry['sha256']}, got {actual}. The file was discarded; check the mirror you fetched it from.")
        part.replace(dest)


def build_pex_tool(venv: Path, root: Path, cache: Path) -> None:
    entry = parse_manifest(root / "3rdparty/wheelhouse.toml")["pex-tool"]
    dest = cache / entry["file"]
    if dest.is_file() and sha256_of(dest) == entry["sha256"]:
        return
    log(f"building the pex tool {entry['requirement']} from PyPI (Pants would fetch it from GitHub)")
    part = dest.with_name(dest.name + ".part")
    # --no-strip-pex-env, as pex's own release build: without it the tool drops the PEX_ROOT Pants
    # gives each process and caches in ~/.pex, outside Pants' named caches and shared by every run.
    run([str(venv / "bin/python"), "-m", "pex", entry["requirement"], "-c", "pex", "-o", str(part),
         "--python-shebang=/usr/bin/env python3", "--pip-version", "20.3.4-patched", "--no-strip-pex-env",
         *(["--cert", os.environ["PANTS_CA_CERTS_PATH"]] if os.environ.get("PANTS_CA_CERTS_PATH") else [])],
        env=isolated_env())
    actual = sha256_of(part)
    if actual != entry["sha256"]:
        part.unlink()
        fail(f"the pex tool built from {entry['requirement']} has sha256 {actual}, expected {entry['sha256']} "
             "(3rdparty/wheelhouse.toml [pex-tool]). Refusing to use it.")
    part.replace(dest)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--venv", type=Path, required=True)
    ap.add_argument("--ready", type=Path, required=True,
                    help="the stamp written once the venv, the pex tool and the wheelhouse are as this checkout pins them")
    args = ap.parse_args()
    # Zip entries carry file modes: the pex tool's sha256 must not depend on the user's umask.
    os.umask(0o022)
    args.cache.mkdir(parents=True, exist_ok=True)
    # Two first runs at once (parallel tests that start ./pants) would each rebuild the venv and
    # delete the other's: the second waits here, then finds the venv ready.
    with open(args.cache / f"{args.venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if args.ready.is_file():
            return
        py = sys.executable
        # The venv depends on requirements.txt alone (its path says which): another bootstrap.py
        # or wheelhouse keeps it, and only the checks below run again.
        if not (args.venv / ".installed").is_file():
            install_pants(py, args.root, args.venv)
            (args.venv / ".installed").write_text("ok\n")
        build_pex_tool(args.venv, args.root, args.cache)
        fill_wheelhouse(py, args.root, args.cache)
        args.ready.write_text("ok\n")
        log("ready")


if __name__ == "__main__":
    main()
