"""Shared RuleRunner setup for the plugin's tests."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from pants.base.build_root import BuildRoot
from pants.testutil.rule_runner import RuleRunner


def repo_file(path: str) -> str:
    """A file of the real repository, for tests that check the committed data."""
    return Path(path).read_text()


MACROS = "pants-plugins/localai/macros.py"  # the BUILD-file prelude, as pants.toml sets it


class LocalAIRuleRunner(RuleRunner):
    """A RuleRunner whose BUILD files see the real prelude macros, whatever options a test sets."""

    def create_options_bootstrapper(self, args, env):
        return super().create_options_bootstrapper([f"--build-file-prelude-globs={MACROS}", *args], env)

    def empty(self) -> None:
        """Back to a new runner's state, keeping its rule graph: no files (each one invalidated, as
        for a write: the engine memoizes what it read), no options, a new session."""
        root = Path(self.build_root)
        paths = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.relative_to(root).parts[0] != ".pants.d"]
        for child in root.iterdir():
            if child.name == ".pants.d":
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        self._invalidate_for(*paths)
        BuildRoot().path = self.build_root  # a global, set by the runner created last
        self.extra_session_values = {}
        self.set_options([])


# Creating a RuleRunner solves the whole rule graph: about 8 s of one core on CI's machine, most of
# a plugin test's time. The runner a test got is kept, and a later test that asks for the same rules
# gets it emptied instead. Only in a test's body: a fixture's runner (set up once for a module) is
# never kept, and a test asking twice gets two runners.
_KEPT: dict[tuple, tuple[str, LocalAIRuleRunner]] = {}


def _current_test() -> tuple[str, str]:
    """(the running test's id, its phase: setup, call or teardown), from pytest's own variable."""
    test, _, phase = os.environ.get("PYTEST_CURRENT_TEST", "").rpartition(" ")
    return test, phase.strip("()")


def make_rule_runner(*query_rules, extra_target_types=()) -> RuleRunner:
    from pants.backend.python import register as python_backend
    from pants.core import register as core

    from localai import register

    key, (test, phase) = (query_rules, tuple(extra_target_types)), _current_test()
    kept = _KEPT.get(key)
    if phase == "call" and kept and kept[0] != test:
        runner = kept[1]
        runner.empty()
    else:
        runner = LocalAIRuleRunner(
            aliases=[core.build_file_aliases(), register.build_file_aliases()],
            rules=[*core.rules(), *python_backend.rules(), *register.rules(), *query_rules],
            target_types=[
                *core.target_types(),
                *python_backend.target_types(),
                *register.target_types(),
                *extra_target_types,
            ],
        )
    if phase == "call":
        _KEPT[key] = (test, runner)
    runner.write_files({MACROS: (Path(__file__).parent / "macros.py").read_text()})
    return runner


# A pants.toml with the tables the generated resolve entries go into, for tests that write it.
PANTS_TOML = """[GLOBAL]
pants_version = "2.17.1"

[python.resolves]
tests = "lockfiles/tests.lock"

[python.resolves_to_constraints_file]
tests = "3rdparty/accelerators/cpu.txt"

[python-repos]
indexes = []
"""


# The shared runtime targets every backend's macro expansion depends on.
SHARED_RUNTIME = {
    "backends/common/BUILD": 'localai_sources(name="common")\npython_sources(name="py")\n',
    "backends/proto/BUILD": 'localai_proto(name="proto")\n',
}


def backend_files(
    name: str, accels: dict[str, str], base: str = "grpcio-tools==1.85.1\ntorch\n", engines=()
) -> dict[str, str]:
    """A backend folder with the one-line BUILD a user writes: `localai_backend(accelerators=[...])`."""
    files = {
        **SHARED_RUNTIME,
        "3rdparty/accelerators.toml": repo_file("3rdparty/accelerators.toml"),
        f"backends/{name}/requirements.txt": base,
        f"backends/{name}/BUILD": f"localai_backend(accelerators={list(accels)!r}, engines={list(engines)!r})\n",
    }
    for accel, overlay in accels.items():
        if overlay is not None:
            files[f"backends/{name}/requirements-{accel}.txt"] = overlay
    return files


def resolve_options(name: str, accels, *, matrix_pip=None) -> list[str]:
    resolves = {f"{name}-{a}": f"lockfiles/{name}-{a}.lock" for a in accels}
    pip = {f"{name}-{a}": (matrix_pip or {}).get(a, f"3rdparty/accelerators/{a}.txt") for a in accels}
    # As pants.toml: resolves enabled (which also gives each resolve its lockfile target).
    return ["--python-enable-resolves", f"--python-resolves={resolves!r}", f"--python-resolves-to-constraints-file={pip!r}"]


def fake_lockfile(requirements: dict[str, tuple[str, list[tuple[str, str]]]]) -> str:
    """A Pants lockfile: {project: (version, [(url, sha256), ...])} after `//` header lines."""
    locked = [
        {
            "project_name": name,
            "version": version,
            "artifacts": [{"algorithm": "sha256", "hash": h, "url": url} for url, h in artifacts],
            "requires_dists": [],
        }
        for name, (version, artifacts) in sorted(requirements.items())
    ]
    return "// This lockfile was autogenerated by Pants.\n//\n" + json.dumps(
        {"locked_resolves": [{"locked_requirements": locked}]}, indent=2
    )

def pex_cli_options() -> list[str]:
    """The repository's [pex-cli] settings (the pex tool built from PyPI, not GitHub's), which
    the scan's interpreter lookup needs."""
    import toml  # pants: no-infer-dep (toml comes with pantsbuild.pants)

    section = toml.loads(repo_file("pants.toml"))["pex-cli"]
    url = section["url_template"].replace("%(homedir)s", os.path.expanduser("~"))
    return [
        f"--pex-cli-version={section['version']}",
        f"--pex-cli-known-versions={section['known_versions']!r}",
        f"--pex-cli-url-template={url}",
    ]


