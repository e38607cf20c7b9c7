#!/usr/bin/env python3
"""The ABI facts of a llama.h, read with libclang (the `libclang` package from PyPI, which ships
its own libclang): what a program compiled against the header relies on.

    python3 scripts/llama_h.py HEADER [INCLUDE_DIR ...]    prints the facts as JSON

- functions: every `llama_*` function declared in the header, in header order, with its return
  and parameter types in canonical spelling (typedefs resolved, so `llama_token` and `int32_t` are
  both `int`, while width, signedness, pointer levels, const and by-value structs stay visible);
- structs: every `struct llama_*` the header defines: size, alignment, and each field's name,
  byte offset and size;
- enums: every constant of every `enum llama_*` the header defines, with its value;
- typedefs: every `llama_*` typedef, resolved to its canonical type (callbacks included);
- defines: every object-like `LLAMA_*` macro with its replacement text.

Types, sizes and offsets are the compiler's, for the machine it runs on (x86-64 Linux here)."""
import json
import pathlib
import subprocess
import sys

import clang.cindex as ci

K = ci.CursorKind


def parse(header, include_dirs):
    # The PyPI libclang has no headers of its own (stddef.h, stdbool.h, ...): use the C compiler's.
    builtin = subprocess.run(["cc", "-print-file-name=include"], capture_output=True, text=True, check=True)
    args = ["-x", "c", "-std=c11", "-isystem", builtin.stdout.strip()] + [f"-I{d}" for d in include_dirs]
    opts = ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD | ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES
    tu = ci.Index.create().parse(str(header), args=args, options=opts)
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        raise SystemExit(f"{header}: does not compile: " + "; ".join(str(d) for d in errors[:5]))
    return tu


def canonical(t):
    return t.get_canonical().spelling


def fields(record):
    """The fields of a struct, those of its anonymous unions and structs included (by name, in order)."""
    for f in record.get_children():
        if f.kind == K.FIELD_DECL and f.spelling:
            yield f
        elif f.kind in (K.UNION_DECL, K.STRUCT_DECL) and f.is_anonymous():
            yield from fields(f)


def facts(header, include_dirs=()):
    header = pathlib.Path(header).resolve()
    tu = parse(header, include_dirs)
    out = {"functions": [], "structs": {}, "enums": {}, "typedefs": {}, "defines": {}}
    seen_functions = set()
    for c in tu.cursor.get_children():
        if c.location.file is None or pathlib.Path(c.location.file.name).resolve() != header:
            continue
        name = c.spelling
        if c.kind == K.FUNCTION_DECL and name.startswith("llama_") and name not in seen_functions:
            seen_functions.add(name)
            out["functions"].append({
                "name": name,
                "returns": canonical(c.result_type),
                "params": [canonical(a.type) for a in c.get_arguments()],
                "variadic": c.type.is_function_variadic(),
            })
        elif c.kind == K.STRUCT_DECL and name.startswith("llama_") and c.is_definition():
            t = c.type
            out["structs"][name] = {
                "size": t.get_size(),
                "align": t.get_align(),
                "fields": [{"name": f.spelling, "type": canonical(f.type), "offset": t.get_offset(f.spelling) // 8,
                            "size": f.type.get_size()} for f in fields(c)],
            }
        elif c.kind == K.ENUM_DECL and name.startswith("llama_") and c.is_definition():
            out["enums"][name] = {e.spelling: e.enum_value for e in c.get_children() if e.kind == K.ENUM_CONSTANT_DECL}
        elif c.kind == K.TYPEDEF_DECL and name.startswith("llama_"):
            out["typedefs"][name] = canonical(c.underlying_typedef_type)
        elif c.kind == K.MACRO_DEFINITION and name.startswith("LLAMA_"):
            tokens = list(c.get_tokens())
            # A '(' right after the name (no space) makes it function-like (LLAMA_API-style markers
            # and include guards have no replacement at all).
            function_like = len(tokens) > 1 and tokens[1].spelling == "(" and \
                tokens[1].extent.start.offset == tokens[0].extent.end.offset
            if len(tokens) > 1 and not function_like:
                out["defines"][name] = " ".join(t.spelling for t in tokens[1:])
    return out


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: llama_h.py HEADER [INCLUDE_DIR ...]")
    print(json.dumps(facts(sys.argv[1], sys.argv[2:]), indent=1))
