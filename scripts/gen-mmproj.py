#!/usr/bin/env python3
"""Tiny random-weight multimodal pairs for llama.cpp's libmtmd: a text model and the projector
("mmproj") it is used with, of the projector types no small real model on PyPI has. Written at
test time, never committed. The text models are built from scripts/gen-models.py's pieces, with the
vocabulary (every `tokenizer.*` key) of a real test model, so tokenization is real (plus the marker
tokens libmtmd looks up, and a chat template of our own); the projectors are two-layer encoders 32
wide on small pictures (112 px, or any size in 28 px steps for the dynamic-resolution ones) or
30 s of 128 mel bins.

    python3 scripts/gen-mmproj.py OUT_DIR [PAIR ...]     (default: every pair)

Writes OUT_DIR/<pair>-text.gguf and OUT_DIR/<pair>-mmproj.gguf and prints, per pair,
`pair<TAB>text.gguf<TAB>mmproj.gguf<TAB>image|audio`; and a picture of our own, OUT_DIR/picture.png
(llama.cpp's sdist has a JPEG and an MP3 to test with, but no PNG).

Needs the `gguf` and `numpy` packages, and the test models of scripts/fetch-models.sh (in
$ENGINE_MODEL_DIR, default ~/.cache/engine/models) for their vocabularies. Text models are F16 (the
Gemma 3 vocabulary has 262144 rows), projectors F32. Weights come from a fixed seed per pair; the
attention of the text models is sharpened (SHARPEN) so that a changed image embedding or position
moves the greedy tokens rather than averaging away."""
import importlib.util
import multiprocessing
import os
import pathlib
import struct
import sys
import zlib

import numpy as np
import gguf

# gen-models.py's pieces.
_spec = importlib.util.spec_from_file_location("gen_models", pathlib.Path(__file__).with_name("gen-models.py"))
gm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gm)

MODEL_DIR = pathlib.Path(os.environ.get("ENGINE_MODEL_DIR", pathlib.Path.home() / ".cache/engine/models"))
SMOLLM2 = MODEL_DIR / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = MODEL_DIR / "gemma-3-270m-q4_k_m.gguf"

# Chat templates of our own: SmolLM2's concatenates `content` as a string, and the Gemma 3 file has
# none, but llama-cpp-python's MTMDChatHandler passes content as a list of parts.
CONTENT = ("{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
           "{% if p['type'] == 'text' %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}")
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' }}" + CONTENT
          + "{{ '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
GEMMA = ("{% for m in messages %}{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role'])"
         " + '\n' }}" + CONTENT + "{{ '<end_of_turn>\n' }}{% endfor %}"
         "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}")

# Gain on the text models' query and key projections (or their per-head norms): random weights of
# 1/sqrt(fan_in) give attention logits of about 1, near-uniform attention that averages hundreds of
# image tokens into the same context whatever they hold.
SHARPEN = 2.0

# The encoders: 32 wide in two heads of 16 (M-RoPE needs a head divisible by 4), two layers (LLaVA
# reads the next-to-last), 14-pixel patches.
V_EMBD, V_HEAD, V_FF, V_LAYER, PATCH = 32, 2, 64, 2, 14
# Whisper-style audio encoders: 128 mel bins, 1500 positions (a 30 s window after the stride-2 conv).
N_MEL, A_POS = 128, 1500


def write_vocab(w, path, extra=(), template=CHATML):
    """Every `tokenizer.*` key of the model at `path`, with `extra` control tokens appended (markers
    that libmtmd looks up by text, which the model's own multimodal vocabulary has) and our chat
    template. Returns the vocabulary's size."""
    n_vocab = 0
    for name, value, vtype, sub in gm.vocab_keys(str(path)):
        if name == "tokenizer.chat_template":
            continue
        if name == "tokenizer.ggml.tokens":
            value = list(value) + list(extra)
            n_vocab = len(value)
        elif name == "tokenizer.ggml.token_type":
            value = list(value) + [gguf.TokenType.CONTROL] * len(extra)
        elif name == "tokenizer.ggml.scores":
            value = list(value) + [0.0] * len(extra)
        w.add_key_value(name, value, vtype, sub_type=sub)
    w.add_chat_template(template)
    return n_vocab


