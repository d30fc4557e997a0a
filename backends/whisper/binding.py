"""ctypes binding of whisper.cpp 1.8.5's C API (include/whisper.h), standard library only (and
backends.common's ctypes loader).

The structs passed by value (whisper_context_params, whisper_full_params, whisper_vad_params,
whisper_vad_context_params, whisper_token_data) are declared field for field from the pinned
header; `Library.check_abi()` compares the defaults whisper.cpp fills in against the values its
source sets, so a header that drifted from these declarations fails loudly at load time instead
of corrupting parameters. One binding for the whisper backend (its own module), tests and benchmarks
(`backends.whisper.binding` in the tests resolve).
"""
from __future__ import annotations

import collections
import ctypes
import threading
from dataclasses import dataclass, field

from backends.common.native_library import load_library

SAMPLE_RATE = 16000
GREEDY, BEAM_SEARCH = 0, 1

c_bool, c_int, c_float, c_char_p, c_void_p, c_size_t = (
    ctypes.c_bool, ctypes.c_int, ctypes.c_float, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)


class WhisperAheads(ctypes.Structure):
    _fields_ = [("n_heads", c_size_t), ("heads", c_void_p)]


class ContextParams(ctypes.Structure):
    _fields_ = [("use_gpu", c_bool), ("flash_attn", c_bool), ("gpu_device", c_int),
                ("dtw_token_timestamps", c_bool), ("dtw_aheads_preset", c_int), ("dtw_n_top", c_int),
                ("dtw_aheads", WhisperAheads), ("dtw_mem_size", c_size_t)]


class VadParams(ctypes.Structure):
    _fields_ = [("threshold", c_float), ("min_speech_duration_ms", c_int), ("min_silence_duration_ms", c_int),
                ("max_speech_duration_s", c_float), ("speech_pad_ms", c_int), ("samples_overlap", c_float)]


class VadContextParams(ctypes.Structure):
    _fields_ = [("n_threads", c_int), ("use_gpu", c_bool), ("gpu_device", c_int)]


class _Greedy(ctypes.Structure):
    _fields_ = [("best_of", c_int)]


class _Beam(ctypes.Structure):
    _fields_ = [("beam_size", c_int), ("patience", c_float)]


NEW_SEGMENT_CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, c_int, c_void_p)
ABORT_CALLBACK = ctypes.CFUNCTYPE(c_bool, c_void_p)  # ggml_abort_callback: true stops whisper_full


class FullParams(ctypes.Structure):
    _fields_ = [
        ("strategy", c_int),
        ("n_threads", c_int), ("n_max_text_ctx", c_int), ("offset_ms", c_int), ("duration_ms", c_int),
        ("translate", c_bool), ("no_context", c_bool), ("no_timestamps", c_bool), ("single_segment", c_bool),
        ("print_special", c_bool), ("print_progress", c_bool), ("print_realtime", c_bool),
        ("print_timestamps", c_bool),
        ("token_timestamps", c_bool), ("thold_pt", c_float), ("thold_ptsum", c_float), ("max_len", c_int),
        ("split_on_word", c_bool), ("max_tokens", c_int),
        ("debug_mode", c_bool), ("audio_ctx", c_int),
        ("tdrz_enable", c_bool),
        ("suppress_regex", c_char_p),
        ("initial_prompt", c_char_p), ("carry_initial_prompt", c_bool),
        ("prompt_tokens", c_void_p), ("prompt_n_tokens", c_int),
        ("language", c_char_p), ("detect_language", c_bool),
        ("suppress_blank", c_bool), ("suppress_nst", c_bool),
        ("temperature", c_float), ("max_initial_ts", c_float), ("length_penalty", c_float),
        ("temperature_inc", c_float), ("entropy_thold", c_float), ("logprob_thold", c_float),
        ("no_speech_thold", c_float),
        ("greedy", _Greedy), ("beam_search", _Beam),
        ("new_segment_callback", c_void_p), ("new_segment_callback_user_data", c_void_p),
        ("progress_callback", c_void_p), ("progress_callback_user_data", c_void_p),
        ("encoder_begin_callback", c_void_p), ("encoder_begin_callback_user_data", c_void_p),
        ("abort_callback", c_void_p), ("abort_callback_user_data", c_void_p),
        ("logits_filter_callback", c_void_p), ("logits_filter_callback_user_data", c_void_p),
        ("grammar_rules", c_void_p), ("n_grammar_rules", c_size_t), ("i_start_rule", c_size_t),
        ("grammar_penalty", c_float),
        ("vad", c_bool), ("vad_model_path", c_char_p),
        ("vad_params", VadParams),
    ]


