"""Slow path of ./pants: builds what Pants needs on a fresh machine, then marks it ready.

Runs on CPython 3.9 with the standard library only. Every input is pinned by sha256:
Pants and its dependencies (3rdparty/pants/requirements.txt, pip-compile --generate-hashes),
the pex tool (built from PyPI's pex, checked against 3rdparty/wheelhouse.toml), and the
accelerator wheelhouse (3rdparty/wheelhouse.toml; a wheel for another platform is compiled there
by the zig that lockfiles/native-toolchain.lock pins). Host pip configuration is ignored.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
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


def fetch_sdist(entry: dict[str, str], folder: Path) -> Path:
    """The pinned sdist a wheelhouse entry is built from, downloaded into folder and checked by sha256."""
    sdist = folder / entry["url"].rsplit("/", 1)[-1].split("#", 1)[0]
    try:
        download(entry["url"], sdist)
    except OSError as e:
        fail(f"cannot fetch {sdist.name} ({e}), the sdist {entry['file']} is built from. Download {entry['url']} "
             f"yourself, or put {entry['file']} in a folder and run again with LOCALAI_WHEELHOUSE_DIRS=<folder>.")
    if sha256_of(sdist) != entry["sdist_sha256"]:
        fail(f"hash mismatch for {sdist.name} (3rdparty/wheelhouse.toml, the sdist of {entry['file']}): expected "
             f"sha256 {entry['sdist_sha256']}, got {sha256_of(sdist)}. Nothing was built.")
    return sdist


def build_from_sdist(entry: dict[str, str], dest: Path, py: str) -> None:
    """A wheel no index has (an sdist pex 2.1.137 cannot read), built from the pinned sdist at
    entry["url"] with the pinned build tools (entry["build_constraints"]); the caller checks the
    wheel's sha256 against the manifest."""
    with tempfile.TemporaryDirectory() as tmp:
        sdist = fetch_sdist(entry, Path(tmp))
        constraints = Path(tmp) / "build-constraints.txt"
        constraints.write_text("\n".join(entry["build_constraints"].split()) + "\n")
        log(f"wheelhouse: building {entry['file']} from {sdist.name}")
        run([py, "-m", "pip", "wheel", "--quiet", "--use-pep517", "--no-deps", "--no-cache-dir", "-w", tmp, str(sdist)],
            env=isolated_env(PIP_CONSTRAINT=str(constraints), SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH))
        built = Path(tmp) / entry["file"]
        if not built.is_file():
            fail(f"building {sdist.name} gave {sorted(p.name for p in Path(tmp).glob('*.whl'))}, not {entry['file']}")
        shutil.move(str(built), dest)


# ---- Cross builds: a wheel for another platform (`platform` in the entry), compiled by zig ----
# The one pin of zig is lockfiles/native-toolchain.lock (the `native-toolchain` resolve the native
# builds use); the bootstrap runs before Pants can install a resolve, so it reads that lockfile's
# ziglang artifact for this machine (URL and sha256) and unpacks the wheel under the cache.
NATIVE_TOOLCHAIN_LOCK = "lockfiles/native-toolchain.lock"
ELF_MACHINES = {"aarch64": 183, "x86_64": 62}  # e_machine: EM_AARCH64, EM_X86_64


def cross_target(entry: dict[str, str], key: str) -> tuple[str, str, str]:
    """(zig target, glibc floor, machine) of an entry's `platform`, e.g. manylinux_2_28_aarch64 ->
    (aarch64-linux-gnu.2.28, 2.28, aarch64)."""
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(aarch64|x86_64)", entry["platform"])
    if not m:
        fail(f"3rdparty/wheelhouse.toml [{key}]: platform = {entry['platform']!r} is not a manylinux_<major>_<minor>_<machine> "
             f"tag of {sorted(ELF_MACHINES)} (e.g. manylinux_2_28_aarch64); fix the entry.")
    major, minor, machine = m.groups()
    return f"{machine}-linux-gnu.{major}.{minor}", f"{major}.{minor}", machine


