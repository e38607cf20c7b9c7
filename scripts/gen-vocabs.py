#!/usr/bin/env python3
"""Vocabulary-only GGUF files for the tokenizers llama.cpp's test vocabularies leave out (RWKV's and
PLaMo-2's), written at test time, never committed, with a file of test cases beside each
(VOCAB.gguf.inp, llama.cpp's format). The tokens are drawn from a small multilingual text the way
the converters lay them out (convert_hf_to_gguf.py's RWKV world and PLaMo writers): RWKV's texts
are Python byte-string escapes of arbitrary bytes, PLaMo-2's are scored pieces with control tokens,
256 byte tokens and padding scored -1000.

    python3 scripts/gen-vocabs.py OUT_DIR

Prints each file written. gen-models.py takes PLaMo-2's keys from here for its plamo2 model.
Needs the `gguf` package from PyPI (scripts/setup.sh installs it)."""
import collections
import math
import pathlib
import sys

import gguf

# The text the tokens come from: prose, code, Japanese, some other scripts, emoji.
CORPUS = """The quick brown fox jumps over the lazy dog. Tokenizers split text into pieces; the pieces
are the tokens a model reads. It's the first time they've seen it, isn't it? "Hello, world!" said
the program, and then it printed 12345 and 3.14159 and returned 0.

def tokenize(text):
    return [piece for piece in text.split(" ") if piece]
for (int i = 0; i < n; i++) { sum += values[i]; }

日本語の文章を正しく分割することは、トークナイザーにとって大切な仕事です。今日は良い天気ですね。
東京都は日本の首都であり、多くの人々が住んでいます。私たちは毎日新しいことを学びます。
ひらがな、カタカナ、漢字が混ざった文章です。ありがとうございます。よろしくお願いします。
Ünïcödé façade naïve café — résumé. Привет, мир! Γειά σου κόσμε. 안녕하세요 세계. 你好，世界。
Emoji: 😀 😃 🚀 👍🏽 ❤️ 👨‍👩‍👧 🇯🇵
"""

# Texts tokenized by the vocabulary bench (benches/vocab_bench.c): ASCII, multi-byte UTF-8, emoji,
# runs of whitespace, special tokens' texts, and what no token covers (byte fallback, unknown and
# malformed bytes, a byte order mark).
COMMON_CASES = [
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n",
    "   \n\n\t\t  \r\n",
    "Hello world",
    " Hello world",
    "Hello World!",
    "It's the first time they've seen it, isn't it?",
    "The quick brown fox jumps over the lazy dog. 12345 3.14159",
    "def tokenize(text):\n    return [piece for piece in text.split(\" \") if piece]\n",
    "日本語の文章を正しく分割することは、トークナイザーにとって大切な仕事です。",
    "今日は良い天気ですね。東京都は日本の首都です。",
    "ひらがなカタカナ漢字",
    "Ünïcödé façade naïve café — résumé. Привет, мир!",
    "😀 😃 🚀 👍🏽 ❤️ 👨‍👩‍👧 🇯🇵",
    "€ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ☃ 𠜎 ∑",
    "\ufeffHello with a byte order mark",
    "a\ufeffb",
    "   leading and trailing spaces   ",
    "tabs\tand\nnewlines\n\n\nand    runs",
    "\\x41 \\n \\t \\\\ escapes that are only text",
]
# Malformed UTF-8 and lone bytes, written as bytes.
BYTE_CASES = [b"\xff\xfe", b"a\xe3\x81b", b"\xe6\x97\xa5\xe6", b"\xc3\x28 \xa0\xa1 \xf0\x28\x8c\xbc", b"\xf4\x90\x80\x80 \xf7\xbf\xbf\xbf"]

PLAMO_CONTROLS = ["<|plamo:unk|>", "<|plamo:bos|>", "<|plamo:eos|>", "<|plamo:pad|>", "<|plamo:op|>",
                  "<|plamo:msg|>", "<|plamo:reserved:0|>"]
PLAMO_CASES = [
    "<|plamo:bos|>こんにちは<|plamo:eos|>",
    "<|plamo:op|>user\nHello<|plamo:op|>assistant\n",
    "text </s> after",
    "[PAD1][PAD2] padding tokens scored -1000",
    "<|plamo:unk|> and <|plamo:reserved:0|>",
]
RWKV_CASES = [
    "<s>Hello</s>",
    "User: hi\n\nAssistant: hello\n\n",
]


def substrings(text, lengths):
    """Counts of every substring of `text` (a str or bytes) with a length in `lengths`."""
    counts = collections.Counter()
    for n in lengths:
        for i in range(len(text) - n + 1):
            counts[text[i:i + n]] += 1
    return counts


