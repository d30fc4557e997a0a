"""`pants publish backends/<name>:<accel>`: push the variant's OCI image to [localai-oci], by digest.

The image is the one `pants package` built (dist/images/<name>/<accel>/layout/); the push
process is push.py (OCI distribution API, standard library). The manifest is PUT under its
digest, which is what the gallery names; a `<tag_prefix><entry>` tag is added for browsing.
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex_environment import PythonExecutable
from pants.core.goals.publish import PublishFieldSet, PublishOutputData, PublishPackages, PublishProcesses, PublishRequest
from pants.engine.env_vars import EnvironmentVars, EnvironmentVarsRequest
from pants.engine.fs import CreateDigest, Digest, MergeDigests
from pants.engine.process import InteractiveProcess
from pants.engine.rules import Get, collect_rules, rule

from localai.model.variant import backend_name, entry_name, variant_name
from localai.oci.image import LAYOUT_DIR, image_dir
from localai.oci.index import INDEX_SUFFIX, ImageIndexPaths, ImageIndexVariantsField
from localai.oci.options import OciSubsystem
from localai.platforms import PLATFORMS
from localai.scripts import script_file
from localai.target_types import AcceleratorField, NotLockableHereField, PlatformField

PUSH_SCRIPT = "push.py"  # oci/scripts/push.py, run as a process
CREDENTIAL_ENV = ("LOCALAI_REGISTRY_USER", "LOCALAI_REGISTRY_PASSWORD", "LOCALAI_REGISTRY_TOKEN")


class PublishImageRequest(PublishRequest):
    pass


@dataclass(frozen=True)
class PublishImageFieldSet(PublishFieldSet):
    publish_request_type = PublishImageRequest
    required_fields = (AcceleratorField, NotLockableHereField)

    accelerator: AcceleratorField
    platform: PlatformField

    def get_output_data(self) -> PublishOutputData:
        return PublishOutputData({"publisher": "localai-oci", **super().get_output_data()})


def entry_of(address_path: str, variant_name: str) -> tuple[str, str]:
    """(backend, entry name) of backends/<name>:<variant> (cpu, cpu-arm64), named as packaging names its image."""
    backend = backend_name(address_path.rstrip("/"))
    return backend, entry_name(backend, variant_name)


async def push_processes(oci: OciSubsystem, entry: str, layout: str, packages) -> PublishProcesses:
    """push.py of one OCI layout (an image or an image index) to [localai-oci], by digest."""
    if not oci.registry:
        return PublishProcesses(
            [PublishPackages(names=(entry,), description="(no registry: set [localai-oci].registry or --localai-oci-registry)")]
        )
    python, env, script = await Get(PythonExecutable, InterpreterConstraints, InterpreterConstraints(["CPython>=3.9,<4"])), await Get(
        EnvironmentVars, EnvironmentVarsRequest(CREDENTIAL_ENV)
    ), await Get(Digest, CreateDigest([script_file("localai.oci.scripts", PUSH_SCRIPT)]))
    digest = await Get(Digest, MergeDigests([script, *(p.digest for p in packages)]))
    argv = [python.path, PUSH_SCRIPT, layout, oci.registry, oci.repository.strip("/")]
    if oci.tag_prefix:
        argv += ["--tag", f"{oci.tag_prefix}{entry}"]
    if oci.use_plain_http():
        argv.append("--plain-http")
    return PublishProcesses(
        [
            PublishPackages(
                names=(f"{oci.reference()} {entry}",),
                process=InteractiveProcess(argv=argv, input_digest=digest, env=dict(env)),
                description=oci.reference(),
            )
        ]
    )


@rule(desc="Publish a backend image")
async def publish_backend_image(request: PublishImageRequest, oci: OciSubsystem) -> PublishProcesses:
    fs = request.field_set
    name = variant_name(fs.accelerator.value, PLATFORMS[fs.platform.value])
    backend, entry = entry_of(fs.address.spec_path, name)
    return await push_processes(oci, entry, f"{image_dir(backend, name)}/{LAYOUT_DIR}", request.packages)


class PublishImageIndexRequest(PublishRequest):
    pass


@dataclass(frozen=True)
class PublishImageIndexFieldSet(PublishFieldSet):
    publish_request_type = PublishImageIndexRequest
    required_fields = (ImageIndexVariantsField,)

    variants: ImageIndexVariantsField

    def get_output_data(self) -> PublishOutputData:
        return PublishOutputData({"publisher": "localai-oci", **super().get_output_data()})


@rule(desc="Publish a backend image index")
async def publish_image_index(request: PublishImageIndexRequest, oci: OciSubsystem) -> PublishProcesses:
    fs = request.field_set
    paths = ImageIndexPaths(backend_name(fs.address.spec_path), fs.address.target_name.removesuffix(INDEX_SUFFIX))
    return await push_processes(oci, paths.ref_name, f"{paths.directory}/{LAYOUT_DIR}", request.packages)


def rules():
    return (*collect_rules(), *PublishImageFieldSet.rules(), *PublishImageIndexFieldSet.rules())
