"""A backend folder's layout: the one owner of what differs between our backends
(`layout="backend"`, backends/<name>/) and LocalAI's own folders imported unchanged
(`layout="localai"`, backends/localai/<name>/)."""
from __future__ import annotations

from dataclasses import dataclass

from localai.model.folder import BACKEND_PACKAGE
from localai.target_types import BACKEND_LAYOUT, LOCALAI_LAYOUT


@dataclass(frozen=True)
class Layout:
    name: str  # the `layout` field's value
    # LocalAI's own folder: its requirements are read LocalAI's way (model/localai_layout.py), its
    # sources assembled as its backend.py expects, its stubs come from the `grpc-stubs` resolve
    # (so it pins no grpcio-tools of its own), and docs/status.md lists the pins the policy replaced.
    imported: bool
    entry_point: str  # what the PEX runs

    @property
    def pins_grpcio_tools(self) -> bool:
        """Our backends compile backend.proto with the grpcio-tools their requirements.txt pins."""
        return not self.imported


LAYOUTS = {  # by the `layout` field's value (LayoutField checks it is one of these)
    layout.name: layout
    for layout in (
        Layout(BACKEND_LAYOUT, imported=False, entry_point=f"{BACKEND_PACKAGE}.backend:main"),
        # pex runs a module given without a function as __main__; for a package, its __main__.py
        # (package/localai_main.py), which runs backend.py as `python backend.py` does.
        Layout(LOCALAI_LAYOUT, imported=True, entry_point=BACKEND_PACKAGE),
    )
}
