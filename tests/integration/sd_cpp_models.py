"""A random Stable Diffusion checkpoint in the smallest layout stable-diffusion.cpp accepts,
made offline in the test (numpy + safetensors), for backends/stablediffusion-ggml:cpu.

stable-diffusion.cpp fixes each architecture's sizes by the version it detects from tensor names
(src/model.cpp: get_sd_version), so a checkpoint cannot be shrunk below a real one. The smallest
image model it accepts is SDXS-512-DS (VERSION_SDXS_512_DS): CLIP ViT-L/14 text encoder (768
wide: token_embedding ne[0] == 768), the tiny UNet (src/unet.hpp: tiny_unet, one res block per
level, channel_mult {1, 2, 4}, attention at ds 4 and 2, no middle block, no output_blocks.7.1),
and the tiny autoencoder decoder (src/tae.hpp: TinyDecoder, `tae.decoder.layers.*`) instead of
the VAE. About 440M parameters, stored f16 (~0.9 GB).

The layout below is written from those classes' constructors (names in the ldm form
stable-diffusion.cpp uses internally, shapes in PyTorch order [out, in, kh, kw]); a name or shape
stable-diffusion.cpp does not expect makes LoadModel fail, which the test would show.
"""
from __future__ import annotations

from pathlib import Path

UNET = "model.diffusion_model."
CLIP = "cond_stage_model.transformer.text_model."
TAE = "tae.decoder.layers."


def _conv(t: dict, name: str, cin: int, cout: int, k: int = 3, bias: bool = True) -> None:
    t[name + ".weight"] = (cout, cin, k, k)
    if bias:
        t[name + ".bias"] = (cout,)


def _linear(t: dict, name: str, cin: int, cout: int, bias: bool = True) -> None:
    t[name + ".weight"] = (cout, cin)
    if bias:
        t[name + ".bias"] = (cout,)


def _norm(t: dict, name: str, ch: int) -> None:
    t[name + ".weight"] = (ch,)
    t[name + ".bias"] = (ch,)


def _resblock(t: dict, p: str, cin: int, emb: int, cout: int) -> None:
    _norm(t, p + "in_layers.0", cin)
    _conv(t, p + "in_layers.2", cin, cout)
    _linear(t, p + "emb_layers.1", emb, cout)
    _norm(t, p + "out_layers.0", cout)
    _conv(t, p + "out_layers.3", cout, cout)
    if cin != cout:
        _conv(t, p + "skip_connection", cin, cout, k=1)


def _spatial_transformer(t: dict, p: str, ch: int, context: int) -> None:
    """SD1's SpatialTransformer: 1x1 conv projections, depth 1, GEGLU feed-forward (x4)."""
    _norm(t, p + "norm", ch)
    _conv(t, p + "proj_in", ch, ch, k=1)
    b = p + "transformer_blocks.0."
    for attn, kv in (("attn1", ch), ("attn2", context)):
        _linear(t, f"{b}{attn}.to_q", ch, ch, bias=False)
        _linear(t, f"{b}{attn}.to_k", kv, ch, bias=False)
        _linear(t, f"{b}{attn}.to_v", kv, ch, bias=False)
        _linear(t, f"{b}{attn}.to_out.0", ch, ch)
    _linear(t, b + "ff.net.0.proj", ch, ch * 4 * 2)
    _linear(t, b + "ff.net.2", ch * 4, ch)
    for n in ("norm1", "norm2", "norm3"):
        _norm(t, b + n, ch)
    _conv(t, p + "proj_out", ch, ch, k=1)