def ziglang_artifact(root: Path) -> tuple[str, str, str]:
    """(version, url, sha256) of the ziglang wheel for this machine that native-toolchain.lock pins."""
    lock = root / NATIVE_TOOLCHAIN_LOCK
    try:
        body = json.loads("\n".join(line for line in lock.read_text().splitlines() if not line.startswith("//")))
    except (OSError, ValueError) as e:
        fail(f"cannot read {NATIVE_TOOLCHAIN_LOCK} ({e}), which pins the zig that cross-builds wheelhouse entries. "
             "Regenerate it: ./pants generate-lockfiles --resolve=native-toolchain")
    machine = os.uname().machine
    for resolve in body["locked_resolves"]:
        for req in resolve["locked_requirements"]:
            if req["project_name"] != "ziglang":
                continue
            for art in req["artifacts"]:
                platforms = art["url"].rsplit("/", 1)[-1][: -len(".whl")].split("-")[-1].split(".")
                if any(t.startswith("manylinux") and t.endswith(f"_{machine}") for t in platforms):
                    return req["version"], art["url"], art["hash"]
    fail(f"{NATIVE_TOOLCHAIN_LOCK} has no ziglang wheel for linux {machine}: cross-built wheelhouse entries need one. "
         "Add the platform to the native-toolchain resolve and regenerate it (./pants generate-lockfiles --resolve=native-toolchain).")


def zig_toolchain(root: Path, cache: Path) -> Path:
    """The folder holding the ziglang package (run as `python -m ziglang`), unpacked once from the
    wheel native-toolchain.lock pins, checked against its sha256."""
    version, url, sha = ziglang_artifact(root)
    dest = cache / "zig" / f"ziglang-{version}-{sha[:16]}"
    if (dest / "ziglang" / "zig").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        wheel = Path(tmp) / url.rsplit("/", 1)[-1]
        local = [Path(d) / wheel.name for d in os.environ.get("LOCALAI_WHEELHOUSE_DIRS", "").split(":") if d]
        local = [p for p in local if p.is_file()]
        if local:
            shutil.copyfile(local[0], wheel)
        else:
            try:
                download(url, wheel)
            except OSError as e:
                fail(f"cannot fetch {wheel.name} ({e}), the zig {NATIVE_TOOLCHAIN_LOCK} pins for cross-built wheelhouse entries. "
                     f"Download {url} yourself and run again with LOCALAI_WHEELHOUSE_DIRS=<folder holding it>.")
        if sha256_of(wheel) != sha:
            fail(f"hash mismatch for {wheel.name} ({NATIVE_TOOLCHAIN_LOCK}): expected sha256 {sha}, got {sha256_of(wheel)}. "
                 "It was discarded; check the mirror you fetched it from.")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                z.extract(info, unpacked)
                mode = (info.external_attr >> 16) & 0o777
                if mode:
                    os.chmod(unpacked / info.filename, mode)
        os.chmod(unpacked / "ziglang" / "zig", 0o755)
        try:
            unpacked.rename(dest)
        except OSError:  # another bootstrap unpacked it first
            if not (dest / "ziglang" / "zig").is_file():
                raise
    return dest


# The build's environment: CPython 3.11's sysconfig data with the target's ABI names and the zig
# compiler. Setuptools reads the compiler, flags and extension suffix from sysconfig, the wheel's
# platform from _PYTHON_HOST_PLATFORM (CPython's cross-build variables), so nothing of the host's
# x86_64 configuration (gcc, -g, its rpath) reaches the target's .so.
CROSS_SYSCONFIG = r"""
import importlib, json, os, sys, sysconfig
machine, tools = sys.argv[1], json.loads(sys.argv[2])
host = importlib.import_module(sysconfig._get_sysconfigdata_name()).build_time_vars
multiarch = machine + "-linux-gnu"
v = dict(host)
# The headers of this interpreter where it is now: a relocated CPython (python-build-standalone)
# records its build machine's folder in INCLUDEPY, which setuptools reads first.
include = sysconfig.get_path("include")
v.update(INCLUDEPY=include, CONFINCLUDEPY=include, INCLUDEDIR=os.path.dirname(include))
soabi = "cpython-%d%d-%s" % (sys.version_info[0], sys.version_info[1], multiarch)
v.update(MULTIARCH=multiarch, SOABI=soabi, EXT_SUFFIX="." + soabi + ".so", HOST_GNU_TYPE=machine + "-unknown-linux-gnu",
         MACHDEP="linux", CC=tools["cc"], CXX=tools["cxx"], LDSHARED=tools["cc"] + " -shared",
         BLDSHARED=tools["cc"] + " -shared", LDCXXSHARED=tools["cxx"] + " -shared", AR=tools["ar"], ARFLAGS="rcs",
         CFLAGS="-DNDEBUG -fwrapv -O2", OPT="-DNDEBUG -fwrapv -O2", BASECFLAGS="", CONFIGURE_CFLAGS="",
         PY_CFLAGS="-DNDEBUG -fwrapv -O2", PY_CFLAGS_NODIST="", CCSHARED="-fPIC", LDFLAGS="", PY_LDFLAGS="",
         CONFIGURE_LDFLAGS="", CPPFLAGS="", CONFIGURE_CPPFLAGS="", LIBS="", SYSLIBS="", LINKFORSHARED="")
print("build_time_vars = " + repr(v))
"""

