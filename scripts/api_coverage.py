#!/usr/bin/env python3
"""The README's API coverage table, derived from the code and the tests. An exported function is
- "not yet" when its body is `entry!(fail, not_implemented)` or refuses with
  `NotImplemented("<its name>")`;
- "works" when it is implemented and a test that checks results calls it, using what it returns
  where it returns something: a C test (c-tests/test_*.c, c-tests/*.cpp but the header-only
  compile check), a Rust integration test (tests/*.rs), a Rust unit test (src/**/tests.rs, or a
  file's part from its `#[cfg(test)]` on), or the live comparison with llama.cpp
  (benches/compare_bench.c, with its helpers in benches/dl.h). The hostile-call test does not
  count: it checks that calls return, not what they do;
- "untested" otherwise: implemented, but no test observes what it does.
The functions, in header order, are those of the pinned llama.h (.ggml/pinned/llama.h, from
scripts/fetch-ggml.sh). `--write` updates README.md; `--check` (the test suite) fails when the
README is out of date or a pinned function is not exported."""
import pathlib, re, sys

import llama_h

root = pathlib.Path(__file__).resolve().parent.parent
header_facts = llama_h.facts(root / ".ggml/pinned/llama.h", [root / ".ggml/ggml/include"])
pinned = [f["name"] for f in header_facts["functions"]]

status = {}
for path in sorted((root / "src/ffi").glob("*.rs")):
    text = path.read_text()
    for m in re.finditer(r'pub (?:unsafe )?extern "C" fn (llama_\w+)\(', text):
        body_start = text.index("{", m.end())
        depth, i = 0, body_start
        while True:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        body = text[body_start:i]
        name = m.group(1)
        stub = re.search(r"\bnot_implemented\b", body) or f'NotImplemented("{name}")' in body
        status[name] = ("not yet" if stub else "works", path.name)


def test_sources():
    files = sorted(root.glob("c-tests/test_*.c")) + sorted(root.glob("c-tests/*.cpp")) + sorted(root.glob("tests/*.rs"))
    files = [f for f in files if f.name != "header_cpp17.cpp"] + [root / "benches/compare_bench.c", root / "benches/dl.h"]
    texts = [(f.relative_to(root), f.read_text()) for f in files]
    for f in sorted(root.glob("src/**/*.rs")):
        t = f.read_text()
        if f.name == "tests.rs" or "/tests/" in str(f.relative_to(root)):
            texts.append((f.relative_to(root), t))
        elif "#[cfg(test)]" in t:
            texts.append((f.relative_to(root), t[t.index("#[cfg(test)]"):]))
    return texts


returns = {f["name"]: f["returns"] for f in header_facts["functions"]}


def checked_call(text, name):
    """Whether `text` calls `name` (`name(`, or `p_name(` through the benchmarks' dlsym pointers) in
    a way that looks at what it did: a function that returns something counts only where its
    result is used (in a check, a print, an assignment), not where the call is a statement of its
    own that drops it (`f(x);`, `let _ = f(x);`)."""
    void = returns.get(name, "void") == "void"
    for m in re.finditer(rf"(\b|\bp_){name}\s*\(", text):
        if void:
            return True
        before = text[: m.start()].rstrip()
        before = re.sub(r"(let _ =|unsafe \{)$", "", before).rstrip()
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        after = text[i + 1:].lstrip()[:1]
        if not (before[-1:] in ("", ";", "{", "}") and after in (";", "}")):
            return True
    return False


tests = test_sources()
for name, (st, f) in status.items():
    if st == "works" and not any(checked_call(t, name) for _, t in tests):
        status[name] = ("untested", f)

missing = [n for n in pinned if n not in status]
rows = ["| function | status | file |", "|---|---|---|"]
for n in pinned:
    st, f = status.get(n, ("missing", "-"))
    rows.append(f"| `{n}` | {st} | src/ffi/{f} |")
count = {k: sum(1 for n in pinned if status.get(n, ("",))[0] == k) for k in ("works", "untested", "not yet")}
works = count["works"]
table = (f"{works} of {len(pinned)} functions work and are tested; {count['untested']} are implemented but no test "
         f"observes what they do yet; {count['not yet']} return their documented failure value and log "
         "`not implemented yet: <name>`.\n\n" + "\n".join(rows))

readme = root / "README.md"
text = readme.read_text()
begin, end = "<!-- api-coverage:begin -->", "<!-- api-coverage:end -->"
new = text[: text.index(begin) + len(begin)] + "\n" + table + "\n" + text[text.index(end):]
if missing:
    sys.exit(f"pinned functions not exported: {', '.join(missing)}")
if "--write" in sys.argv:
    readme.write_text(new)
elif new != text:
    sys.exit("README.md API coverage table is out of date: run scripts/api_coverage.py --write")
print(f"API coverage: {works}/{len(pinned)} functions work")
