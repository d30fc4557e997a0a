/* The shared library is minilm_core linked whole-archive; CMake needs one source file. */
typedef int minilm_abi_anchor_unused;