# Runs the sdist's PEP 517 backend (setuptools) in the build venv; prints the wheel's name.
BUILD_WHEEL = r"""
import json, sys
from setuptools import build_meta
print(build_meta.build_wheel(sys.argv[1], config_settings=json.loads(sys.argv[2])))
"""


def elf_machines(wheel: Path) -> dict[str, int]:
    """e_machine of every ELF file in a wheel, by member name."""
    found = {}
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            head = z.open(name).read(20)
            if head[:4] == b"\x7fELF":
                found[name] = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
    return found


def build_cross_from_sdist(key: str, entry: dict[str, str], dest: Path, root: Path, cache: Path, py311: str | None) -> None:
    """A compiled wheel for another platform (entry["platform"], e.g. manylinux_2_28_aarch64) built
    from the pinned sdist with zig as the C compiler, against the CPython `python` names (3.11):
    the build tools (entry["build_constraints"], every one pinned) go into a venv of that CPython,
    the sdist's setuptools backend runs with a cross sysconfig. The caller checks the sha256."""
    target, _glibc, machine = cross_target(entry, key)
    if not py311:
        fail(f"3rdparty/wheelhouse.toml [{key}] builds {entry['file']} against CPython {entry.get('python', '3.11')}, and "
             "./pants found none (pyenv, PATH, or the pinned one in 3rdparty/bootstrap/interpreters.txt). Install it, or "
             f"put {entry['file']} in a folder and run again with LOCALAI_WHEELHOUSE_DIRS=<folder>.")
    if entry.get("python", "3.11") != "3.11":
        fail(f"3rdparty/wheelhouse.toml [{key}]: python = {entry['python']!r}, but cross builds run on the CPython 3.11 "
             "./pants finds: set python = \"3.11\" (or build the wheel elsewhere and pin it without sdist_sha256).")
    zig = zig_toolchain(root, cache)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sdist = fetch_sdist(entry, tmp)
        log(f"wheelhouse: building {entry['file']} from {sdist.name} for {entry['platform']} (zig cc -target {target})")
        # The build tools, for this machine: every one named and pinned (no resolver, no dependencies).
        env_dir = tmp / "buildenv"
        run([py311, "-m", "venv", str(env_dir)], env=isolated_env())
        python = str(env_dir / "bin/python")
        run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:", *entry["build_constraints"].split()],
            env=isolated_env())
        src_root = tmp / "src"
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                if member.issym() or member.islnk() or member.name.startswith("/") or ".." in Path(member.name).parts:
                    fail(f"{sdist.name} (3rdparty/wheelhouse.toml [{key}]) holds {member.name!r}, a link or a path outside "
                         "the archive: refused.")
            tar.extractall(src_root)
        (src,) = [p for p in src_root.iterdir() if p.is_dir()]
        # The compiler: zig for the target and its glibc floor, without the UBSan checks zig cc
        # adds by default (their type descriptors name header paths); the build folder, the
        # CPython's and zig's folders are mapped away so no machine path reaches the objects, and
        # -s strips at link.
        tools = tmp / "tools"
        tools.mkdir()
        zig_cmd = f"PYTHONPATH={zig} exec {sys.executable} -m ziglang"
        py311_prefix, py311_include = subprocess.run(
            [py311, "-c", "import sys, sysconfig; print(sys.base_prefix); print(sysconfig.get_path('include'))"],
            stdout=subprocess.PIPE, text=True, check=True).stdout.split("\n")[:2]
        maps = (f"-ffile-prefix-map={tmp}=. -ffile-prefix-map={py311_include}=/python/include/python3.11 "
                f"-ffile-prefix-map={py311_prefix}=/python -ffile-prefix-map={zig}=/zig")
        for name, sub in (("cc", "cc"), ("c++", "c++"), ("ar", "ar")):
            target_args = "" if sub == "ar" else f" -target {target} -fno-sanitize=all {maps} -s"
            (tools / name).write_text(f"#!/bin/sh\n{zig_cmd} {sub}{target_args} \"$@\"\n")
            (tools / name).chmod(0o755)
        cross = tmp / "cross"
        cross.mkdir()
        sysconfig_name = f"_sysconfigdata__linux_{machine}-linux-gnu"
        proc = subprocess.run(
            [python, "-c", CROSS_SYSCONFIG, machine,
             json.dumps({"cc": str(tools / "cc"), "cxx": str(tools / "c++"), "ar": str(tools / "ar")})],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=isolated_env())
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            fail(f"could not write the cross sysconfig for [{key}] (above)")
        (cross / f"{sysconfig_name}.py").write_text(proc.stdout)
        zig_cache = cache / "zig" / "cache"
        build_env = isolated_env(
            SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH,
            _PYTHON_HOST_PLATFORM=f"linux-{machine}",
            _PYTHON_SYSCONFIGDATA_NAME=sysconfig_name,
            PYTHONPATH=str(cross),
            PYTHONHASHSEED="0",
            CC=str(tools / "cc"), CXX=str(tools / "c++"), AR=str(tools / "ar"),
            LDSHARED=f"{tools / 'cc'} -shared", LDCXXSHARED=f"{tools / 'c++'} -shared",
            CFLAGS="", CPPFLAGS="", LDFLAGS="",
            ZIG_GLOBAL_CACHE_DIR=str(zig_cache), ZIG_LOCAL_CACHE_DIR=str(zig_cache),
            **dict(kv.split("=", 1) for kv in entry.get("build_env", "").split()),
        )
        out = tmp / "out"
        proc = subprocess.run(
            [python, "-c", BUILD_WHEEL, str(out), json.dumps({"--build-option": ["--plat-name", entry["platform"]]})],
            cwd=src, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=build_env)
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-6000:])
            fail(f"building {entry['file']} from {sdist.name} for {entry['platform']} failed (above; 3rdparty/wheelhouse.toml [{key}]), "
                 f"compiling against the headers of {py311}: a CPython whose pyconfig.h is one machine's (Debian's multiarch "
                 "python3.11-dev asks for <machine>-linux-gnu/python3.11/pyconfig.h) cannot build for another. Use a CPython 3.11 "
                 f"built from source (pyenv) or python-build-standalone, or put {entry['file']} in a folder and run again with "
                 "LOCALAI_WHEELHOUSE_DIRS=<folder>.")
        if os.environ.get("LOCALAI_BOOTSTRAP_VERBOSE"):
            sys.stderr.write(proc.stdout)
        built = out / entry["file"]
        if not built.is_file():
            fail(f"building {sdist.name} for {entry['platform']} gave {sorted(p.name for p in out.glob('*.whl'))}, not "
                 f"{entry['file']} (3rdparty/wheelhouse.toml [{key}]): fix the entry's file or platform")
        machines = elf_machines(built)
        wrong = {n: m for n, m in machines.items() if m != ELF_MACHINES[machine]}
        if not machines or wrong:
            fail(f"{entry['file']} built for {entry['platform']} holds "
                 f"{'no ELF file' if not machines else f'ELF files for another machine: {sorted(wrong)}'} "
                 f"(3rdparty/wheelhouse.toml [{key}]): the compiler was not zig for {target}; see the build log with LOCALAI_BOOTSTRAP_VERBOSE=1.")
        shutil.move(str(built), dest)


