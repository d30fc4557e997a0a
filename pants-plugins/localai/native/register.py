"""Entry points of the native-engine part of the localai plugin (wired in localai/register.py)."""
from pants.build_graph.build_file_aliases import BuildFileAliases

from localai.native import cpu_levels, model_conversion
from localai.native import rules as native_rules
from localai.native import target_types as native_target_types


def build_file_aliases():
    # The CPU level names for BUILD files and the prelude (the localai_engine macro's default).
    return BuildFileAliases(objects={"LOCALAI_CPU_LEVELS": cpu_levels.CPU_LEVELS})


def target_types():
    return [*native_target_types.target_types(), *model_conversion.target_types()]


def rules():
    return (*native_rules.rules(), *cpu_levels.rules(), *model_conversion.rules())