def sharpen(tensors):
    """The query and key projections, or their per-head norms where the models have them (which
    undo a gain on the projections), times SHARPEN."""
    for name in tensors:
        if name.endswith(("attn_q.weight", "attn_k.weight", "attn_q_norm.weight", "attn_k_norm.weight")):
            tensors[name] = tensors[name] * SHARPEN
    return tensors


# Text models: gen-models.py's decoders, under the architecture each projector is used with.

def llama(w, weights, n_vocab):
    gm.decoder_keys(w, "llama", gm.N_LAYER, 500000.0)
    return gm.decoder_tensors(weights, n_vocab, gm.N_LAYER)


def qwen2(w, weights, n_vocab, d=gm.TINY):
    gm.decoder_keys(w, "qwen2", gm.N_LAYER, 1000000.0, d)
    return gm.decoder_tensors(weights, n_vocab, gm.N_LAYER, qkv_bias=True, d=d)


def qwen2_wide(w, weights, n_vocab):
    # MiniCPM-V's resampler has heads of 128 (fixed in its graph): the text model is 128 wide.
    return qwen2(w, weights, n_vocab, gm.Dims(embd=128, n_head=2, n_head_kv=1, head=64, ff=256))


def qwen2vl(w, weights, n_vocab):
    # M-RoPE sections in Qwen2-VL's proportions (16, 24, 24 of 64 pairs), covering all 16 pairs of
    # a 32-wide head, so that an image token's row and column each turn some of them.
    gm.decoder_keys(w, "qwen2vl", gm.N_LAYER, 1000000.0)
    w.add_array("qwen2vl.rope.dimension_sections", [4, 6, 6, 0])
    return gm.decoder_tensors(weights, n_vocab, gm.N_LAYER, qkv_bias=True)


def qwen3vl(w, weights, n_vocab, a="qwen3vl", experts=None):
    # Interleaved M-RoPE in Qwen3-VL's proportions (24, 20, 20); one deepstack layer, which widens
    # the input embeddings to two rows of n_embd (the projector's deepstack output is added after
    # layer 0).
    gm.decoder_keys(w, a, gm.N_LAYER, 1000000.0)
    w.add_array(f"{a}.rope.dimension_sections", [6, 5, 5, 0])
    w.add_uint32(f"{a}.n_deepstack_layers", 1)
    return gm.decoder_tensors(weights, n_vocab, gm.N_LAYER, qk_norm=True, experts=experts)


def qwen3vlmoe(w, weights, n_vocab):
    # Qwen3-VL-MoE's language model: the same with eight narrow experts, three per token.
    gm.experts_keys(w, "qwen3vlmoe", 8, 3)
    w.add_uint32("qwen3vlmoe.expert_feed_forward_length", 32)
    return qwen3vl(w, weights, n_vocab, "qwen3vlmoe", (8, 32))


def gemma3(w, weights, n_vocab):
    # Gemma 3 270M's layout: per-head query and key norms, norms after attention and FFN, a
    # 512-token window (both layers, as the pattern makes every sixth layer global). Gemma scales
    # token embeddings by sqrt(n_embd); with the norms after attention and FFN near 1, the last
    # token's own embedding then outweighs what it attends to and the tied output repeats it, so
    # those norms have a gain of 4.
    gm.decoder_keys(w, "gemma3", gm.N_LAYER, 1000000.0)
    w.add_uint32("gemma3.attention.sliding_window", 512)
    tensors = gm.decoder_tensors(weights, n_vocab, gm.N_LAYER, qk_norm=True)
    for il in range(gm.N_LAYER):
        tensors[f"blk.{il}.post_attention_norm.weight"] = 4.0 * weights.norm(gm.N_EMBD)
        tensors[f"blk.{il}.post_ffw_norm.weight"] = 4.0 * weights.norm(gm.N_EMBD)
    return tensors


# Projectors.

