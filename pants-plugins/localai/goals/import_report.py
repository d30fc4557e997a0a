"""`pants localai-import --report <dir>`: what LocalAI's own files pull, resolved LocalAI's way.

Per imported folder and LocalAI profile it is built for (layout.builds_profile): pip resolves the profile's
files in LocalAI's install order against PyPI first plus the extra indexes the files name
(`pip install --dry-run --report`, no host pip configuration), and the wheel sizes come from the
index (HTTP HEAD). Printed next to our locked variants: the build machine's and, where the import
declares one, the linux/arm64 variant's (`:cpu-arm64`). LocalAI's side is resolved for x86_64 only:
pip's `--platform` picks aarch64 wheels but still evaluates markers for the host machine (measured:
torch 2.9.1 for manylinux aarch64 then pulls 15 nvidia-* aarch64 wheels and triton, which its
`platform_machine == "x86_64"` markers exclude on aarch64), so only our platform lock, made from
the complete platform, says what arm64 pulls. One combined resolve approximates LocalAI's one
`uv pip install` per file. Needs network; nothing is cached or written.
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass

from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import PythonExecutable
from pants.engine.env_vars import EnvironmentVars, EnvironmentVarsRequest
from pants.engine.fs import CreateDigest, Digest, FileContent
from pants.engine.process import FallibleProcessResult, Process, ProcessCacheScope
from pants.engine.rules import Get, collect_rules, rule
from pants.util.frozendict import FrozenDict
from pants.util.logging import LogLevel

from localai.model.localai_layout import Profile, index_lines, install_order
from localai.model.lockfile import Lockfile

PYPI = "https://pypi.org/simple"
CUDA_PATTERNS = ("nvidia-*", "cuda-*", "triton")
# Passed through so pip reaches PyPI from behind a proxy or a TLS-intercepting CA.
_ENV = ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy")

# Runs in the process: pip's resolution report, then the size of every wheel it would download.
_SCRIPT = r"""
import json, subprocess, sys, urllib.request
out = "report.json"
index, indexes, files = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
# pip retries an unreachable index for every package it looks up: probe each index once.
for url in indexes:
    try:
        urllib.request.urlopen(url.rstrip("/") + "/", timeout=20).close()
    except Exception as e:
        print(json.dumps({"error": f"index {url} (named in the files) is unreachable from here: {e}"}))
        sys.exit(0)
cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
       "--retries", "1", "--timeout", "60", "--report", out, "--index-url", index]
for f in files:
    cmd += ["-r", f]
done = subprocess.run(cmd, capture_output=True, text=True)
if done.returncode:
    print(json.dumps({"error": done.stderr[-2000:]}))
    sys.exit(0)
report = json.load(open(out))
packages = []
for item in report["install"]:
    url = item["download_info"]["url"]
    size = None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as r:
            size = int(r.headers.get("Content-Length") or 0) or None
    except Exception:
        pass
    packages.append([item["metadata"]["name"], item["metadata"]["version"], size])
