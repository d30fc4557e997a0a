"""`converted_model`: a model file made at build time by a converter script that ships inside a
pinned archive, run with the Python packages of a locked resolve.

  converted_model(
      name="silero-vad",
      archive="3rdparty/native:pywhispercpp-sdist",
      script="whisper.cpp/models/convert-silero-vad-to-ggml.py",   # below the archive's top directory
      args=["--output", "{out}/silero-vad.bin"],
      requirements=["silero-vad", "torch", "numpy"],
      resolve="silero-vad-cpu",
  )

`pants package` writes every file the script leaves in `{out}` to dist/<dir>/<name>/. A
localai_backend variant that depends on the target carries those files as package data
(localai_backend/<dir>/<name>/...), like a native engine. The process is cached by Pants like
any other: the converter runs once per (archive, script, args, requirements).
"""
from __future__ import annotations

from dataclasses import dataclass

from pants.backend.python.subsystems.setup import PythonSetup
from pants.backend.python.util_rules.interpreter_constraints import InterpreterConstraints
from pants.backend.python.util_rules.pex import PexRequest, VenvPex, VenvPexProcess
from pants.backend.python.util_rules.pex_requirements import PexRequirements, Resolve
from pants.core.goals.package import BuiltPackage, BuiltPackageArtifact, PackageFieldSet
from pants.engine.addresses import Address, UnparsedAddressInputs
from pants.engine.fs import AddPrefix, CreateDigest, Digest, FileContent, MergeDigests, RemovePrefix, Snapshot
from pants.engine.process import ProcessResult
from pants.engine.rules import Get, MultiGet, collect_rules, rule
from pants.engine.target import COMMON_TARGET_FIELDS, StringField, StringSequenceField, Target, Targets
from pants.engine.unions import UnionRule
from pants.util.logging import LogLevel
from pants.util.strutil import help_text

from localai.native.rules import ArchiveFile, NativeBuildError

OUT = "converted"
RUNNER = "__localai_convert.py"

# Extracts one member of the archive and runs it as __main__ with the given argv.
RUNNER_SOURCE = '''
import os, runpy, sys, tarfile
archive, member, out = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out, exist_ok=True)
with tarfile.open(archive) as tf:
    names = [m for m in tf.getmembers() if m.isfile() and m.name.partition("/")[2] == member]
    if not names:
        sys.exit(f"{archive}: no {member} below its top directory (check `script`)")
    code = tf.extractfile(names[0]).read().decode()
script = os.path.abspath("__script__.py")
open(script, "w").write(code)
sys.argv = [script] + [a.replace("{out}", out) for a in sys.argv[4:]]
runpy.run_path(script, run_name="__main__")
if not os.listdir(out):
    sys.exit(f"{member} wrote nothing to {{out}}: check `args`")
'''


class ArchiveField(StringField):
    alias = "archive"
    required = True
    help = "Address of a `file` target with an http_source: the pinned archive holding the converter."


class ScriptField(StringField):
    alias = "script"
    required = True
    help = "The converter's path inside the archive, below its top directory."


class ArgsField(StringSequenceField):
    alias = "args"
    default = ()
    help = "Arguments of the converter; `{out}` is the directory whose files are the output."


class ConverterRequirementsField(StringSequenceField):
    alias = "requirements"
    required = True
    help = "Project names the converter imports, taken at their locked versions from `resolve`."


class ConverterResolveField(StringField):
    alias = "resolve"
    required = True
    help = "The Python resolve (pants.toml [python.resolves]) whose lockfile pins `requirements`."


class ConvertedModelTarget(Target):
    alias = "converted_model"
    core_fields = (*COMMON_TARGET_FIELDS, ArchiveField, ScriptField, ArgsField, ConverterRequirementsField,
                   ConverterResolveField)
    help = help_text(__doc__)


@dataclass(frozen=True)
class ConvertedModelFieldSet(PackageFieldSet):
    required_fields = (ArchiveField, ScriptField, ConverterRequirementsField)

    archive: ArchiveField
    script: ScriptField
    args: ArgsField
    requirements: ConverterRequirementsField
    resolve: ConverterResolveField


@rule(desc="Convert a model with a converter from a pinned archive", level=LogLevel.DEBUG)
async def package_converted_model(field_set: ConvertedModelFieldSet, python_setup: PythonSetup) -> BuiltPackage:
    address = field_set.address
    resolve = field_set.resolve.value
    if resolve not in python_setup.resolves:
        raise NativeBuildError(f"{address}: resolve={resolve!r} is not in pants.toml [python.resolves]")
    targets = await Get(
        Targets,
        UnparsedAddressInputs([field_set.archive.value], owning_address=address,
                              description_of_origin=f"the `archive` field of {address}"),
    )
    ics = python_setup.resolves_to_interpreter_constraints.get(resolve) or python_setup.interpreter_constraints
    archive, venv, runner = await MultiGet(
        Get(ArchiveFile, Address, targets[0].address),
        Get(
            VenvPex,
            PexRequest(
                output_filename=f"converter-{address.target_name}.pex",
                internal_only=True,
                requirements=PexRequirements(
                    tuple(field_set.requirements.value),
                    from_superset=Resolve(resolve, False),
                    description_of_origin=f"the `requirements` of {address}",
                ),
                interpreter_constraints=InterpreterConstraints(ics),
            ),
        ),
        Get(Digest, CreateDigest([FileContent(RUNNER, RUNNER_SOURCE.encode())])),
    )
    input_digest = await Get(Digest, MergeDigests([archive.digest, runner]))
    result = await Get(
        ProcessResult,
        VenvPexProcess(
            venv,
            argv=(RUNNER, archive.path, field_set.script.value, OUT, *field_set.args.value),
            input_digest=input_digest,
            description=f"Run {field_set.script.value} for {address}",
            output_directories=(OUT,),
            level=LogLevel.INFO,
            # Converters print; some libraries want a writable HOME for caches.
            extra_env={"HOME": ".", "PYTHONHASHSEED": "0"},
            timeout_seconds=1800,
        ),
    )
    out = await Get(Digest, RemovePrefix(result.output_digest, OUT))
    prefix = f"{address.spec_path}/{address.target_name}"
    final = await Get(Snapshot, AddPrefix(out, prefix))
    return BuiltPackage(final.digest, tuple(BuiltPackageArtifact(f) for f in final.files))


def target_types():
    return [ConvertedModelTarget]


def rules():
    return (*collect_rules(), UnionRule(PackageFieldSet, ConvertedModelFieldSet))
