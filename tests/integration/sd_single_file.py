"""A diffusers Stable Diffusion folder written as one original-layout (CompVis/LDM) checkpoint.

diffusers' ``from_single_file`` reads only that layout (``model.diffusion_model.*``,
``first_stage_model.*``, ``cond_stage_model.transformer.*``) and converts it with the configs of
a diffusers folder; the wheel ships no converter the other way, so this is the inverse of its
``convert_ldm_unet_checkpoint`` / ``convert_ldm_vae_checkpoint`` key renames for a UNet of any
depth with transformer attention and a VAE with one attention block. The test checks the round
trip tensor by tensor, so a wrong name here fails it rather than passing silently.
"""
from __future__ import annotations

import json
from pathlib import Path

RESNET = {"norm1": "in_layers.0", "conv1": "in_layers.2", "time_emb_proj": "emb_layers.1", "norm2": "out_layers.0",
          "conv2": "out_layers.3", "conv_shortcut": "skip_connection"}
VAE_RESNET = {"conv_shortcut": "nin_shortcut"}
VAE_ATTENTION = {"group_norm": "norm", "to_q": "q", "to_k": "k", "to_v": "v", "to_out.0": "proj_out"}


def _rename(key: str, prefix: str, target: str, inner: dict[str, str]) -> str | None:
    if not key.startswith(prefix + "."):
        return None
    rest = key[len(prefix) + 1:]
    for new, old in inner.items():
        if rest.startswith(new + "."):
            rest = old + rest[len(new):]
            break
    return f"{target}.{rest}"


def _unet_map(config: dict) -> list[tuple[str, str, dict]]:
    """(diffusers prefix, LDM prefix, inner renames), in the order of the LDM UNet's blocks."""
    layers, levels = config["layers_per_block"], len(config["block_out_channels"])
    m = [("time_embedding.linear_1", "time_embed.0", {}), ("time_embedding.linear_2", "time_embed.2", {}),
         ("conv_in", "input_blocks.0.0", {}), ("conv_norm_out", "out.0", {}), ("conv_out", "out.2", {}),
         ("mid_block.resnets.0", "middle_block.0", RESNET), ("mid_block.attentions.0", "middle_block.1", {}),
         ("mid_block.resnets.1", "middle_block.2", RESNET)]
    block = 1
    for i in range(levels):
        for j in range(layers):
            m.append((f"down_blocks.{i}.resnets.{j}", f"input_blocks.{block}.0", RESNET))
            m.append((f"down_blocks.{i}.attentions.{j}", f"input_blocks.{block}.1", {}))
            block += 1
        if i < levels - 1:
            m.append((f"down_blocks.{i}.downsamplers.0.conv", f"input_blocks.{block}.0.op", {}))
            block += 1
    block = 0
    for i in range(levels):
        has_attention = config["up_block_types"][i].startswith("CrossAttn")
        for j in range(layers + 1):
            m.append((f"up_blocks.{i}.resnets.{j}", f"output_blocks.{block}.0", RESNET))
            m.append((f"up_blocks.{i}.attentions.{j}", f"output_blocks.{block}.1", {}))
            if j == layers and i < levels - 1:
                m.append((f"up_blocks.{i}.upsamplers.0.conv", f"output_blocks.{block}.{2 if has_attention else 1}.conv", {}))
            block += 1
    return m


def _vae_map(config: dict) -> list[tuple[str, str, dict]]:
    levels, layers = len(config["block_out_channels"]), config["layers_per_block"]
    m = []
    for part, pre in (("encoder", "encoder"), ("decoder", "decoder")):
        m += [(f"{part}.conv_norm_out", f"{pre}.norm_out", {}), (f"{part}.mid_block.resnets.0", f"{pre}.mid.block_1", VAE_RESNET),
              (f"{part}.mid_block.resnets.1", f"{pre}.mid.block_2", VAE_RESNET),
              (f"{part}.mid_block.attentions.0", f"{pre}.mid.attn_1", VAE_ATTENTION)]
    for i in range(levels):
        for j in range(layers):
            m.append((f"encoder.down_blocks.{i}.resnets.{j}", f"encoder.down.{i}.block.{j}", VAE_RESNET))
        m.append((f"encoder.down_blocks.{i}.downsamplers.0.conv", f"encoder.down.{i}.downsample.conv", {}))
        for j in range(layers + 1):
            m.append((f"decoder.up_blocks.{i}.resnets.{j}", f"decoder.up.{levels - 1 - i}.block.{j}", VAE_RESNET))
        m.append((f"decoder.up_blocks.{i}.upsamplers.0.conv", f"decoder.up.{levels - 1 - i}.upsample.conv", {}))
    return m


def _convert(state: dict, mapping, prefix: str, attention_1x1: bool = False) -> dict:
    out = {}
    for key, value in state.items():
        for new, old, inner in mapping:
            renamed = _rename(key, new, old, inner)
            if renamed is not None:
                break
        else:
            renamed = key  # conv_in, quant_conv, ...: the same name in both layouts
        if attention_1x1 and ".attn_1." in renamed and renamed.endswith("weight") and value.dim() == 2:
            value = value[:, :, None, None]  # the LDM VAE's attention projections are 1x1 convolutions
        out[f"{prefix}.{renamed}"] = value.contiguous()
    return out


def ldm_checkpoint(pipe_dir: Path, out: Path) -> Path:
    """``pipe_dir`` (a StableDiffusionPipeline's save_pretrained) as one LDM-layout .safetensors."""
    from safetensors.torch import load_file, save_file

    def part(name: str, weights: str):
        return json.loads((pipe_dir / name / "config.json").read_text()), load_file(str(pipe_dir / name / weights))

    unet_config, unet = part("unet", "diffusion_pytorch_model.safetensors")
    vae_config, vae = part("vae", "diffusion_pytorch_model.safetensors")
    _, text_encoder = part("text_encoder", "model.safetensors")
    checkpoint = {}
    checkpoint.update(_convert(unet, _unet_map(unet_config), "model.diffusion_model"))
    checkpoint.update(_convert(vae, _vae_map(vae_config), "first_stage_model", attention_1x1=True))
    # transformers 5 saves CLIPTextModel without its text_model. prefix; SD checkpoints carry it.
    checkpoint.update({f"cond_stage_model.transformer.{k if k.startswith('text_model.') else 'text_model.' + k}": v
                       for k, v in text_encoder.items()})
    save_file(checkpoint, str(out))
    return out
