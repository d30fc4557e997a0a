"""The one "generated file is stale" check that `pants lint` runs for every generated file
(docs/status.md, pants.toml's resolve blocks): current, or name the file and the command."""
from __future__ import annotations

from pants.core.goals.lint import LintResult


def generated_file_result(linter_name: str, path: str, *, current: bool, regenerate: str, problems: str = "") -> LintResult:
    """`problems`: reasons the file cannot be regenerated as is (they fail the check and are printed instead)."""
    if problems:
        message = problems
    elif current:
        message = f"{path} is up to date\n"
    else:
        message = f"{path} is stale or missing: run `{regenerate}`\n"
    return LintResult(exit_code=0 if current and not problems else 1, stdout=message, stderr="", linter_name=linter_name)