class TokenData(ctypes.Structure):
    _fields_ = [("id", c_int), ("tid", c_int), ("p", c_float), ("plog", c_float), ("pt", c_float),
                ("ptsum", c_float), ("t0", ctypes.c_int64), ("t1", ctypes.c_int64), ("t_dtw", ctypes.c_int64),
                ("vlen", c_float)]


_SIGNATURES = {
    "whisper_version": ([], c_char_p),
    "whisper_print_system_info": ([], c_char_p),
    "whisper_log_set": ([c_void_p, c_void_p], None),
    "whisper_context_default_params_by_ref": ([], ctypes.POINTER(ContextParams)),
    "whisper_free_context_params": ([ctypes.POINTER(ContextParams)], None),
    "whisper_full_default_params_by_ref": ([c_int], ctypes.POINTER(FullParams)),
    "whisper_free_params": ([ctypes.POINTER(FullParams)], None),
    "whisper_init_from_file_with_params": ([c_char_p, ContextParams], c_void_p),
    "whisper_free": ([c_void_p], None),
    "whisper_init_state": ([c_void_p], c_void_p),
    "whisper_free_state": ([c_void_p], None),
    "whisper_full_with_state": ([c_void_p, c_void_p, FullParams, ctypes.POINTER(c_float), c_int], c_int),
    "whisper_full_n_segments_from_state": ([c_void_p], c_int),
    "whisper_full_lang_id_from_state": ([c_void_p], c_int),
    "whisper_lang_str": ([c_int], c_char_p),
    "whisper_lang_id": ([c_char_p], c_int),
    "whisper_is_multilingual": ([c_void_p], c_int),
    "whisper_n_vocab": ([c_void_p], c_int),
    "whisper_model_ftype": ([c_void_p], c_int),
    "whisper_token_eot": ([c_void_p], c_int),
    "whisper_full_get_segment_t0_from_state": ([c_void_p, c_int], ctypes.c_int64),
    "whisper_full_get_segment_t1_from_state": ([c_void_p, c_int], ctypes.c_int64),
    "whisper_full_get_segment_text_from_state": ([c_void_p, c_int], c_char_p),
    "whisper_full_n_tokens_from_state": ([c_void_p, c_int], c_int),
    "whisper_full_get_token_id_from_state": ([c_void_p, c_int, c_int], c_int),
    "whisper_full_get_token_text_from_state": ([c_void_p, c_void_p, c_int, c_int], c_char_p),
    "whisper_full_get_token_data_from_state": ([c_void_p, c_int, c_int], TokenData),
    "whisper_vad_default_params": ([], VadParams),
    "whisper_vad_default_context_params": ([], VadContextParams),
    "whisper_vad_init_from_file_with_params": ([c_char_p, VadContextParams], c_void_p),
    "whisper_vad_detect_speech": ([c_void_p, ctypes.POINTER(c_float), c_int], c_bool),
    "whisper_vad_n_probs": ([c_void_p], c_int),
    "whisper_vad_probs": ([c_void_p], ctypes.POINTER(c_float)),
    "whisper_vad_segments_from_probs": ([c_void_p, VadParams], c_void_p),
    "whisper_vad_segments_n_segments": ([c_void_p], c_int),
    "whisper_vad_segments_get_segment_t0": ([c_void_p, c_int], c_float),
    "whisper_vad_segments_get_segment_t1": ([c_void_p, c_int], c_float),
    "whisper_vad_free_segments": ([c_void_p], None),
    "whisper_vad_free": ([c_void_p], None),
}

# ggml_log_callback: void (*)(enum ggml_log_level level, const char * text, void * user_data)
_LOG_CALLBACK = ctypes.CFUNCTYPE(None, c_int, c_char_p, c_void_p)


class WhisperError(Exception):
    pass


GGML_MAGIC = 0x67676D6C


