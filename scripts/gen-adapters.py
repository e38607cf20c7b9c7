#!/usr/bin/env python3
"""Random-weight LoRA adapters for a GGUF model, in llama.cpp's adapter layout (what
convert_lora_to_gguf.py writes): `general.type = adapter`, `adapter.type = lora`,
`adapter.lora.alpha`, and per adapted weight `<name>.lora_a` ([n_in, rank] in ggml's order) and
`<name>.lora_b` ([rank, n_out]); the token embeddings' pair is laid out for a row lookup
(`lora_a` [rank, n_vocab], `lora_b` [rank, n_embd]); a stack of experts has a pair per expert.
Written at test time, never committed.

    python3 scripts/gen-adapters.py lora MODEL.gguf OUT.gguf [--targets REGEX] [--rank R]
        [--alpha A] [--seed S] [--type f32|f16|q8_0|f64] [--alora T,T,...] [--arch NAME]
        [--merged OUT_MODEL.gguf --scale S]

    python3 scripts/gen-adapters.py cvec MODEL.gguf OUT.gguf [--seed S] [--strength X]

`cvec` writes a control vector as llama.cpp's cvector-generator does (`general.architecture =
controlvector`, an F32 `direction.<layer>` of n_embd values for every layer but the first), which
llama.cpp's programs read with `--control-vector`.

`--merged` also writes MODEL (which must hold its adapted weights in F32) with each adapted weight
replaced by W + S * alpha / rank * B A: what the adapter at scale S computes, for a test that
checks the adapter's arithmetic rather than only its agreement with llama.cpp.

Needs the `gguf` and `numpy` packages from PyPI (scripts/setup.sh installs them)."""
import argparse
import re

import numpy as np
import gguf

DEFAULT_TARGETS = r"blk\.\d+\.(attn_(q|k|v|output)|ffn_(gate|up|down)(_exps)?)\.weight$"


def field_value(field):
    return field.contents()


def lora(args):
    base = gguf.GGUFReader(args.model)
    arch = args.arch or field_value(base.fields["general.architecture"])
    rng = np.random.default_rng(args.seed)
    qtype = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
             "q8_0": gguf.GGMLQuantizationType.Q8_0, "f64": gguf.GGMLQuantizationType.F64}[args.type]
    w = gguf.GGUFWriter(args.out, arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", float(args.alpha))
    if args.alora:
        w.add_key_value("adapter.alora.invocation_tokens", [int(t) for t in args.alora.split(",")],
                        gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT32)
    target = re.compile(args.targets)
    merged = {}
    r = args.rank
    for t in base.tensors:
        if not target.search(t.name) or len(t.shape) < 2:
            continue
        ne = [int(d) for d in t.shape]
        n_in, n_out = ne[0], ne[1]
        stack = ne[2:] if len(ne) > 2 else []
        if t.name.endswith("token_embd.weight"):
            # Looked up by row: A holds a rank-wide row per token, B widens it to n_embd.
            a = (rng.standard_normal((n_out, r)) / np.sqrt(r)).astype(np.float32)
            b = (rng.standard_normal((n_in, r)) / np.sqrt(r)).astype(np.float32)
        else:
            a = (rng.standard_normal(tuple(reversed(stack)) + (r, n_in)) / np.sqrt(n_in)).astype(np.float32)
            b = (rng.standard_normal(tuple(reversed(stack)) + (n_out, r)) / np.sqrt(r)).astype(np.float32)
        stored = []
        for suffix, m in (("lora_a", a), ("lora_b", b)):
            name = f"{t.name}.{suffix}"
            if qtype == gguf.GGMLQuantizationType.F32:
                w.add_tensor(name, m)
                stored.append(m)
            elif qtype in (gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.F64):
                dtype = np.float16 if qtype == gguf.GGMLQuantizationType.F16 else np.float64
                w.add_tensor(name, m.astype(dtype))
                stored.append(m.astype(dtype).astype(np.float32))
            else:
                q = gguf.quants.quantize(m, qtype)
                w.add_tensor(name, q, raw_dtype=qtype)
                stored.append(gguf.quants.dequantize(q, qtype).reshape(m.shape))
        # The merged model gets what the adapter holds (after its type's rounding).
        merged[t.name] = tuple(stored)
    if not merged:
        raise SystemExit(f"no weight of {args.model} matches {args.targets}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if args.merged:
        write_merged(base, arch, merged, args)


def write_merged(base, arch, pairs, args):
    """The base model with every adapted weight merged: W + scale * alpha / rank * B A."""
    factor = np.float32(args.scale * (args.alpha / args.rank if args.alpha else 1.0))
    w = gguf.GGUFWriter(args.merged, arch)
    for name, field in base.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, field.contents(), vtype, sub_type=sub)
    names = {t.name for t in base.tensors}
    for t in base.tensors:
        if t.name == "token_embd.weight" and t.name in pairs and "output.weight" not in names:
            # The adapter changes the embeddings' rows, not the output head they also serve as:
            # the merged model keeps the original as its own head.
            w.add_tensor("output.weight", np.array(t.data), raw_dtype=t.tensor_type)
        if t.name in pairs:
            if t.tensor_type != gguf.GGMLQuantizationType.F32:
                raise SystemExit(f"--merged needs {t.name} in F32")
            a, b = pairs[t.name]
            data = np.array(t.data, dtype=np.float32)
            if t.name.endswith("token_embd.weight"):
                data = data + factor * (a @ b.T)
            else:
                data = data + factor * (b @ a)
            w.add_tensor(t.name, data.astype(np.float32))
        else:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def cvec(args):
    base = gguf.GGUFReader(args.model)
    arch = field_value(base.fields["general.architecture"])
    n_embd = int(field_value(base.fields[f"{arch}.embedding_length"]))
    n_layer = int(field_value(base.fields[f"{arch}.block_count"]))
    rng = np.random.default_rng(args.seed)
    w = gguf.GGUFWriter(args.out, "controlvector")
    w.add_string("controlvector.model_hint", arch)
    w.add_uint32("controlvector.layer_count", n_layer - 1)
    for il in range(1, n_layer):
        w.add_tensor(f"direction.{il}", (rng.standard_normal(n_embd) * args.strength).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="kind", required=True)
    lp = sub.add_parser("lora")
    lp.add_argument("model")
    lp.add_argument("out")
    lp.add_argument("--targets", default=DEFAULT_TARGETS)
    lp.add_argument("--rank", type=int, default=4)
    lp.add_argument("--alpha", type=float, default=8.0)
    lp.add_argument("--seed", type=int, default=1)
    lp.add_argument("--type", default="f32", choices=["f32", "f16", "q8_0", "f64"])
    lp.add_argument("--alora", default="")
    lp.add_argument("--arch", default="")
    lp.add_argument("--merged", default="")
    lp.add_argument("--scale", type=float, default=1.0)
    cp = sub.add_parser("cvec")
    cp.add_argument("model")
    cp.add_argument("out")
    cp.add_argument("--seed", type=int, default=1)
    cp.add_argument("--strength", type=float, default=0.1)
    args = p.parse_args()
    if args.kind == "lora":
        lora(args)
    else:
        cvec(args)


if __name__ == "__main__":
    main()
