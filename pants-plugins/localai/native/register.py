"""Entry points of the native-engine part of the localai plugin (wired in localai/register.py)."""
from localai.native import model_conversion
from localai.native import rules as native_rules
from localai.native import target_types as native_target_types


def target_types():
    return [*native_target_types.target_types(), *model_conversion.target_types()]


def rules():
    return (*native_rules.rules(), *model_conversion.rules())