def rwkv_keys():
    """RWKV world's layout: "<s>" (control), then byte strings escaped as Python writes them (all
    256 single bytes and the corpus' frequent byte strings, some cut inside a character), then
    padding (unused)."""
    data = CORPUS.encode()
    pieces = [bytes([b]) for b in range(256)]
    counts = substrings(data, range(2, 9))
    # Repeated strings, and the short ones seen once.
    frequent = sorted((s for s, c in counts.items() if c >= 2 or len(s) <= 4), key=lambda s: (-counts[s] * len(s), s))
    pieces += sorted(frequent[:3000], key=lambda s: (len(s), s))
    tokens = ["<s>"] + [repr(p)[2:-1] for p in pieces]
    types = [gguf.TokenType.CONTROL] + [gguf.TokenType.NORMAL] * len(pieces)
    n_pad = 48
    tokens += [f"[PAD{i}]" for i in range(len(tokens), len(tokens) + n_pad)]
    types += [gguf.TokenType.UNUSED] * n_pad
    return [
        ("tokenizer.ggml.model", "rwkv"),
        ("tokenizer.ggml.tokens", tokens),
        ("tokenizer.ggml.token_type", [int(t) for t in types]),
        ("tokenizer.ggml.bos_token_id", 0),
        ("tokenizer.ggml.eos_token_id", 0),
        # The converter makes "\n\n" the end of turn.
        ("tokenizer.ggml.eot_token_id", tokens.index("\\n\\n")),
    ]


def plamo2_keys():
    """PLaMo's layout: control tokens, the 256 byte tokens, pieces of code points scored by how
    often the corpus has them (some equal, so ties are broken as llama.cpp breaks them), a normal
    "</s>", then padding scored -1000 (unused). Some characters have no piece of their own."""
    counts = substrings(CORPUS, range(1, 7))
    rare = set("𝔘€☃𠜎∑🚀👍🇯")
    pieces = sorted((s for s, c in counts.items() if (c >= 2 or len(s) <= 3) and not rare & set(s)),
                    key=lambda s: (-counts[s] * len(s), s))[:3000]
    total = sum(counts[s] for s in pieces)
    tokens, scores, types = [], [], []
    for t in PLAMO_CONTROLS:
        tokens.append(t)
        scores.append(0.0)
        types.append(gguf.TokenType.UNKNOWN if t == "<|plamo:unk|>" else gguf.TokenType.CONTROL)
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(gguf.TokenType.BYTE)
    for s in pieces + ["</s>"]:
        tokens.append(s)
        # Log-frequencies rounded to a tenth: many pieces score alike.
        scores.append(round(math.log(max(counts[s], 1) / total), 1))
        types.append(gguf.TokenType.NORMAL)
    n_pad = 16
    for i in range(1, n_pad + 1):
        tokens.append(f"[PAD{i}]")
        scores.append(-1000.0)
        types.append(gguf.TokenType.UNUSED)
    return [
        ("tokenizer.ggml.model", "plamo2"),
        ("tokenizer.ggml.pre", "default"),
        ("tokenizer.ggml.tokens", tokens),
        ("tokenizer.ggml.scores", scores),
        ("tokenizer.ggml.token_type", [int(t) for t in types]),
        ("tokenizer.ggml.bos_token_id", 1),
        ("tokenizer.ggml.eos_token_id", 2),
        ("tokenizer.ggml.padding_token_id", 3),
        ("tokenizer.ggml.unknown_token_id", 0),
        ("tokenizer.ggml.eot_token_id", 4),
        ("tokenizer.ggml.add_space_prefix", False),
    ]


VOCABS = {"rwkv": (rwkv_keys, RWKV_CASES), "plamo2": (plamo2_keys, PLAMO_CASES)}


def add_keys(w, keys):
    """Writes a vocabulary's keys; returns its number of tokens."""
    for name, value in keys:
        if isinstance(value, list):
            w.add_array(name, value)
        elif isinstance(value, bool):
            w.add_bool(name, value)
        elif isinstance(value, int):
            w.add_uint32(name, value)
        else:
            w.add_string(name, value)
    return len(dict(keys)["tokenizer.ggml.tokens"])


def write(out_dir, name):
    keys, cases = VOCABS[name]
    path = out_dir / f"ggml-vocab-{name}.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"tiny {name} vocabulary")
    # A vocabulary-only file still names an architecture and the hyper-parameters loading asks for.
    w.add_block_count(1)
    w.add_context_length(512)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    add_keys(w, keys())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    texts = [c.encode() for c in COMMON_CASES + cases] + BYTE_CASES
    (out_dir / f"{path.name}.inp").write_bytes(b"\n__ggml_vocab_test__\n".join(texts))
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for vocab in VOCABS:
        print(write(out, vocab))
