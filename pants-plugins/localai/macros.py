# BUILD-file prelude (pants.toml [GLOBAL].build_file_prelude_globs): the one-line declaration of
# a LocalAI backend. Targets are real targets of the localai plugin; this only names them so
# that `backends/<name>:<accelerator>` is the address a user types.


def localai_backend(accelerators, size_budget_mb=None, not_lockable_here=None, version="0.1.0", engines=(), libraries=(),
                    **kwargs):
    """Declares a backend with one variant per accelerator.

    engines:            native engine targets (e.g. "engines/minilm:avx2") built into every
                        variant's PEX under localai_backend/engines/...
    libraries:          localai_sources targets outside backends/ (e.g. an engine's ctypes
                        binding) carried into every variant's PEX
    accelerators:       names from 3rdparty/accelerators.toml
    size_budget_mb:     {accelerator: MB} budget overrides for the artifact audit
    not_lockable_here:  {accelerator: reason} for variants whose lockfile must be made elsewhere
    """
    if not accelerators or isinstance(accelerators, str):
        raise ValueError(
            f"{build_file_dir()}/BUILD: localai_backend(accelerators=[...]) needs a non-empty list "
            "of accelerator names, e.g. accelerators=[\"cpu\", \"cuda13\"]"
        )
    size_budget_mb = size_budget_mb or {}
    not_lockable_here = not_lockable_here or {}
    for key in list(size_budget_mb) + list(not_lockable_here):
        if key not in accelerators:
            raise ValueError(
                f"{build_file_dir()}/BUILD: '{key}' is given a budget or a note but is not in "
                f"accelerators={list(accelerators)}"
            )
    localai_sources(name="src", dependencies=["backends/common", "backends/proto", *libraries], **kwargs)
    # The same files as a library of the tests resolve, for unit tests in tests/.
    python_sources(name="py", dependencies=["backends/common:py", "backends/proto"])
    for accel in accelerators:
        localai_requirements(name=f"requirements-{accel}", accelerator=accel)
        localai_backend_variant(
            name=accel,
            accelerator=accel,
            dependencies=[":src", *engines],
            size_budget_mb=size_budget_mb.get(accel),
            not_lockable_here=not_lockable_here.get(accel),
            version=version,
        )
