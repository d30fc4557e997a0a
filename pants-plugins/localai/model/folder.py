"""The file names of a backend folder (dist/backends/<name>/<variant>/), the one table of them.

LocalAI runs a backend folder by its `run.sh`; it owns `metadata.json` in that folder, so our
record is never named that. The image (oci/) carries the folder as it is.
"""
RUN_SH = "run.sh"  # what LocalAI executes
ARTIFACT = "backend.pex"  # the backend PEX, in pex's packed layout
BUILD_RECORD = "build-record.json"  # never metadata.json: LocalAI owns that name
SBOM_NAME = "sbom.cdx.json"  # CycloneDX, the folder's files by sha256
PROVENANCE_NAME = "provenance.intoto.json"  # the in-toto/SLSA statement
ENVELOPE_NAME = "provenance.intoto.dsse.json"  # its DSSE envelope, when a key is set
BACKEND_PACKAGE = "localai_backend"  # in the PEX: the backend's own files, whatever its folder is called
PORTABLE_PYTHON_DIR = "python"  # the carried CPython, an image layer of its own
