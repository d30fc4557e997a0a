"""The accelerator audit of a built backend artifact, which `pants package` runs on what it
builds and `pants lint` (lint/audit.py) reports.

Names are not enough: PyPI's torchaudio 2.11 declares no dependency and is a CUDA build. So a
built artifact is also audited at the binary level: every ELF file in it (which is every ELF of
every wheel the lockfile puts into it, grouped by wheel) is read for the libraries it NEEDs, and
a GPU runtime library the accelerator does not allow (`allowed_gpu_libs`) fails the audit,
naming wheel, file and library. The scan (package/scripts/elf_scan.py) runs as a Pants process
keyed on the artifact's digest, so an unchanged artifact is not read again (local or remote
cache). Every ELF must also be built for the artifact's platform (e_machine): an x86_64 library
in an arm64 artifact, or the reverse, fails, naming wheel and file.
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass

from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import PythonExecutable
from pants.engine.fs import (
    CreateDigest,
    Digest,
    DigestContents,
    DigestEntries,
    DigestSubset,
    MergeDigests,
    PathGlobs,
)
from pants.engine.process import FallibleProcessResult, Process
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.util.logging import LogLevel

from localai.model.accelerators import MATRIX_PATH, Accelerator, canonical_soname, is_gpu_runtime
from localai.model.artifact import BackendPex, BackendVariantFieldSet, FileTree, VariantPexRequest
from localai.model.folder import ARTIFACT
from localai.model.variant import BackendVariant, BackendVariantRequest
from localai.scripts import script_file


def project_of_wheel(filename: str) -> str:
    return filename.split("-", 1)[0].replace("_", "-").lower()


def version_of_wheel(filename: str) -> str:
    parts = filename.split("-")
    return parts[1] if len(parts) > 2 else ""


ELF_SCAN_SCRIPT = "__localai_elf_scan.py"


@dataclass(frozen=True)
class ElfScanRequest:
    """Scan ``paths`` in ``digest`` (packed PEX directories, zipapps, wheels) for ELF files."""

    digest: Digest
    paths: tuple[str, ...]
    python: str  # "CPython==3.11.*": any interpreter runs the stdlib-only scanner


@dataclass(frozen=True)
class ElfFile:
    dist: str  # the wheel it comes from ("" for the PEX's own sources)
    file: str  # path inside the archive
    needed: tuple[str, ...]
    machine: str = "x86_64"  # e_machine, as platform.machine() names it (elf_scan.MACHINES)


@dataclass(frozen=True)
class ElfScan:
    files: tuple[ElfFile, ...]


@rule(desc="Read the libraries every ELF file NEEDs", level=LogLevel.DEBUG)
async def scan_elves(request: ElfScanRequest) -> ElfScan:
    script_digest = await Get(Digest, CreateDigest([script_file("localai.package.scripts", "elf_scan.py", ELF_SCAN_SCRIPT)]))
    input_digest = await Get(Digest, MergeDigests([request.digest, script_digest]))
    python = await Get(PythonExecutable, InterpreterConstraints, InterpreterConstraints([request.python]))
    result = await Get(
        FallibleProcessResult,
        Process(
            argv=(python.path, ELF_SCAN_SCRIPT, *request.paths),
            input_digest=input_digest,
            description=f"Read the DT_NEEDED libraries of every ELF file in {', '.join(request.paths)}",
            level=LogLevel.DEBUG,
        ),
    )
    if result.exit_code != 0:
        raise ValueError(
            f"the ELF scan of {', '.join(request.paths)} failed (exit {result.exit_code}): {result.stderr.decode()}"
        )
    entries = json.loads(result.stdout.decode())
    return ElfScan(tuple(ElfFile(e["dist"], e["file"], tuple(e["needed"]), e["machine"]) for e in entries))


def wrong_machine_lines(platform: str, files: tuple[ElfFile, ...]) -> tuple[str, ...]:
    """One line per ELF file not built for ``platform`` (platform.machine() spelling: x86_64,
    aarch64): such a file cannot load on the machines the artifact is for."""
    lines = []
    for f in files:
        if f.machine != platform:
            where = f"wheel {f.dist}" if f.dist else "the backend's own files"
            lines.append(
                f"{where}: {f.file} is an {f.machine} ELF in an artifact for {platform} (it cannot load there); "
                f"take the {platform} build of {project_of_wheel(f.dist) if f.dist else 'it'} (a lockfile or "
                f"engine for the artifact's platform)"
            )
    return tuple(lines)


def gpu_link_lines(accelerator: Accelerator, files: tuple[ElfFile, ...]) -> tuple[str, ...]:
    """One line per ELF file that NEEDs a GPU runtime library the accelerator does not allow, or
    (for an accelerator that allows some) one that neither the artifact ships (an ELF file of
    that name, e.g. from an nvidia-*-cu12 wheel) nor the accelerator's ``system_libs`` (the
    driver) provide: such a variant imports only where someone installed that library by hand."""
    shipped = {canonical_soname(f.file.rsplit("/", 1)[-1]) for f in files}
    lines = []
    for f in files:
        where = f"wheel {f.dist}" if f.dist else "the backend's own files"
        bad = accelerator.gpu_libs_in(f.needed)
        if bad:
            lines.append(
                f"{where}: {f.file} NEEDs {', '.join(bad)}, a GPU runtime the {accelerator.name} accelerator "
                f"does not allow (it fails to load without it); take a {accelerator.name} build of "
                f"{project_of_wheel(f.dist) if f.dist else 'it'} or drop it from the requirements"
            )
        missing = sorted(
            lib
            for lib in set(f.needed) - set(bad)
            if is_gpu_runtime(lib)
            and canonical_soname(lib) not in shipped
            and not any(fnmatch.fnmatchcase(lib, pat) for pat in accelerator.system_libs)
        )
        if missing:
            lines.append(
                f"{where}: {f.file} NEEDs {', '.join(missing)}, which neither the lockfile's wheels nor the "
                f"{accelerator.name} accelerator's system_libs ({', '.join(accelerator.system_libs) or 'none'}) "
                f"provide; add the runtime wheels that ship it (e.g. nvidia-*-cu12 / nvidia-* for CUDA 13) to "
                f"the variant's requirements, or declare it in system_libs of 3rdparty/accelerators.toml"
            )
    return tuple(lines)


def exempt_runtime_lines(exempt: tuple[str, ...], files: tuple[ElfFile, ...]) -> tuple[str, ...]:
    """One line per GPU runtime library that a project the variant's BUILD `exempt`s from the
    forbidden names ships: an exemption spares a name (a binding that loads the driver only when
    called), never a GPU runtime inside the artifact. What such files NEED is gpu_link_lines'."""
    return tuple(
        f"wheel {f.dist}: {f.file} is a GPU runtime library, in {project_of_wheel(f.dist)}, which the variant's BUILD "
        f"`exempt`s from the forbidden names: an exemption cannot hold a GPU runtime; drop the exemption "
        f"([localai.overrides.<folder>] exempt in {MATRIX_PATH}) and the requirement that pulls it"
        for f in files
        if f.dist and project_of_wheel(f.dist) in exempt and is_gpu_runtime(f.file.rsplit("/", 1)[-1])
    )


