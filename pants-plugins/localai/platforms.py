"""The platforms a backend variant is built for: the one table of their names.

A variant is backend x accelerator x platform. The build machine's platform (linux_x86_64) is
the default and adds nothing to a variant's name; any other platform is cross-built: its PEX
is resolved for a pex complete platform (3rdparty/platforms/<name>-cp311.json, what
`pex3 interpreter inspect --markers --tags` printed for that platform's CPython) and its
variant's name, resolve, lockfile, folder and image carry the platform's suffix:
backends/rerankers:cpu-arm64 -> resolve rerankers-cpu-arm64 -> lockfiles/rerankers-cpu-arm64.lock.
"""
from __future__ import annotations

from dataclasses import dataclass

from localai.errors import LocalAIError


class UnknownPlatformError(LocalAIError):
    pass


@dataclass(frozen=True)
class TargetPlatform:
    name: str  # pip's platform tag, as 3rdparty/accelerators.toml `platforms` lists it
    machine: str  # platform.machine(), the ELF e_machine the audit expects (package/scripts/elf_scan.MACHINES)
    oci_architecture: str  # the OCI image config's / image index's architecture
    suffix: str  # of the variant name: "" on the build machine's platform
    complete_platform: str | None  # the pex complete platform a cross build resolves for

    @property
    def cross(self) -> bool:
        return self.complete_platform is not None


BUILD_PLATFORM = "linux_x86_64"
PLATFORMS = {
    p.name: p
    for p in (
        TargetPlatform("linux_x86_64", "x86_64", "amd64", "", None),
        TargetPlatform("linux_aarch64", "aarch64", "arm64", "-arm64", "3rdparty/platforms/linux_aarch64-cp311.json"),
    )
}


def platform_named(name: str, *, context: str) -> TargetPlatform:
    if name not in PLATFORMS:
        raise UnknownPlatformError(
            f"{context}: unknown platform '{name}'. Known platforms (pants-plugins/localai/platforms.py): "
            f"{', '.join(sorted(PLATFORMS))}."
        )
    return PLATFORMS[name]



def cross_platforms() -> tuple[TargetPlatform, ...]:
    """The platforms whose variants are cross-built here (their names carry a suffix)."""
    return tuple(p for p in PLATFORMS.values() if p.cross)


def platform_with_suffix(suffix: str) -> TargetPlatform:
    """The platform a variant name's suffix names ("" is the build machine's)."""
    return next(p for p in PLATFORMS.values() if p.suffix == suffix)