def check_model_file(path) -> None:
    """Validates a ggml Whisper file's header, mel filters and vocabulary before whisper.cpp
    reads it: whisper.cpp trusts these numbers (a zeroed header aborts the process inside ggml),
    and a backend must answer a bad file with an error, not die. Tensors are checked by
    whisper.cpp itself (it reports wrong shapes and short reads as load failures)."""
    import os
    import struct

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(4 * 12)
        if len(head) < 48:
            raise WhisperError(f"{path}: {size} bytes, too short for a ggml Whisper header")
        magic, *hp = struct.unpack("<12i", head)
        if magic != GGML_MAGIC:
            raise WhisperError(f"{path}: not a ggml Whisper model (magic {magic:#x}, expected {GGML_MAGIC:#x}; "
                               "GGUF files are not whisper.cpp models)")
        names = ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
                 "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype")
        h = dict(zip(names, hp))
        limits = {"n_vocab": (51864, 52000), "n_audio_ctx": (1, 1500), "n_audio_state": (1, 8192),
                  "n_audio_head": (1, 256), "n_audio_layer": (1, 256), "n_text_ctx": (1, 4096),
                  "n_text_state": (1, 8192), "n_text_head": (1, 256), "n_text_layer": (1, 256),
                  "n_mels": (80, 128), "ftype": (0, 1040)}
        bad = {k: h[k] for k, (lo, hi) in limits.items() if not lo <= h[k] <= hi}
        for st, hd in (("n_audio_state", "n_audio_head"), ("n_text_state", "n_text_head")):
            if not bad and h[st] % h[hd]:
                bad[st] = f"{h[st]} not divisible by {hd}={h[hd]}"
        if bad:
            raise WhisperError(f"{path}: hyperparameters out of range for a Whisper model: {bad}")
        n_mel, n_fft = struct.unpack("<2i", f.read(8))
        if not (1 <= n_mel <= 256 and 1 <= n_fft <= 4096) or f.tell() + 4 * n_mel * n_fft > size:
            raise WhisperError(f"{path}: bad mel filterbank {n_mel}x{n_fft}")
        f.seek(4 * n_mel * n_fft, 1)
        (n_words,) = struct.unpack("<i", f.read(4) or b"\xff\xff\xff\xff")
        if not 0 <= n_words <= h["n_vocab"]:
            raise WhisperError(f"{path}: vocabulary of {n_words} words for n_vocab={h['n_vocab']}")
        for _ in range(n_words):
            raw = f.read(4)
            if len(raw) < 4:
                raise WhisperError(f"{path}: truncated vocabulary")
            (n,) = struct.unpack("<i", raw)
            if not 0 <= n <= 4096 or f.tell() + n > size:
                raise WhisperError(f"{path}: bad vocabulary entry length {n}")
            f.seek(n, 1)
        if f.tell() >= size:
            raise WhisperError(f"{path}: no tensors after the vocabulary (truncated file)")


def _floats(samples) -> tuple[ctypes.Array, int]:
    """A float32 buffer of `samples` (a numpy float32 array, array('f') or a sequence)."""
    try:
        import numpy

        arr = numpy.ascontiguousarray(samples, dtype=numpy.float32)
        return arr.ctypes.data_as(ctypes.POINTER(c_float)), len(arr), arr  # keep arr alive
    except ImportError:  # pragma: no cover - numpy is in every resolve that serves this
        buf = (c_float * len(samples))(*samples)
        return buf, len(samples), buf


@dataclass
class Word:
    text: str
    start_ms: int
    end_ms: int


@dataclass
class Segment:
    index: int
    start_ms: int
    end_ms: int
    text: str
    tokens: list[int]
    words: list[Word] = field(default_factory=list)