def tiny_unet(t: dict, model_channels: int = 320, context: int = 768) -> None:
    """UnetModelBlock for VERSION_SDXS_512_DS, following its constructor's block numbering."""
    emb = model_channels * 4
    mult, attention_ds = (1, 2, 4), (4, 2)
    _linear(t, UNET + "time_embed.0", model_channels, emb)
    _linear(t, UNET + "time_embed.2", emb, emb)
    _conv(t, UNET + "input_blocks.0.0", 4, model_channels)
    chans, ch, idx, ds = [model_channels], model_channels, 0, 1
    for i, m in enumerate(mult):
        idx += 1
        _resblock(t, f"{UNET}input_blocks.{idx}.0.", ch, emb, m * model_channels)
        ch = m * model_channels
        if ds in attention_ds:
            _spatial_transformer(t, f"{UNET}input_blocks.{idx}.1.", ch, context)
        chans.append(ch)
        idx += 1  # tiny_unet skips an index after each res block
        if i != len(mult) - 1:
            idx += 1
            _conv(t, f"{UNET}input_blocks.{idx}.0.op", ch, ch)
            chans.append(ch)
            ds *= 2
    out = 0
    for i in reversed(range(len(mult))):
        for j in range(2):  # num_res_blocks + 1
            ich = chans.pop()
            _resblock(t, f"{UNET}output_blocks.{out}.0.", ch + ich, emb, mult[i] * model_channels)
            ch = mult[i] * model_channels
            up = 1
            if ds in attention_ds:
                _spatial_transformer(t, f"{UNET}output_blocks.{out}.1.", ch, context)
                up += 1
            if i > 0 and j == 1:
                out += 1
                if out == 2:
                    up = 1
                _conv(t, f"{UNET}output_blocks.{out}.{up}.conv", ch, ch)
                ds //= 2
            out += 1
    _norm(t, UNET + "out.0", ch)
    _conv(t, UNET + "out.2", model_channels, 4)


def clip_l(t: dict, layers: int = 12, width: int = 768, vocab: int = 49408, positions: int = 77) -> None:
    t[CLIP + "embeddings.token_embedding.weight"] = (vocab, width)
    t[CLIP + "embeddings.position_embedding.weight"] = (positions, width)
    for i in range(layers):
        p = f"{CLIP}encoder.layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            _linear(t, f"{p}self_attn.{proj}", width, width)
        _norm(t, p + "layer_norm1", width)
        _norm(t, p + "layer_norm2", width)
        _linear(t, p + "mlp.fc1", width, width * 4)
        _linear(t, p + "mlp.fc2", width * 4, width)
    _norm(t, CLIP + "final_layer_norm", width)


def tiny_decoder(t: dict, channels: int = 64, z: int = 4) -> None:
    """TinyDecoder: conv, 3 blocks, (upsample, conv, 3 blocks) x2, upsample, conv, block, conv."""

    def block(i: int) -> None:
        for c in ("conv.0", "conv.2", "conv.4"):
            _conv(t, f"{TAE}{i}.{c}", channels, channels)

    _conv(t, f"{TAE}0", z, channels)
    i = 2  # 1 is a ReLU
    for stage in range(3):
        for _ in range(3):
            block(i)
            i += 1
        i += 1  # Upsample
        _conv(t, f"{TAE}{i}", channels, channels, bias=False)
        i += 1
        if stage == 2:
            break
    block(i)
    _conv(t, f"{TAE}{i + 1}", channels, 3)


def sdxs_layout() -> dict[str, tuple[int, ...]]:
    t: dict[str, tuple[int, ...]] = {}
    clip_l(t)
    tiny_unet(t)
    tiny_decoder(t)
    return t


def random_sdxs(out: Path, seed: int = 0) -> Path:
    """Writes the random SDXS-512-DS checkpoint (f16 safetensors): norms 1/0, other weights
    N(0, 1/fan_in) so activations stay finite through the random network."""
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in sorted(sdxs_layout().items()):
        is_norm = len(shape) == 1 and any(k in name for k in ("norm", "in_layers.0", "out_layers.0", "out.0"))
        if is_norm and name.endswith(".weight"):
            a = np.ones(shape, np.float16)
        elif len(shape) == 1:
            a = np.zeros(shape, np.float16)
        else:
            fan_in = int(np.prod(shape[1:]))
            a = (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(fan_in)).astype(np.float16)
        tensors[name] = a
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out))
    return out


def param_count() -> int:
    import math

    return sum(math.prod(s) for s in sdxs_layout().values())


if __name__ == "__main__":  # python -m tests.integration.sd_cpp_models <out.safetensors>
    import sys

    print(param_count(), random_sdxs(Path(sys.argv[1])))
