"""Model path resolution shared by all backends (mirrors LocalAI's behaviour).

LocalAI sends ``ModelOptions.Model`` (a file/dir name relative to its models directory, an
absolute path, or a Hugging Face repo id) and ``ModelOptions.ModelPath`` (the models
directory). A relative ``Model`` is joined to ``ModelPath``.
"""

import os
import re
from typing import Callable, Optional, Tuple

from .errors import InvalidArgument, NotFound, require

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def looks_like_hub_id(name: str) -> bool:
    """True for ``owner/name`` (one slash, no path syntax), the form a hub repo id takes."""
    return bool(_HUB_ID.match(name)) and ".." not in name


def join_model_path(model: str, model_path: str = "") -> str:
    """``model`` joined to ``model_path`` when relative, unchanged when absolute."""
    if not model:
        return ""
    if os.path.isabs(model) or not model_path:
        return model
    return os.path.join(model_path, model)


def resolve_model_path(
    model: str,
    model_path: str = "",
    *,
    allow_remote: Optional[Callable[[str], bool]] = None,
    environ=None,
) -> str:
    """Return the local path of ``model``, or ``model`` itself when it is a remote name.

    - empty ``model`` -> InvalidArgument
    - an existing local candidate (joined path, then ``model`` as given) -> that path
    - otherwise, when ``allow_remote(model)`` is true (default: a hub ``owner/name`` id and
      ``HF_HUB_OFFLINE`` unset) -> ``model`` unchanged, for the library to download
    - otherwise NotFound naming the path that was looked for.
    """
    environ = os.environ if environ is None else environ
    if not model or not model.strip():
        raise InvalidArgument("ModelOptions.Model is empty: name a model file, directory or repo id")
    candidate = join_model_path(model, model_path)
    if os.path.exists(candidate):
        return candidate
    if candidate != model and os.path.exists(model):
        return model
    if allow_remote is None:
        offline = environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false", "False")
        remote_ok = (not offline) and (not os.path.isabs(model)) and looks_like_hub_id(model)
    else:
        remote_ok = allow_remote(model)
    if remote_ok:
        return model
    raise NotFound(f"model not found: {candidate} does not exist")


def model_file(path: str, suffixes: Tuple[str, ...], kind: str) -> str:
    """``path``, or the one file ending in one of ``suffixes`` in directory ``path`` (LocalAI may
    name a model's directory); NotFound when there is no such file. ``kind`` names the file in
    the error, e.g. "GGUF model"."""
    if os.path.isdir(path):
        found = sorted(p for p in os.listdir(path) if p.endswith(suffixes))
        require(len(found) == 1, f"{path}: expected one {kind} file ({'/'.join(suffixes)}) in the directory, found {found}")
        path = os.path.join(path, found[0])
    if not os.path.isfile(path):
        raise NotFound(f"model file not found: {path}")
    return path