class Library:
    """libwhisper.so loaded with ctypes; whisper.cpp's log goes to `log_tail` (and stdout if
    `verbose`): load errors quote its reason."""

    def __init__(self, path, verbose: bool = False):
        self.path = str(path)
        self.lib = load_library(self.path, _SIGNATURES, "whisper.cpp")
        # whisper.cpp logs to stderr; keep its last lines instead, to say why a load failed.
        self.log_tail: collections.deque[str] = collections.deque(maxlen=12)

        def _log(level, text, user):
            line = (text or b"").decode("utf-8", "replace").rstrip()
            if line:
                self.log_tail.append(line)
                if verbose:
                    print(line, flush=True)

        self._log = _LOG_CALLBACK(_log)
        self.lib.whisper_log_set(ctypes.cast(self._log, c_void_p), None)
        self.check_abi()

    def version(self) -> str:
        return self.lib.whisper_version().decode()

    def system_info(self) -> str:
        return self.lib.whisper_print_system_info().decode()

    def full_default_params(self, strategy: int = GREEDY) -> FullParams:
        ptr = self.lib.whisper_full_default_params_by_ref(strategy)
        params = FullParams.from_buffer_copy(ptr.contents)
        self.lib.whisper_free_params(ptr)
        return params

    def context_default_params(self) -> ContextParams:
        ptr = self.lib.whisper_context_default_params_by_ref()
        params = ContextParams.from_buffer_copy(ptr.contents)
        self.lib.whisper_free_context_params(ptr)
        return params

    def check_abi(self) -> None:
        """The defaults whisper.cpp 1.8.5 sets (src/whisper.cpp, whisper_full_default_params and
        friends) read back through these struct declarations: any layout drift shows here."""
        p = self.full_default_params(GREEDY)
        b = self.full_default_params(BEAM_SEARCH)
        v = self.lib.whisper_vad_default_params()
        c = self.context_default_params()
        got = dict(strategy=(p.strategy, b.strategy), n_max_text_ctx=p.n_max_text_ctx, thold_pt=round(p.thold_pt, 4),
                   language=p.language, suppress_nst=p.suppress_nst, temperature_inc=round(p.temperature_inc, 4),
                   entropy_thold=round(p.entropy_thold, 4), logprob_thold=p.logprob_thold,
                   no_speech_thold=round(p.no_speech_thold, 4), best_of=p.greedy.best_of,
                   beam_size=b.beam_search.beam_size, grammar_penalty=round(p.grammar_penalty, 4), vad=p.vad,
                   vad_threshold=round(p.vad_params.threshold, 4), vad_pad=p.vad_params.speech_pad_ms,
                   vad_overlap=round(p.vad_params.samples_overlap, 4), vad_default=(v.min_speech_duration_ms,
                   v.min_silence_duration_ms, v.speech_pad_ms), ctx=(c.use_gpu, c.flash_attn, c.dtw_n_top, c.dtw_mem_size),
                   beam_patience=b.beam_search.patience, max_initial_ts=p.max_initial_ts)
        want = dict(strategy=(GREEDY, BEAM_SEARCH), n_max_text_ctx=16384, thold_pt=0.01, language=b"en",
                    suppress_nst=False, temperature_inc=0.2, entropy_thold=2.4, logprob_thold=-1.0,
                    no_speech_thold=0.6, best_of=5, beam_size=5, grammar_penalty=100.0, vad=False,
                    vad_threshold=0.5, vad_pad=30, vad_overlap=0.1, vad_default=(250, 100, 30),
                    ctx=(True, True, -1, 128 * 1024 * 1024), beam_patience=-1.0, max_initial_ts=1.0)
        bad = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        if bad:
            raise WhisperError(
                f"{self.path}: whisper.h ABI mismatch with engines/whisper-cpp/binding.py (field: got, expected): "
                f"{bad}; the library is not the pinned whisper.cpp 1.8.5: rebuild engines/whisper-cpp"
            )

    def _why(self) -> str:
        lines = [ln for ln in self.log_tail if any(w in ln for w in ("fail", "wrong", "invalid", "error", "unknown",
                                                                      "bad", "expected", "not"))]
        return ("; whisper.cpp says: " + " | ".join(lines[-3:])) if lines else ""

    def load(self, path: str) -> "Model":
        check_model_file(path)
        params = self.context_default_params()
        params.use_gpu = False
        params.flash_attn = False
        self.log_tail.clear()
        ctx = self.lib.whisper_init_from_file_with_params(str(path).encode(), params)
        if not ctx:
            raise WhisperError(f"{path}: whisper.cpp could not load it as a ggml Whisper model{self._why()} "
                               "(convert with whisper.cpp's models/convert-h5-to-ggml.py)")
        if self.lib.whisper_model_ftype(ctx) == 0:
            self.lib.whisper_free(ctx)
            raise WhisperError(f"{path}: an all-f32 ggml Whisper model: whisper.cpp 1.8.5 aborts on it (its conv1d "
                               "needs f16 kernels); convert without use-f32 (f16 default) or quantize it")
        return Model(self, ctx)

    def load_vad(self, path: str, n_threads: int = 1) -> "VadModel":
        params = self.lib.whisper_vad_default_context_params()
        params.n_threads = max(1, n_threads)
        params.use_gpu = False
        self.log_tail.clear()
        ctx = self.lib.whisper_vad_init_from_file_with_params(str(path).encode(), params)
        if not ctx:
            raise WhisperError(f"{path}: whisper.cpp could not load it as a ggml Silero VAD model{self._why()} "
                               "(convert with whisper.cpp's models/convert-silero-vad-to-ggml.py)")
        return VadModel(self, ctx)


