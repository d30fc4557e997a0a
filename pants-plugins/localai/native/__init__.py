"""Native (C/C++) engines as Pants targets: ggml + an engine built with CMake and a hermetic
zig/cmake/ninja toolchain from the `native-toolchain` Python resolve."""