def fetch(entry: dict[str, str], dest: Path, py: str, key: str = "", root: Path = Path("."), cache: Path = Path("."),
          py311: str | None = None) -> None:
    """Gets one pinned file: from LOCALAI_WHEELHOUSE_DIRS, its official URL, or the user's pip
    mirror; a wheel pinned with its sdist (`sdist_sha256`) is built from that sdist instead, for
    this machine (pure Python) or, with `platform`, for that platform by zig."""
    name = entry["file"]
    for d in filter(None, os.environ.get("LOCALAI_WHEELHOUSE_DIRS", "").split(":")):
        if (Path(d) / name).is_file():
            shutil.copyfile(Path(d) / name, dest)
            return
    if "sdist_sha256" in entry and "platform" in entry:
        build_cross_from_sdist(key, entry, dest, root, cache, py311)
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


def cross_build_blocker(key: str, entry: dict[str, str], py311: str | None) -> str | None:
    """Why this machine cannot build a cross entry to its pinned bytes, or None. `headers` names
    the CPython whose headers the pin was built against where the bytes depend on it (Cython
    compiles PY_VERSION_HEX, micro version included, into the module)."""
    if any((Path(d) / entry["file"]).is_file() for d in os.environ.get("LOCALAI_WHEELHOUSE_DIRS", "").split(":") if d):
        return None
    fix = (f"put the pinned {entry['file']} in a folder and run ./pants with LOCALAI_WHEELHOUSE_DIRS=<folder> after deleting "
           "the bootstrap's ready stamp (~/.cache/localai-build/pants-venv-*/.ready-*)")
    if not py311:
        return f"./pants found no CPython 3.11 to build it against; install one (pyenv install 3.11.7), or {fix}"
    want = entry.get("headers")
    if want:
        have = subprocess.run([py311, "-c", "import platform; print(platform.python_version())"], stdout=subprocess.PIPE,
                              text=True).stdout.strip()
        if have != want:
            return (f"its pin was built against CPython {want}'s headers and ./pants found CPython {have} ({py311}), whose "
                    f"headers give other bytes; install {want} (pyenv install {want}) first on PATH, or {fix}")
    return None


