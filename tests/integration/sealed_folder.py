"""A backend folder started as a locked-down host starts it: moved, read-only, no writable HOME,
and nothing written outside it.

`unshare --mount` (util-linux) gives run.sh a private mount namespace in which the root
filesystem is remounted read-only: the folder (a copy somewhere else than where it was built),
HOME, /tmp, /var/tmp and every other path on it refuse writes (EROFS). A backend that writes
anything, inside its folder or outside (a PEX_ROOT, __pycache__, a cache under HOME), fails to
start or to answer, and the folder's files are compared before and after. /dev/shm and /proc are
other filesystems and stay writable. Needs root, as CI runs.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from tests.integration.backend_process import BackendProcess, dist_path, tree_sha256

# HOME names a directory that does not exist, on a read-only filesystem: nothing can create it.
SEALED = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
          'mount -o remount,bind,ro / && HOME=/nonexistent/home exec "$@"', "sealed")


def sealed_copy(backend: str, accelerator: str, where: Path) -> Path:
    """The packaged folder copied to `where` (moved: no path of the build in it is valid there)."""
    built = dist_path(backend, accelerator).parent
    return Path(shutil.copytree(built, where / backend / accelerator, symlinks=True))


class SealedBackend(BackendProcess):
    """BackendProcess of a moved copy of the folder, under SEALED; on exit, the folder must be
    byte for byte what it was (nothing written into it either)."""

    def __init__(self, backend: str, accelerator: str, where: Path, env: dict[str, str] | None = None):
        self.folder = sealed_copy(backend, accelerator, where)
        self.before = tree_sha256(self.folder)
        super().__init__(backend, accelerator, env=env, launcher=SEALED, run_sh=self.folder / "run.sh")

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        if exc[0] is None:
            assert tree_sha256(self.folder) == self.before, f"{self.folder}: the backend wrote into its folder"
