"""The file names of a backend folder (dist/backends/<name>/<variant>/), the one table of them.

LocalAI runs a backend folder by its `run.sh`; it owns `metadata.json` in that folder, so our
record is never named that. The image (oci/) carries the folder as it is.
"""
RUN_SH = "run.sh"  # what LocalAI executes
START_PY = "start.py"  # what run.sh runs: the installed backend's entry point (package/install.py)
SITE_PACKAGES = "site-packages"  # the locked distributions and the backend's files, installed and compiled
ARTIFACT = "backend.pex"  # the backend PEX, in pex's packed layout: dist/pex/<name>/<variant>/, not in the folder
PEX_DIR = "pex"  # under dist/: the PEX each folder is installed from
BUILD_RECORD = "build-record.json"  # never metadata.json: LocalAI owns that name
SBOM_NAME = "sbom.cdx.json"  # CycloneDX, the folder's files by sha256
PROVENANCE_NAME = "provenance.intoto.json"  # the in-toto/SLSA statement
ENVELOPE_NAME = "provenance.intoto.dsse.json"  # its DSSE envelope, when a key is set
BACKEND_PACKAGE = "localai_backend"  # in site-packages/ and the PEX: the backend's own files, whatever its folder is called
PORTABLE_PYTHON_DIR = "python"  # the carried CPython, an image layer of its own
