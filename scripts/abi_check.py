#!/usr/bin/env python3
"""Holds our generated llama.h against the pinned one, item by item:

    python3 scripts/abi_check.py PINNED_H OURS_H INCLUDE_DIR[:INCLUDE_DIR...]

The facts of both headers come from libclang (scripts/llama_h.py); the pinned header is the one in
the llama-cpp-python 0.3.36 sdist (scripts/fetch-ggml.sh puts it in .ggml/pinned/llama.h). Every
pinned function must exist with the same canonical signature, every pinned struct with the same
size, alignment and fields (name, type, offset, size), every pinned typedef with the same type, and
every pinned enum constant and LLAMA_* define with the same value (checked by the C compiler
against our header, so a constant may be an enumerator or a macro). Functions of ours that the
pinned header lacks are listed; only the documented extensions may be among them. Exits 0 only
when everything matches; anything that stops the check from running is a failure."""
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import llama_h  # noqa: E402

EXTENSIONS = {"llama_engine_last_error"}


def value_asserts(pinned, include_dirs, ours_h):
    """Compile `_Static_assert(NAME == pinned value)` for every enum constant and define against our
    header; returns the names whose assertion fails or does not compile."""
    checks = {}
    for consts in pinned["enums"].values():
        checks.update({name: str(value) for name, value in consts.items()})
    checks.update(pinned["defines"])
    lines = [f'#include "{ours_h}"']
    line_of = {}
    for name, value in checks.items():
        lines.append(f'_Static_assert(({name}) == ({value}), "{name}");')
        line_of[len(lines)] = name
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    incs = [f"-I{d}" for d in include_dirs]
    r = subprocess.run(["cc", "-std=c11", "-fsyntax-only", *incs, f.name], capture_output=True, text=True)
    pathlib.Path(f.name).unlink()
    bad = set()
    for line in r.stderr.splitlines():
        if line.startswith(f.name + ":") and "error" in line:
            bad.add(line_of.get(int(line.split(":")[1]), "(the header itself)"))
    if r.returncode != 0 and not bad:
        raise SystemExit(f"abi_check: compiling the constant checks failed:\n{r.stderr}")
    return len(checks), sorted(bad)


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    pinned_h, ours_h, include_dirs = sys.argv[1], sys.argv[2], [d for d in sys.argv[3].split(":") if d]
    pinned = llama_h.facts(pinned_h, include_dirs)
    ours = llama_h.facts(ours_h, include_dirs)
    problems = []
    counts = {}

    def tally(kind, total, failed):
        counts[kind] = (total - len(failed), total)
        problems.extend(f"{kind[:-1]} {item}" for item in failed)

    our_functions = {f["name"]: f for f in ours["functions"]}
    failed = []
    for f in pinned["functions"]:
        o = our_functions.get(f["name"])
        if o is None:
            failed.append(f"{f['name']}: missing")
        elif (o["returns"], o["params"], o["variadic"]) != (f["returns"], f["params"], f["variadic"]):
            failed.append(f"{f['name']}: {o['returns']} ({', '.join(o['params'])}) but pinned "
                          f"{f['returns']} ({', '.join(f['params'])})")
    tally("functions", len(pinned["functions"]), failed)

    failed = []
    for name, s in pinned["structs"].items():
        o = ours["structs"].get(name)
        if o is None:
            failed.append(f"{name}: missing")
            continue
        if (o["size"], o["align"]) != (s["size"], s["align"]):
            failed.append(f"{name}: size {o['size']} align {o['align']} but pinned {s['size']} / {s['align']}")
        mine = {fl["name"]: fl for fl in o["fields"]}
        for fl in s["fields"]:
            got = mine.pop(fl["name"], None)
            if got != fl:
                failed.append(f"{name}.{fl['name']}: {got} but pinned {fl}")
        failed.extend(f"{name}.{extra}: not in the pinned struct" for extra in mine)
    tally("structs", len(pinned["structs"]), failed)

    failed = [f"{name}: {ours['typedefs'].get(name, 'missing')} but pinned {t}"
              for name, t in pinned["typedefs"].items() if ours["typedefs"].get(name) != t]
    tally("typedefs", len(pinned["typedefs"]), failed)

    total, failed = value_asserts(pinned, include_dirs, pathlib.Path(ours_h).resolve())
    tally("constants", total, [f"{name}: a different value or missing" for name in failed])

    pinned_names = {f["name"] for f in pinned["functions"]}
    extra = sorted(set(our_functions) - pinned_names)
    unexpected = [n for n in extra if n not in EXTENSIONS]
    problems.extend(f"function {n}: not in the pinned llama.h and not a documented extension" for n in unexpected)

    for kind, (ok, total) in counts.items():
        print(f"{kind} matching the pinned llama.h: {ok}/{total}")
    print(f"extensions: {', '.join(extra) or 'none'}")
    for p in problems:
        print(f"MISMATCH {p}")
    print(f"abi: {'all items match' if not problems else f'{len(problems)} mismatches'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