class Model:
    """A whisper_context (the weights); every transcribe() decodes in its own whisper_state."""

    def __init__(self, lib: Library, ctx: int):
        self.library, self.ctx = lib, ctx
        self.last_token_ids: list[list[int]] = []
        self.multilingual = bool(lib.lib.whisper_is_multilingual(ctx))
        self.eot = lib.lib.whisper_token_eot(ctx)

    def close(self) -> None:
        if self.ctx:
            self.library.lib.whisper_free(self.ctx)
            self.ctx = None

    def __del__(self):
        self.close()

    def params(self, *, language: str = "", translate: bool = False, n_threads: int = 0, prompt: str = "",
               temperature: float = 0.0, words: bool = False, no_timestamps: bool = False,
               no_fallback: bool = False) -> tuple[FullParams, list]:
        lib = self.library
        p = lib.full_default_params(GREEDY)
        keep = []  # C strings whisper.cpp reads during whisper_full
        p.n_threads = n_threads if n_threads > 0 else p.n_threads
        p.print_progress = p.print_realtime = p.print_timestamps = p.print_special = False
        p.translate = translate
        p.no_timestamps = no_timestamps
        lang = (language or "").strip().lower() or ("auto" if self.multilingual else "en")
        if lang != "auto" and lib.lib.whisper_lang_id(lang.encode()) < 0:
            raise ValueError(f"language {language!r} is not one whisper.cpp knows (ISO 639-1 code or 'auto')")
        keep.append(lang.encode())
        p.language = keep[-1]
        if prompt:
            keep.append(prompt.encode())
            p.initial_prompt = keep[-1]
        if temperature > 0:
            p.temperature = temperature
        if no_fallback:
            p.temperature_inc = 0.0
        p.token_timestamps = words
        return p, keep

    def transcribe(self, samples, on_segment=None, stop=None, **kw) -> tuple[list[Segment], str]:
        """whisper_full on 16 kHz mono float samples -> (segments, language). on_segment(Segment)
        is called from whisper.cpp's new-segment callback as each segment is decoded; once
        ``stop`` (a threading.Event) is set, whisper.cpp's abort callback ends the decoding and
        WhisperError says it was stopped.

        Each call decodes in a fresh whisper_state: whisper.cpp seeds the sampler's RNG (used by
        the temperature fallback) when a state is made, so the same request gives the same
        result every time, and the context itself is never mutated."""
        buf, n, _keep_buf = _floats(samples)
        words = kw.get("words", False)
        p, _keep = self.params(**kw)
        lib = self.library.lib
        state = lib.whisper_init_state(self.ctx)
        if not state:
            raise WhisperError("whisper_init_state failed (out of memory?)")
        done = [0]
        cb = None
        if on_segment is not None:
            def _cb(ctx, st, n_new, user):
                total = lib.whisper_full_n_segments_from_state(state)
                for i in range(done[0], total):
                    on_segment(self._segment(state, i, words))
                done[0] = total

            cb = NEW_SEGMENT_CALLBACK(_cb)
            p.new_segment_callback = ctypes.cast(cb, c_void_p)
        abort = None
        if stop is not None:
            abort = ABORT_CALLBACK(lambda user: stop.is_set())
            p.abort_callback = ctypes.cast(abort, c_void_p)
        try:
            rc = lib.whisper_full_with_state(self.ctx, state, p, buf, n)
            if rc != 0 and stop is not None and stop.is_set():
                raise WhisperError("whisper_full stopped: the stream was cancelled")
            if rc != 0:
                raise WhisperError(f"whisper_full failed with code {rc}")
            segments = [self._segment(state, i, words) for i in range(lib.whisper_full_n_segments_from_state(state))]
            lang_id = lib.whisper_full_lang_id_from_state(state)
            self.last_token_ids = [
                [lib.whisper_full_get_token_id_from_state(state, i, j)
                 for j in range(lib.whisper_full_n_tokens_from_state(state, i))]
                for i in range(lib.whisper_full_n_segments_from_state(state))]
        finally:
            lib.whisper_free_state(state)
        lang = lib.whisper_lang_str(lang_id) if lang_id >= 0 else None
        return segments, (lang or b"").decode()

    def _segment(self, state, i: int, words: bool) -> Segment:
        lib = self.library.lib
        text = lib.whisper_full_get_segment_text_from_state(state, i).decode("utf-8", "replace")
        n_tok = lib.whisper_full_n_tokens_from_state(state, i)
        tokens, out_words = [], []
        pieces: list[bytes] = []
        for j in range(n_tok):
            tid = lib.whisper_full_get_token_id_from_state(state, i, j)
            if tid >= self.eot:  # special and timestamp tokens
                continue
            tokens.append(tid)
            if words:
                data = lib.whisper_full_get_token_data_from_state(state, i, j)
                piece = lib.whisper_full_get_token_text_from_state(self.ctx, state, i, j)
                # A token starting with a space starts a new word (byte-level BPE).
                if not out_words or piece.startswith(b" "):
                    pieces.append(piece)
                    out_words.append(Word("", data.t0 * 10, data.t1 * 10))
                else:
                    pieces[-1] += piece
                    out_words[-1].end_ms = data.t1 * 10
        for w, piece in zip(out_words, pieces):
            w.text = piece.decode("utf-8", "replace").strip()
        out_words = [w for w in out_words if w.text]
        t0 = lib.whisper_full_get_segment_t0_from_state(state, i)
        t1 = lib.whisper_full_get_segment_t1_from_state(state, i)
        return Segment(i, t0 * 10, t1 * 10, text, tokens, out_words)  # centiseconds -> ms

    def token_ids(self) -> list[list[int]]:
        """All token ids (special ones included) of the last transcribe(), per segment."""
        return self.last_token_ids