print(json.dumps({"packages": packages}))
"""


@dataclass(frozen=True)
class Resolution:
    packages: tuple[tuple[str, str, int | None], ...]  # (name, version, bytes or None)
    error: str | None = None

    def cuda(self) -> tuple[tuple[str, str, int | None], ...]:
        return tuple(p for p in self.packages if is_cuda(p[0]))


def is_cuda(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name.lower(), pat) for pat in CUDA_PATTERNS)


def mb(sizes) -> str:
    known = [s for s in sizes if s]
    text = f"{sum(known) / 1e6:,.0f} MB"
    return text + (f" (+{len(sizes) - len(known)} of unknown size)" if len(known) < len(sizes) else "")


def report_line(folder: str, profile: Profile, resolution: Resolution, ours: str) -> str:
    head = f"{folder} [{profile.name}]"
    if resolution.error:
        # pip ends its stderr with "[notice] A new release of pip..." lines: the cause is above them.
        cause = [line for line in resolution.error.strip().splitlines() if line.strip() and not line.startswith("[notice]")] or ["(no message)"]
        return f"{head}: LocalAI's resolution failed: {cause[-1]}  | ours: {ours}"
    cuda = resolution.cuda()
    total = mb([p[2] for p in resolution.packages])
    verdict = (
        f"pull {len(cuda)} nvidia/cuda/triton packages, {mb([p[2] for p in cuda])}"
        if cuda
        else "pull no nvidia/cuda/triton package"
    )
    return f"{head}: LocalAI's files {verdict} ({len(resolution.packages)} packages, {total} in all)  | ours: {ours}"


def totals_line(resolutions) -> str:
    """The sum over the report's rows that resolved: what LocalAI's files pull in all."""
    done = [r for r in resolutions if not r.error]
    cuda = [p for r in done for p in r.cuda()]
    return (
        f"total: {len(done)} of {len(resolutions)} resolved; LocalAI's files pull {len(cuda)} nvidia/cuda/triton "
        f"packages ({mb([p[2] for p in cuda])}) in {sum(1 for r in done if r.cuda())} of them; "
        f"{sum(len(r.packages) for r in done)} packages, {mb([p[2] for r in done for p in r.packages])} in all"
    )


def ours_line(path: str, lockfile: Lockfile | None, profile: Profile) -> str:
    if profile.accelerator is None:
        return "no accelerator here"
    if lockfile is None:
        return f"{path} not generated"
    cuda = [n for n in lockfile.projects() if is_cuda(n)]
    return f"{path}: {len(cuda)} nvidia/cuda/triton packages" + (f" ({', '.join(cuda[:3])}, ...)" if cuda else "")


def ours_by_platform(lines: list[tuple[str, str]]) -> str:
    """Our variants of one profile, per platform ((platform, ours_line), the build machine's first):
    `x86_64: ...; arm64: ...` when there are several."""
    if len(lines) == 1:
        return lines[0][1]
    return "; ".join(f"{platform}: {line}" for platform, line in lines)


@dataclass(frozen=True)
class ResolutionRequest:
    directory: str
    files: FrozenDict[str, str]  # the folder's requirement files by name
    profile: Profile


@rule(desc="Resolve a LocalAI folder as LocalAI's installer does", level=LogLevel.DEBUG)
async def resolve_like_localai(request: ResolutionRequest) -> Resolution:
    directory, files, profile = request.directory, request.files, request.profile
    ordered = [n for n in install_order(profile) if n in files]
    extra_indexes = sorted({url for n in ordered for _, opt, url in index_lines(files[n]) if opt not in ("-f", "--find-links")})
    digest = await Get(
        Digest,
        CreateDigest([FileContent("report.py", _SCRIPT.encode()), *(FileContent(n, files[n].encode()) for n in ordered)]),
    )
    python = await Get(PythonExecutable, InterpreterConstraints, InterpreterConstraints(["CPython==3.11.*"]))
    env = await Get(EnvironmentVars, EnvironmentVarsRequest(_ENV))
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(python.path, "report.py", PYPI, " ".join(extra_indexes), *ordered),
            input_digest=digest,
            env={**env, "PIP_CONFIG_FILE": "/dev/null", "XDG_CONFIG_DIRS": "/nonexistent", "PIP_NO_INPUT": "1"},
            description=f"Resolve {directory} for LocalAI profile {profile.name} as LocalAI's installer does",
            cache_scope=ProcessCacheScope.PER_SESSION,
            timeout_seconds=1800,
        ),
    )
    if result.exit_code != 0:
        return Resolution((), result.stderr.decode()[-2000:] or "the resolver process failed")
    data = json.loads(result.stdout.decode().strip().splitlines()[-1])
    if "error" in data:
        return Resolution((), data["error"])
    return Resolution(tuple((n, v, s) for n, v, s in data["packages"]))


def rules():
    return collect_rules()