def repo_options() -> list[str]:
    """pants.toml's settings the build depends on: pip and interpreter, the package index and the
    wheelhouse path mapping, the hermetic subprocess environment (no host pip configuration), and
    the CA bundle ./pants found (PANTS_CA_CERTS_PATH, passed to tests by [test].extra_env_vars):
    behind a TLS-intercepting proxy pex cannot download a wheel without it."""
    import toml  # pants: no-infer-dep (toml comes with pantsbuild.pants)

    home = os.path.expanduser("~")
    conf = toml.loads(repo_file("pants.toml").replace("%(homedir)s", home))
    python, repos = conf["python"], conf["python-repos"]
    return [
        f"--python-interpreter-constraints={python['interpreter_constraints']!r}",
        f"--python-pip-version={python['pip_version']}",
        "--python-enable-resolves",
        f"--python-repos-indexes={repos['indexes']!r}",
        f"--python-repos-path-mappings={repos['path_mappings']!r}",
        f"--subprocess-environment-env-vars={conf['subprocess-environment']['env_vars']!r}",
        *([f"--ca-certs-path={os.environ['PANTS_CA_CERTS_PATH']}"] if os.environ.get("PANTS_CA_CERTS_PATH") else []),
    ]


def _layout_resolve() -> tuple[str, str, list[str]]:
    """The resolve the OCI layout writer runs on (oci/image.py): name, lockfile and interpreter
    constraints, as pants.toml declares them."""
    import toml  # pants: no-infer-dep (toml comes with pantsbuild.pants)

    from localai.oci.image import LAYOUT_RESOLVE

    python = toml.loads(repo_file("pants.toml"))["python"]
    return LAYOUT_RESOLVE, python["resolves"][LAYOUT_RESOLVE], python["resolves_to_interpreter_constraints"][LAYOUT_RESOLVE]


def layout_tool_files() -> dict[str, str]:
    """That resolve's lockfile, for tests that package images."""
    _, lockfile, _ = _layout_resolve()
    return {lockfile: repo_file(lockfile)}


def layout_tool_options() -> list[str]:
    """That resolve, added to (`+`) the resolves a test sets before."""
    name, lockfile, ics = _layout_resolve()
    return [f"--python-resolves=+{ {name: lockfile}!r}", f"--python-resolves-to-interpreter-constraints=+{ {name: ics}!r}"]
