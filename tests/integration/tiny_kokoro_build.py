"""Writes a random-weight Kokoro model the way hexgrad/Kokoro-82M lays it out: config.json, one
.pth of torch.save({"bert": ..., "bert_encoder": ..., "predictor": ..., "text_encoder": ...,
"decoder": ...}) (the state dicts KModel.__init__ loads by name) and voices/<voice>.pt, a
(510, 1, 256) voice pack (KPipeline.infer takes pack[len(phonemes) - 1]).

Run by tests/integration/tiny_models.tiny_kokoro with the kokoro backend folder's own interpreter
and site-packages/ (`python -I -S -B tiny_kokoro_build.py <site-packages> <out> <voice>`): the model
is made by the kokoro the backend serves it with, which the tests resolve does not hold (its
misaki pulls spaCy). Not part of the tests' python_sources: a file the test runs.

Dimensions: KModel hard-codes what the real model has for the style (ref_s[:, :128] /
[:, 128:]: style_dim 128), the decoder's 1024/512 channels and asr_res' 512 inputs (hidden_dim
512, generator upsample_initial_channel 512); the rest is shrunk: a 1-layer 32-wide ALBERT,
n_layer 1, one resblock kernel. max_dur 4 bounds each token's predicted duration to 1..4 frames
(Kokoro-82M: 50), so a text with over 4x the phonemes of another always gives longer audio.
"""
import json
import site
import sys
from pathlib import Path

# The characters misaki's espeak G2P writes (IPA, stress, punctuation) and ASCII letters: ids
# 1.., as Kokoro's own vocab maps phonemes (0 is the pad KModel puts around them).
SYMBOLS = (
    ';:,.!?¡¿—…"«»“” ' + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    + "ɑɐɒæɓʙβɔɕçɗɖðʤəɘɚɛɜɝɞɟʄɡɠɢʛɦɧħɥʜɨɪʝɭɬɫɮʟɱɯɰŋɳɲɴøɵɸθœɶʘɹɺɾɻʀʁɽʂʃʈʧʉʊʋⱱʌɣɤʍχʎʏʑʐʒʔʡʕʢǀǁǂǃˈˌːˑʼʴʰʱʲʷˠˤ˞↓↑→↗↘'̩ᵻ"
)
MAX_DUR = 4


def config() -> dict:
    vocab = {s: i + 1 for i, s in enumerate(dict.fromkeys(SYMBOLS))}
    return {
        "istftnet": {
            "upsample_kernel_sizes": [20, 12], "upsample_rates": [10, 6], "gen_istft_hop_size": 5,
            "gen_istft_n_fft": 20, "resblock_dilation_sizes": [[1, 3, 5]], "resblock_kernel_sizes": [3],
            "upsample_initial_channel": 512,
        },
        "dim_in": 64, "dropout": 0.2, "hidden_dim": 512, "max_conv_dim": 512, "max_dur": MAX_DUR,
        "multispeaker": True, "n_layer": 1, "n_mels": 80, "n_token": len(vocab) + 1, "style_dim": 128,
        "text_encoder_kernel_size": 5,
        "plbert": {
            "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
            "max_position_embeddings": 512, "num_hidden_layers": 1, "dropout": 0.1,
        },
        "vocab": vocab,
    }


def build(out: Path, voice: str) -> None:
    import torch
    from kokoro.model import KModel

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config(), ensure_ascii=False, indent=1), encoding="utf-8")
    pth = out / "kokoro-v1_0.pth"
    torch.save({}, pth)  # KModel loads what the .pth holds: nothing, so its weights stay random
    torch.manual_seed(0)
    model = KModel(repo_id="hexgrad/Kokoro-82M", config=str(out / "config.json"), model=str(pth))
    parts = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
    torch.save({name: getattr(model, name).state_dict() for name in parts}, pth)
    (out / "voices").mkdir(exist_ok=True)
    torch.save(torch.randn(510, 1, 256), out / "voices" / f"{voice}.pt")


if __name__ == "__main__":
    site.addsitedir(sys.argv[1])
    build(Path(sys.argv[2]), sys.argv[3])