def conv(weights, n_out, n_in, *kernel):
    """A convolution kernel, numpy (out, in, *kernel) = ggml [*reversed(kernel), in, out]."""
    fan_in = n_in * int(np.prod(kernel))
    return (weights.rng.standard_normal((n_out, n_in, *kernel)) / np.sqrt(fan_in)).astype(np.float32)


def encoder(weights, prefix="v", n_layer=V_LAYER, embd=V_EMBD, ff=V_FF, fused=False, biases=True, k_bias=True,
            gate=False, norm_bias=True):
    """Pre-norm transformer layers as clip.cpp names them (`prefix`.blk.N.*)."""
    t = {}
    for il in range(n_layer):
        b = f"{prefix}.blk.{il}."
        if fused:
            t[b + "attn_qkv.weight"] = weights.matrix(3 * embd, embd)
            if biases:
                t[b + "attn_qkv.bias"] = weights.bias(3 * embd)
        for n in () if fused else ("attn_q", "attn_k", "attn_v"):
            t[b + n + ".weight"] = weights.matrix(embd, embd)
            if biases and (k_bias or n != "attn_k"):
                t[b + n + ".bias"] = weights.bias(embd)
        t[b + "attn_out.weight"] = weights.matrix(embd, embd)
        for n in ("ln1", "ln2"):
            t[b + n + ".weight"] = weights.norm(embd)
            if norm_bias:
                t[b + n + ".bias"] = weights.bias(embd)
        for n in ("ffn_up", "ffn_gate") if gate else ("ffn_up",):
            t[b + n + ".weight"] = weights.matrix(ff, embd)
        t[b + "ffn_down.weight"] = weights.matrix(embd, ff)
        if biases:
            t[b + "attn_out.bias"] = weights.bias(embd)
            for n in ("ffn_up", "ffn_gate") if gate else ("ffn_up",):
                t[b + n + ".bias"] = weights.bias(ff)
            t[b + "ffn_down.bias"] = weights.bias(embd)
    return t


def layer_norm(weights, name, n, bias=True):
    t = {name + ".weight": weights.norm(n)}
    if bias:
        t[name + ".bias"] = weights.bias(n)
    return t


def clip_keys(w, proj, n_out, kind="vision", ffn=None, image_size=0, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)):
    """The keys every projector has: its type, the encoder's shape (`n_out`: the text model's
    width), the image's size and normalisation or the audio's mel bins; `ffn`: the encoder's
    activation, "gelu" or "silu" (GELU-quick if neither)."""
    w.add_string("clip.projector_type", proj)
    w.add_bool(f"clip.has_{kind}_encoder", True)
    w.add_uint32(f"clip.{kind}.embedding_length", V_EMBD)
    w.add_uint32(f"clip.{kind}.feed_forward_length", V_FF)
    w.add_uint32(f"clip.{kind}.block_count", V_LAYER)
    w.add_uint32(f"clip.{kind}.projection_dim", n_out)
    w.add_uint32(f"clip.{kind}.attention.head_count", V_HEAD)
    w.add_float32(f"clip.{kind}.attention.layer_norm_epsilon", 1e-6)
    if ffn:
        w.add_bool(f"clip.use_{ffn}", True)
    if kind == "vision":
        w.add_uint32("clip.vision.image_size", image_size)
        w.add_uint32("clip.vision.patch_size", PATCH)
        w.add_array("clip.vision.image_mean", list(mean))
        w.add_array("clip.vision.image_std", list(std))
    else:
        w.add_uint32("clip.audio.num_mel_bins", N_MEL)


def siglip(weights, n_patches):
    """SigLIP's embeddings: a patch convolution with a bias and learned positions, one per patch of
    the fixed-size picture, added as they are."""
    return {
        "v.patch_embd.weight": conv(weights, V_EMBD, 3, PATCH, PATCH),
        "v.patch_embd.bias": weights.bias(V_EMBD),
        "v.position_embd.weight": weights.matrix(n_patches, V_EMBD),
        **encoder(weights),
        **layer_norm(weights, "v.post_ln", V_EMBD),
    }