# The libraries a manylinux wheel may NEED from the host (PEP 599's policy, as auditwheel lists it
# for manylinux2014 and every later manylinux_2_x), glibc's libmvec (soundfile's libsndfile and
# av's libx265 NEED it; it is part of the glibc a manylinux_2_28 host has), and each platform's
# dynamic loader.
MANYLINUX_SYSTEM_LIBS = frozenset(
    {
        "libgcc_s.so.1", "libstdc++.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libc.so.6", "libnsl.so.1",
        "libutil.so.1", "libpthread.so.0", "libresolv.so.2", "libX11.so.6", "libXext.so.6", "libXrender.so.1",
        "libICE.so.6", "libSM.so.6", "libGL.so.1", "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0",
        "libz.so.1", "libexpat.so.1", "libcrypt.so.1", "libmvec.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
    }
)


# ELF files their own package imports only as an option, falling back when a library they NEED
# is missing: numba's tbb and omp threading layers (numba/np/ufunc/parallel.py tries tbb, then omp,
# then its own workqueue, catching the ImportError). Their host libraries are reported, not failed.
OPTIONAL_ELF_FILES = {
    "numba": (("numba/np/ufunc/tbbpool.*", "numba/np/ufunc/omppool.*"), "numba falls back to its workqueue threading layer"),
}