class VadModel:
    """A whisper_vad_context (Silero VAD on ggml): per-512-sample-window probabilities and segments."""

    WINDOW = 512

    def __init__(self, lib: Library, ctx: int):
        self.library, self.ctx = lib, ctx
        self.lock = threading.Lock()

    def close(self) -> None:
        if self.ctx:
            self.library.lib.whisper_vad_free(self.ctx)
            self.ctx = None

    def __del__(self):
        self.close()

    def probabilities(self, samples) -> list[float]:
        buf, n, _keep = _floats(samples)
        lib = self.library.lib
        with self.lock:
            if not lib.whisper_vad_detect_speech(self.ctx, buf, n):
                raise WhisperError("whisper_vad_detect_speech failed")
            count = lib.whisper_vad_n_probs(self.ctx)
            return lib.whisper_vad_probs(self.ctx)[:count]

    def segments(self, samples, params: VadParams | None = None) -> list[tuple[float, float]]:
        """[(start_s, end_s)] of speech by whisper.cpp's own rules (whisper_vad_segments_from_probs:
        Silero's hysteresis, then a merge of segments under 200 ms apart that Silero does not do;
        centisecond resolution). The backend's VAD applies Silero's rules to probabilities()."""
        lib = self.library.lib
        params = params or lib.whisper_vad_default_params()
        buf, n, _keep = _floats(samples)
        with self.lock:
            if not lib.whisper_vad_detect_speech(self.ctx, buf, n):
                raise WhisperError("whisper_vad_detect_speech failed")
            segs = lib.whisper_vad_segments_from_probs(self.ctx, params)
            if not segs:
                raise WhisperError("whisper_vad_segments_from_probs failed")
            try:
                return [(lib.whisper_vad_segments_get_segment_t0(segs, i) / 100.0,
                         lib.whisper_vad_segments_get_segment_t1(segs, i) / 100.0)
                        for i in range(lib.whisper_vad_segments_n_segments(segs))]
            finally:
                lib.whisper_vad_free_segments(segs)