def gemma3_proj(w, weights, n_out):
    # 112 px, 8x8 patches averaged 2x2 (Gemma 3 averages 4x4 of 64x64): 16 tokens, RMS-normed and
    # projected by a matrix stored transposed ([n_out, V_EMBD] in ggml).
    size, merge = 112, 2
    clip_keys(w, "gemma3", n_out, ffn="gelu", image_size=size)
    w.add_uint32("clip.vision.projector.scale_factor", merge)
    return {
        **siglip(weights, (size // PATCH) ** 2),
        "mm.soft_emb_norm.weight": weights.norm(V_EMBD),
        "mm.input_projection.weight": weights.matrix(n_out, V_EMBD).T.copy(),
    }


def idefics3_proj(w, weights, n_out):
    # SmolVLM: 112 px tiles of 8x8 patches, pixel-shuffled 2x2 into 16 tokens of 4 * V_EMBD, then
    # one matrix; pictures are resized to 224 px on their long side, so tiled 2x2 plus an overview.
    size, merge = 112, 2
    clip_keys(w, "idefics3", n_out, ffn="gelu", image_size=size)
    w.add_uint32("clip.vision.projector.scale_factor", merge)
    w.add_uint32("clip.vision.preproc_image_size", 2 * size)
    return {
        **siglip(weights, (size // PATCH) ** 2),
        "mm.model.fc.weight": weights.matrix(n_out, V_EMBD * merge * merge),
    }


def llava_proj(w, weights, n_out):
    # LLaVA 1.5: CLIP ViT (class embedding, pre-norm, no post-norm) on a fixed 112 px picture, the
    # features of its next-to-last layer (so the last is loaded but never run), a two-layer MLP.
    size = 112
    clip_keys(w, "mlp", n_out, image_size=size, mean=(0.48145466, 0.4578275, 0.40821073),
              std=(0.26862954, 0.26130258, 0.27577711))
    n_pos = (size // PATCH) ** 2 + 1
    return {
        "v.class_embd": weights.bias(V_EMBD),
        "v.patch_embd.weight": conv(weights, V_EMBD, 3, PATCH, PATCH),
        "v.position_embd.weight": weights.matrix(n_pos, V_EMBD),
        **layer_norm(weights, "v.pre_ln", V_EMBD),
        **encoder(weights),
        "mm.0.weight": weights.matrix(4 * V_EMBD, V_EMBD),
        "mm.0.bias": weights.bias(4 * V_EMBD),
        "mm.2.weight": weights.matrix(n_out, 4 * V_EMBD),
        "mm.2.bias": weights.bias(n_out),
    }


def qwen2vl_proj(w, weights, n_out, proj="qwen2vl_merger"):
    # Qwen2-VL: two patch convolutions (one per frame of a pair; a picture goes through both), no
    # learned positions but 2D M-RoPE in the encoder, 2x2 neighbours merged by an MLP. Any size,
    # in multiples of 28 px, up to 4096 tokens. Qwen2.5-VL: RMS norms, a gated SiLU FFN, windowed
    # attention (112 px windows) in every layer but each n_wa_pattern-th.
    qwen25 = proj == "qwen2.5vl_merger"
    clip_keys(w, proj, n_out, ffn="silu" if qwen25 else None, mean=(0.48145466, 0.4578275, 0.40821073),
              std=(0.26862954, 0.26130258, 0.27577711))
    if qwen25:
        w.add_uint32("clip.vision.n_wa_pattern", 2)
    return {
        "v.patch_embd.weight": conv(weights, V_EMBD, 3, PATCH, PATCH),
        "v.patch_embd.weight.1": conv(weights, V_EMBD, 3, PATCH, PATCH),
        **encoder(weights, gate=qwen25, norm_bias=not qwen25),
        **layer_norm(weights, "v.post_ln", V_EMBD, bias=not qwen25),
        "mm.0.weight": weights.matrix(4 * V_EMBD, 4 * V_EMBD),
        "mm.0.bias": weights.bias(4 * V_EMBD),
        "mm.2.weight": weights.matrix(n_out, 4 * V_EMBD),
        "mm.2.bias": weights.bias(n_out),
    }


def qwen25vl_proj(w, weights, n_out):
    return qwen2vl_proj(w, weights, n_out, "qwen2.5vl_merger")


def qwen3vl_proj(w, weights, n_out):
    # Qwen3-VL: Qwen2-VL's two convolutions with a bias, learned positions on an 8x8 grid
    # (interpolated to the picture's), a fused QKV projection, and a deepstack merger on layer 0
    # whose output the projector appends to each token's (so 2 * n_out wide in all).
    clip_keys(w, "qwen3vl_merger", n_out, ffn="gelu")
    merged = 4 * V_EMBD
    return {
        "v.patch_embd.weight": conv(weights, V_EMBD, 3, PATCH, PATCH),
        "v.patch_embd.weight.1": conv(weights, V_EMBD, 3, PATCH, PATCH),
        "v.patch_embd.bias": weights.bias(V_EMBD),
        "v.position_embd.weight": weights.matrix(64, V_EMBD),
        **encoder(weights, fused=True),
        **layer_norm(weights, "v.deepstack.0.norm", merged),
        "v.deepstack.0.fc1.weight": weights.matrix(merged, merged),
        "v.deepstack.0.fc1.bias": weights.bias(merged),
        "v.deepstack.0.fc2.weight": weights.matrix(n_out, merged),
        "v.deepstack.0.fc2.bias": weights.bias(n_out),
        **layer_norm(weights, "v.post_ln", V_EMBD),
        "mm.0.weight": weights.matrix(merged, merged),
        "mm.0.bias": weights.bias(merged),
        "mm.2.weight": weights.matrix(n_out, merged),
        "mm.2.bias": weights.bias(n_out),
    }


def pixtral_proj(w, weights, n_out):
    # Mistral Small 3.1's Pixtral: RMS norms, 2D RoPE, a gated SiLU FFN, no biases; its patch
    # merger (RMS norm, 2x2 patches unfolded into one matrix) before the two-layer MLP; an
    # [IMG_BREAK] embedding after each row of tokens but the last. Any size, in multiples of 28 px,
    # up to 1024 tokens.
    clip_keys(w, "pixtral", n_out, ffn="silu", mean=(0.48145466, 0.4578275, 0.40821073),
              std=(0.26862954, 0.26130258, 0.27577711))
    w.add_uint32("clip.vision.spatial_merge_size", 2)
    return {
        "v.patch_embd.weight": conv(weights, V_EMBD, 3, PATCH, PATCH),
        **layer_norm(weights, "v.pre_ln", V_EMBD, bias=False),
        **encoder(weights, biases=False, gate=True, norm_bias=False),
        "mm.input_norm.weight": weights.norm(V_EMBD),
        "mm.patch_merger.weight": weights.matrix(V_EMBD, 4 * V_EMBD),
        "mm.1.weight": weights.matrix(n_out, V_EMBD),
        "mm.1.bias": weights.bias(n_out),
        "mm.2.weight": weights.matrix(n_out, n_out),
        "mm.2.bias": weights.bias(n_out),
        # As large as the projected tokens about it (RMS near 1).
        "v.token_embd.img_break": weights.matrix(1, n_out)[0] * np.sqrt(n_out),
    }


def minicpmv_proj(w, weights, n_out):
    # MiniCPM-V 2.6 (version 3): SigLIP on 112 px slices (an overview and up to nine slices of
    # the picture), learned positions in a 70x70 bucket grid, a resampler (one cross-attention of
    # 16 learned queries, heads of 128) to n_out.
    size, queries = 112, 16
    clip_keys(w, "resampler", n_out, ffn="gelu", image_size=size)
    w.add_int32("clip.minicpmv_version", 3)
    w.add_uint32("clip.minicpmv_query_num", queries)
    t = siglip(weights, 70 * 70)
    t.update({
        # Loaded but unused (the graph computes sinusoidal positions): one row.
        "resampler.pos_embed_k": weights.matrix(1, n_out),
        "resampler.query": weights.matrix(queries, n_out),
        "resampler.kv.weight": weights.matrix(n_out, V_EMBD),
        "resampler.proj.weight": weights.matrix(n_out, n_out),
        **layer_norm(weights, "resampler.ln_q", n_out),
        **layer_norm(weights, "resampler.ln_kv", n_out),
        **layer_norm(weights, "resampler.ln_post", n_out),
    })
    for n in ("q", "k", "v", "out"):
        t[f"resampler.attn.{n}.weight"] = weights.matrix(n_out, n_out)
        t[f"resampler.attn.{n}.bias"] = weights.bias(n_out)
    return t


def whisper(weights):
    """Whisper's encoder: two convolutions over the mel frames (the second of stride 2) with biases
    ggml broadcasts over time ([1, width]), learned positions, layers without a key bias."""
    return {
        "a.conv1d.1.weight": conv(weights, V_EMBD, N_MEL, 3),
        "a.conv1d.1.bias": weights.bias(V_EMBD)[:, None],
        "a.conv1d.2.weight": conv(weights, V_EMBD, V_EMBD, 3),
        "a.conv1d.2.bias": weights.bias(V_EMBD)[:, None],
        "a.position_embd.weight": weights.matrix(A_POS, V_EMBD),
        **encoder(weights, prefix="a", k_bias=False),
        **layer_norm(weights, "a.post_ln", V_EMBD),
    }


# Stacking factors: llama.cpp 0.3.36 counts a 30 s window's tokens as 3000 frames stacked, then
# halved (and halved again by Voxtral's pooling), but its graph halves before stacking and pads the
# last stack: Ultravox's real 8 and Voxtral's real 4 make 188 tokens where 187 are expected, and
# clip_encode aborts ("Invalid number of output tokens"). Factors dividing 1500 (750) agree.

def ultravox_proj(w, weights, n_out):
    # Ultravox: frames stacked to a token (4: see above), RMS norm, SwiGLU (the second half gated),
    # RMS norm, a matrix; no markers around the tokens.
    stack, ff = 4, 64
    clip_keys(w, "ultravox", n_out, kind="audio")
    w.add_uint32("clip.audio.projector.stack_factor", stack)
    return {
        **whisper(weights),
        "mm.a.norm_pre.weight": weights.norm(stack * V_EMBD),
        "mm.a.mlp.1.weight": weights.matrix(2 * ff, stack * V_EMBD),
        "mm.a.norm_mid.weight": weights.norm(ff),
        "mm.a.mlp.2.weight": weights.matrix(n_out, ff),
    }


def qwen2a_proj(w, weights, n_out):
    # Qwen2-Audio: frames averaged in pairs after the encoder, one matrix with a bias.
    clip_keys(w, "qwen2a", n_out, kind="audio")
    return {
        **whisper(weights),
        "mm.a.fc.weight": weights.matrix(n_out, V_EMBD),
        "mm.a.fc.bias": weights.bias(n_out),
    }


def voxtral_proj(w, weights, n_out):
    # Voxtral: frames averaged in pairs, stacked to a token (6: see above), a two-layer GELU MLP
    # without biases; [BEGIN_AUDIO] before the tokens.
    stack, ff = 6, 64
    clip_keys(w, "voxtral", n_out, kind="audio")
    w.add_uint32("clip.audio.projector.stack_factor", stack)
    return {
        **whisper(weights),
        "mm.a.mlp.1.weight": weights.matrix(ff, stack * V_EMBD),
        "mm.a.mlp.2.weight": weights.matrix(n_out, ff),
    }


# Qwen's markers, which libmtmd writes around a picture as text: one token each, as in Qwen's vocabulary.
QWEN_MARKERS = ["<|vision_start|>", "<|vision_end|>"]
# pair: (media, text architecture, text model, vocabulary, control tokens appended, chat template,
# projector)
PAIRS = {
    "gemma3": ("image", "gemma3", gemma3, GEMMA3, [], GEMMA, gemma3_proj),
    "qwen2vl": ("image", "qwen2vl", qwen2vl, SMOLLM2, QWEN_MARKERS, CHATML, qwen2vl_proj),
    "qwen25vl": ("image", "qwen2vl", qwen2vl, SMOLLM2, QWEN_MARKERS, CHATML, qwen25vl_proj),
    "qwen3vl": ("image", "qwen3vl", qwen3vl, SMOLLM2, QWEN_MARKERS, CHATML, qwen3vl_proj),
    "qwen3vlmoe": ("image", "qwen3vlmoe", qwen3vlmoe, SMOLLM2, QWEN_MARKERS, CHATML, qwen3vl_proj),
    # SmolVLM's tokens around tiles and the overview (libmtmd looks the first three up).
    "idefics3": ("image", "llama", llama, SMOLLM2, ["<fake_token_around_image>", "<image>", "<global-img>"]
                 + [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)], CHATML, idefics3_proj),
    "llava": ("image", "llama", llama, SMOLLM2, [], CHATML, llava_proj),
    "pixtral": ("image", "llama", llama, SMOLLM2, ["[IMG]", "[IMG_BREAK]", "[IMG_END]"], CHATML, pixtral_proj),
    # MiniCPM-V 2.6's slice markers (looked up by libmtmd).
    "minicpmv": ("image", "qwen2", qwen2_wide, SMOLLM2, ["<image>", "</image>", "<slice>", "</slice>"], CHATML,
                 minicpmv_proj),
    "ultravox": ("audio", "llama", llama, SMOLLM2, [], CHATML, ultravox_proj),
    "qwen2a": ("audio", "qwen2", qwen2, SMOLLM2, ["<|audio_bos|>", "<|audio_eos|>"], CHATML, qwen2a_proj),
    "voxtral": ("audio", "llama", llama, SMOLLM2, ["[BEGIN_AUDIO]"], CHATML, voxtral_proj),
}


def checked(name, tensors):
    """`tensors` in F32 (numpy's float64 scalars widen what they scale), all finite."""
    for k, t in tensors.items():
        tensors[k] = t.astype(np.float32)
        if not np.isfinite(tensors[k]).all():
            raise SystemExit(f"{name}: {k} is not finite")
    return tensors


def write_png(path, w=96, h=64):
    """An RGB gradient with a red square in it, as a PNG (zlib-compressed rows, filter 0)."""
    rows = b"".join(b"\0" + bytes(c for x in range(w) for c in (
        (255, 40, 40) if 20 <= x < 50 and 10 <= y < 40 else (x * 2, y * 3, 128))) for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def generate(out_dir, pair):
    kind, arch, text, vocab, extra, template, proj = PAIRS[pair]
    weights = gm.Weights(seed=sum(map(ord, pair)))

    text_path = out_dir / f"{pair}-text.gguf"
    w = gguf.GGUFWriter(str(text_path), arch)
    w.add_name(f"tiny random {pair} text")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    n_vocab = write_vocab(w, vocab, extra, template)
    tensors = checked(text_path, sharpen(text(w, weights, n_vocab)))
    n_out = tensors["token_embd.weight"].shape[1]
    gm.add_tensors(w, tensors, np.float16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    mmproj_path = out_dir / f"{pair}-mmproj.gguf"
    w = gguf.GGUFWriter(str(mmproj_path), "clip")
    w.add_name(f"tiny random {pair} projector")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    tensors = checked(mmproj_path, proj(w, weights, n_out))
    gm.add_tensors(w, tensors, np.float32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return f"{pair}\t{text_path}\t{mmproj_path}\t{kind}"


if __name__ == "__main__":
    if len(sys.argv) < 2 or any(p not in PAIRS for p in sys.argv[2:]):
        raise SystemExit(__doc__ + "\n\nPairs: " + " ".join(PAIRS))
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    write_png(out / "picture.png")
    # One process per core; each pair has its own seed, so the files do not depend on which
    # process writes them.
    with multiprocessing.Pool(os.cpu_count()) as pool:
        for line in pool.starmap(generate, [(out, p) for p in sys.argv[2:] or PAIRS]):
            print(line)