def optional_fallback(f: ElfFile) -> str | None:
    """Why ``f`` may lack a library (OPTIONAL_ELF_FILES), or None."""
    globs, why = OPTIONAL_ELF_FILES.get(project_of_wheel(f.dist), ((), None)) if f.dist else ((), None)
    return why if any(fnmatch.fnmatchcase(f.file, g) for g in globs) else None


def host_library_lines(
    accelerator: Accelerator, files: tuple[ElfFile, ...], optional: bool = False, declared: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """One line per ELF file that NEEDs a library the artifact does not ship and a manylinux host
    need not have (chatterbox:cpu-arm64's torchaudio 2.6.0 NEEDs libgomp.so.1, which torch's
    aarch64 wheel does not bundle): it loads only where the host happens to have it. GPU
    runtimes are gpu_link_lines' business; the accelerator's system_libs are the driver's.
    ``optional``: the lines of OPTIONAL_ELF_FILES instead, which their package can do without.
    ``declared``: the variant's BUILD `host_libs`, which it requires of its host (declared_host_lines)."""
    shipped = {f.file.rsplit("/", 1)[-1] for f in files}
    lines = []
    for f in files:
        fallback = optional_fallback(f)
        if bool(fallback) != optional:
            continue
        missing = sorted(
            lib
            for lib in set(f.needed)
            if lib not in shipped
            and lib not in MANYLINUX_SYSTEM_LIBS
            and not is_gpu_runtime(lib)
            and not any(fnmatch.fnmatchcase(lib, pat) for pat in accelerator.system_libs)
            and lib not in declared
        )
        if missing:
            where = f"wheel {f.dist}" if f.dist else "the backend's own files"
            lines.append(
                f"{where}: {f.file} NEEDs {', '.join(missing)}, which the artifact does not ship and a manylinux "
                f"host need not have (it loads only where the host has it); "
                + (f"optional: {fallback} without it" if fallback else
                   f"take a build of {project_of_wheel(f.dist) if f.dist else 'it'} that bundles it, add the wheel that "
                   f"ships it, or declare it in the accelerator's system_libs ({MATRIX_PATH}) if every host of the "
                   f"variant has it")
            )
    return tuple(lines)


def declared_host_lines(declared: tuple[tuple[str, str], ...], files: tuple[ElfFile, ...]) -> tuple[str, ...]:
    """One line per BUILD `host_libs` library and the files that NEED it, with the reason; a
    declared library nothing NEEDs is named too, so a stale declaration shows."""
    lines = []
    for lib, why in declared:
        users = sorted({f"{f.dist or 'the backend'}: {f.file}" for f in files if lib in f.needed})
        lines.append(
            f"{lib} is required of the host (BUILD `host_libs`: {why}); NEEDed by "
            + (", ".join(users) if users else "no ELF file: drop it from host_libs")
        )
    return tuple(lines)


@dataclass(frozen=True)
class ArtifactAudit:
    forbidden: tuple[str, ...]
    size_line: str
    over_budget: bool
    gpu_links: tuple[str, ...] = ()
    elf_files: int = 0
    wrong_machine: tuple[str, ...] = ()
    host_libs: tuple[str, ...] = ()
    optional_host_libs: tuple[str, ...] = ()  # of OPTIONAL_ELF_FILES: reported, not failed
    declared_host_libs: tuple[str, ...] = ()  # of BUILD `host_libs`: reported, not failed


def judge_size(pex_path: str, size_bytes: int, budget_mb: int) -> tuple[str, bool]:
    size_mb = size_bytes / 1e6
    return f"{pex_path}: {size_mb:.1f} MB of a {budget_mb} MB budget ({100 * size_mb / budget_mb:.0f}%)", size_mb > budget_mb


@dataclass(frozen=True)
class BuiltArtifact:
    """A built backend PEX (pex's packed layout: a directory at ``pex_path`` in ``digest``) to
    audit for ``accelerator``."""

    digest: Digest
    pex_path: str
    accelerator: Accelerator
    budget_mb: int
    platform: str = "x86_64"  # the machine it runs on (platform.machine() spelling): every ELF's e_machine
    exempt: tuple[str, ...] = ()  # forbidden projects its variant may hold (BackendVariant.exempt)
    shown_as: str = ""  # its path in messages (dist/...), when ``pex_path`` is relative to a digest of its own
    host_libs: tuple[tuple[str, str], ...] = ()  # (soname, why): BackendVariant.host_libs


@rule(desc="Audit a built backend artifact", level=LogLevel.DEBUG)
async def audit_built_artifact(artifact: BuiltArtifact) -> ArtifactAudit:
    accel = artifact.accelerator
    info = await Get(DigestContents, DigestSubset(artifact.digest, PathGlobs([f"{artifact.pex_path}/PEX-INFO"])))
    if not info:
        raise ValueError(f"{artifact.pex_path}: no PEX-INFO, so not a packed PEX: the audit cannot list its wheels")
    dists = sorted(json.loads(info[0].content)["distributions"])
    tree = FileTree.of(await Get(DigestEntries, Digest, artifact.digest), artifact.pex_path)
    size_line, over_budget = judge_size(artifact.shown_as or artifact.pex_path, tree.size, artifact.budget_mb)
    # The wheels (.deps/, which change with the lock alone) apart from the backend's own files, so
    # an edit of backend.py rescans only the latter: `pants package` audits every build.
    wheels, own = await MultiGet(
        Get(Digest, DigestSubset(artifact.digest, PathGlobs([f"{artifact.pex_path}/.deps/**"]))),
        Get(Digest, DigestSubset(artifact.digest, PathGlobs([f"{artifact.pex_path}/**", f"!{artifact.pex_path}/.deps/**"]))),
    )
    scans = await MultiGet(Get(ElfScan, ElfScanRequest(d, (artifact.pex_path,), accel.python)) for d in (wheels, own))
    scan = ElfScan(scans[0].files + scans[1].files)
    return ArtifactAudit(
        forbidden=accel.forbidden_in(((project_of_wheel(d), version_of_wheel(d)) for d in dists), artifact.exempt),
        size_line=size_line,
        over_budget=over_budget,
        gpu_links=gpu_link_lines(accel, scan.files) + exempt_runtime_lines(artifact.exempt, scan.files),
        elf_files=len(scan.files),
        wrong_machine=wrong_machine_lines(artifact.platform, scan.files),
        host_libs=host_library_lines(accel, scan.files, declared=tuple(lib for lib, _ in artifact.host_libs)),
        optional_host_libs=host_library_lines(accel, scan.files, optional=True),
        declared_host_libs=declared_host_lines(artifact.host_libs, scan.files),
    )


@rule(desc="Audit a backend artifact", level=LogLevel.DEBUG)
async def audit_artifact(field_set: BackendVariantFieldSet) -> ArtifactAudit:
    bv = await Get(BackendVariant, BackendVariantRequest(field_set.address))
    # The PEX alone, as `pants package` builds and audits it: the same requests, answered once.
    pex = await Get(BackendPex, VariantPexRequest(field_set.address))
    return await Get(ArtifactAudit, BuiltArtifact, built_artifact(bv, pex.digest))


def built_artifact(bv: BackendVariant, digest: Digest) -> BuiltArtifact:
    """The audit request of ``bv``'s PEX (backend.pex/ at ``digest``'s root): packaging's and lint's."""
    v = bv.variant
    return BuiltArtifact(
        digest, ARTIFACT, v.accelerator, bv.size_budget_mb, v.platform.machine, tuple(bv.exempt), f"{v.folder}/{ARTIFACT}",
        tuple(bv.host_libs.items()),
    )


def rules():
    return collect_rules()