def fill_wheelhouse(py: str, root: Path, cache: Path, py311: str | None = None) -> None:
    manifest = root / "3rdparty/wheelhouse.toml"
    for key, entry in parse_manifest(manifest).items():
        if key == "pex-tool":
            continue
        dest = cache / "wheelhouse" / entry["accelerator"] / entry["file"]
        if dest.is_file() and sha256_of(dest) == entry["sha256"]:
            continue
        cross = "platform" in entry
        if cross:
            cross_target(entry, key)  # a malformed entry is the manifest's error: fatal
        # A cross-built wheel only some aarch64 variants' locks name: what this machine cannot
        # build to its pin is skipped with a warning (never accepted), and Pants is not held up.
        blocker = cross_build_blocker(key, entry, py311) if cross else None
        if blocker:
            log(f"wheelhouse: warning: skipped {entry['file']} ({manifest}, entry [{key}]): {blocker}. "
                "Locks and packages that name it fail until it is there.")
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        log(f"wheelhouse: fetching {entry['file']} ({entry['accelerator']})")
        try:
            fetch(entry, part, py, key, root, cache, py311)
        except SystemExit:
            if not cross:
                raise
            part.unlink(missing_ok=True)
            log(f"wheelhouse: warning: skipped {entry['file']} ({manifest}, entry [{key}]): its build failed (above). "
                "Locks and packages that name it fail until it is there.")
            continue
        actual = sha256_of(part)
        if actual != entry["sha256"]:
            part.unlink()
            hint = "check the mirror you fetched it from."
            if "platform" in entry:  # built here: the input not pinned by hash is the CPython's headers
                hint = (f"it was built here from its pinned sdist against the headers of {py311}; if the bytes depend on "
                        "the CPython micro version, name the one the pin was made with as the entry's `headers`. Put the "
                        f"pinned {entry['file']} in a folder and run again with LOCALAI_WHEELHOUSE_DIRS=<folder>.")
            message = (f"hash mismatch for {entry['file']} (from {manifest}, entry [{key}]): expected sha256 "
                       f"{entry['sha256']}, got {actual}. The file was discarded; {hint}")
            if cross:
                log(f"wheelhouse: warning: skipped: {message} Locks and packages that name it fail until it is there.")
                continue
            fail(message)
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
    ap.add_argument("--python311", help="the CPython 3.11 that wheelhouse entries with a `platform` are built against")
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
        fill_wheelhouse(py, args.root, args.cache, args.python311)
        args.ready.write_text("ok\n")
        log("ready")


if __name__ == "__main__":
    main()
