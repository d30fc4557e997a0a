"""What the kitten-tts and kokoro synthesis tests share: the packaged folder started from a deep
path, the WAV read back, and which espeak-ng the server phonemizes with."""
from __future__ import annotations

import hashlib
import os
import shutil
import wave
from dataclasses import dataclass
from pathlib import Path

import grpc

from backends.proto import backend_pb2
from tests.integration.backend_process import dist_path

N_PATH_HOME = 160  # espeak-ng's data path buffer (libespeak-ng/speech.h), NUL included
ESPEAK_DATA = Path("site-packages/espeakng_loader/espeak-ng-data")
ESPEAK_LIBRARY = Path("site-packages/espeakng_loader/libespeak-ng.so")
MEMFD = "/memfd:"  # how /proc/<pid>/maps names a file made by memfd_create


def deep_folder(backend: str, root: Path) -> Path:
    """The packaged cpu folder as if installed under ``root`` at a path that puts its espeak-ng
    data directory past espeak-ng's 160-byte buffer (espeak-ng exit(1)s the whole server when
    the path it is given is cut short). phonemizer resolves the data path it is given
    (Path.resolve), so espeakng_loader/ is a real copy at the deep path; run.sh and start.py are
    copied (start.py finds site-packages/ beside itself) and every other entry of the folder and
    of its site-packages/ is a link to the packaged one, which spares copying torch."""
    folder = dist_path(backend, "cpu").parent.resolve()
    deep = root / ("deep-" + "d" * 120) / f"{backend}-cpu"
    deep.mkdir(parents=True)
    for entry in folder.iterdir():
        if entry.name in ("run.sh", "start.py"):
            shutil.copy2(entry, deep / entry.name)
        elif entry.name != "site-packages":
            (deep / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    (deep / "site-packages").mkdir()
    for entry in (folder / "site-packages").iterdir():
        if entry.name == ESPEAK_DATA.parts[1]:
            shutil.copytree(entry, deep / "site-packages" / entry.name)
        else:
            (deep / "site-packages" / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    data = deep / ESPEAK_DATA
    assert data.is_dir() and not data.is_symlink() and len(os.fsencode(str(data.resolve()))) >= N_PATH_HOME, data
    return deep


@dataclass(frozen=True)
class Wav:
    channels: int
    width: int
    rate: int
    frames: int
    data: bytes


def read_wav(path: Path) -> Wav:
    with wave.open(str(path), "rb") as w:
        return Wav(w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes(), w.readframes(w.getnframes()))


def call(proc, rpc: str, request):
    """``proc``'s ``rpc``, its success asserted; a failure shows the server's output (an
    espeak-ng exit(1), say)."""
    try:
        res = getattr(proc.stub, rpc)(request, timeout=300)
    except grpc.RpcError as e:
        raise AssertionError(f"{rpc}: {e.code()}: {e.details()}\nserver output:\n{proc.output()}") from None
    assert res.success, res.message
    return res


def load(proc, model: Path) -> None:
    call(proc, "LoadModel", backend_pb2.ModelOptions(Model=str(model)))


def speak(proc, dst: Path, text: str, rate: int, **fields) -> Wav:
    """TTS of ``text`` to ``dst``: success, a mono 16-bit WAV at ``rate`` with samples, not all zero."""
    call(proc, "TTS", backend_pb2.TTSRequest(text=text, dst=str(dst), **fields))
    wav = read_wav(dst)
    assert (wav.channels, wav.width, wav.rate) == (1, 2, rate), wav
    assert wav.frames > 0 and len(wav.data) == 2 * wav.frames
    assert any(wav.data), f"{dst}: {wav.frames} samples, all zero (silence)"
    return wav


def mapped_espeak(pid: int) -> dict[str, str]:
    """{path: sha256} of every libespeak-ng file the process has mapped. phonemizer loads the
    library, then a copy of it in a temporary directory it may delete while the copy stays
    mapped: each file is read through /proc/<pid>/map_files, which holds it while mapped."""
    mapped = {}
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and "libespeak-ng" in os.path.basename(fields[5]) and fields[5] not in mapped:
            mapped[fields[5]] = hashlib.sha256(Path(f"/proc/{pid}/map_files/{fields[0]}").read_bytes()).hexdigest()
    return mapped


def assert_folders_own_espeak(pid: int, folder: Path) -> None:
    """The server phonemizes with the espeak-ng its folder carries, never the host's, loaded from
    the folder or from a copy in memory (phonemizer's copy of it, written nowhere)."""
    own = hashlib.sha256((folder / ESPEAK_LIBRARY).read_bytes()).hexdigest()
    mapped = mapped_espeak(pid)
    assert mapped, f"process {pid} has no libespeak-ng mapped"
    assert set(mapped.values()) == {own}, f"espeak-ng libraries other than {folder / ESPEAK_LIBRARY} mapped: {mapped}"
    elsewhere = [p for p in mapped if not (p.startswith(f"{folder}/") or p.startswith(MEMFD))]
    assert not elsewhere, f"espeak-ng copies on a filesystem outside {folder}: {elsewhere}"


def outside_dirs(root: Path) -> dict[str, str]:
    """A fresh, empty TMPDIR and HOME under ``root``, as the server's environment."""
    env = {name: str(root / name.lower()) for name in ("TMPDIR", "HOME")}
    for path in env.values():
        Path(path).mkdir()
    return env


def assert_wrote_nothing(outside: dict[str, str]) -> None:
    """The server's TMPDIR and HOME (outside_dirs) are still empty: it wrote nothing outside its
    folder there (what onnxruntime's telemetry and torch's compile cache would write)."""
    written = sorted(str(p) for path in outside.values() for p in Path(path).rglob("*"))
    assert not written, f"the backend wrote outside its folder: {written}"
