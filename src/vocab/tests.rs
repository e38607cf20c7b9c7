//! Tests of the tokenizers: the two test models against llama.cpp's reference output, every
//! pre-tokenizer family against hand-checked splits of llama.cpp's regexes, and small vocabularies
//! built in memory for the rules that the models do not exercise.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::pretok::{Cpts, PreTokenizer};
use super::*;
use crate::gguf::{Array, GgufFile, Value};
use crate::test_data::reference_lines;

// ---------------------------------------------------------------------------------------------
// The test models and their reference data

fn load_model(file: &str) -> Vocab {
    let path = crate::test_data::model_dir().join(file);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read test model {} ({e}); run scripts/fetch-models.sh",
            path.display()
        )
    });
    let g = GgufFile::parse(&bytes).unwrap_or_else(|e| panic!("{file}: {e}"));
    let start = std::time::Instant::now();
    let v = Vocab::from_gguf(&g).unwrap_or_else(|e| panic!("{file}: {e}"));
    // Release builds load Gemma 3's 262144 tokens in ~50 ms; the bound only catches accidents.
    let limit_ms = if cfg!(debug_assertions) { 10_000 } else { 500 };
    assert!(
        start.elapsed().as_millis() < limit_ms,
        "{file}: loading the vocabulary took {:?}",
        start.elapsed()
    );
    v
}

fn smollm2() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| load_model("SmolLM2-135M-Instruct.Q4_1.gguf"))
}

fn gemma3() -> &'static Vocab {
    static V: OnceLock<Vocab> = OnceLock::new();
    V.get_or_init(|| load_model("gemma-3-270m-q4_k_m.gguf"))
}

const SMOLLM2_REF: &str = crate::test_data::SMOLLM2.1;
const GEMMA3_REF: &str = crate::test_data::GEMMA3.1;

/// The raw text of `"key":` in a flat one-line JSON object (the reference files have no nesting
/// beyond arrays of numbers, and no escapes in strings).
fn json_raw<'a>(line: &'a str, key: &str) -> &'a str {
    let pat = format!("\"{key}\":");
    let at = line.find(&pat).unwrap_or_else(|| panic!("no {key} in {line}")) + pat.len();
    let rest = line[at..].trim_start();
    let end = if rest.starts_with('[') {
        rest.find(']').map(|i| i + 1)
    } else if let Some(body) = rest.strip_prefix('"') {
        body.find('"').map(|i| i + 2)
    } else {
        rest.find([',', '}'])
    };
    &rest[..end.unwrap_or(rest.len())]
}

fn json_int(line: &str, key: &str) -> i64 {
    json_raw(line, key)
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not an integer in {line}"))
}

fn json_bool(line: &str, key: &str) -> bool {
    json_raw(line, key) == "true"
}

fn json_hex(line: &str, key: &str) -> Vec<u8> {
    let s = json_raw(line, key).trim_matches('"');
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn json_ints(line: &str, key: &str) -> Vec<i32> {
    let s = json_raw(line, key).trim_start_matches('[').trim_end_matches(']');
    s.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().unwrap())
        .collect()
}

fn check_facts(v: &Vocab, model: &str) {
    let facts = reference_lines(model, "vocab_facts.json").concat();
    let ids = v.special_ids();
    assert_eq!(v.n_tokens() as i64, json_int(&facts, "n_tokens"), "{model}: n_tokens");
    for (key, got) in [
        ("bos", ids.bos),
        ("eos", ids.eos),
        ("eot", ids.eot),
        ("nl", ids.nl),
        ("pad", ids.pad),
    ] {
        assert_eq!(i64::from(got), json_int(&facts, key), "{model}: {key}");
    }
    assert_eq!(v.add_bos(), json_bool(&facts, "add_bos"), "{model}: add_bos");
    assert_eq!(v.add_eos(), json_bool(&facts, "add_eos"), "{model}: add_eos");
    assert_eq!(v.vocab_type() as i64, json_int(&facts, "type"), "{model}: type");
}

fn check_tokenize(v: &Vocab, model: &str) {
    let lines = reference_lines(model, "tokenize.jsonl");
    assert!(lines.len() > 100, "{model}: only {} reference lines", lines.len());
    let mut failures = Vec::new();
    for line in &lines {
        let text = json_hex(line, "text_hex");
        let (add, parse) = (json_bool(line, "add_special"), json_bool(line, "parse_special"));
        let want = json_ints(line, "ids");
        let got = v.tokenize(&text, add, parse).unwrap();
        if got != want {
            failures.push(format!(
                "{:?} add={add} parse={parse}: got {got:?}, want {want:?}",
                String::from_utf8_lossy(&text)
            ));
            continue;
        }
        let plain = v.detokenize(&got, false, false).unwrap().text;
        let unparsed = v.detokenize(&got, false, true).unwrap().text;
        if plain != json_hex(line, "detok_hex") || unparsed != json_hex(line, "detok_unparse_hex") {
            failures.push(format!(
                "{:?}: detokenized text differs",
                String::from_utf8_lossy(&text)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{model}: {} of {} lines differ:\n{}",
        failures.len(),
        lines.len(),
        failures.join("\n")
    );
}

fn check_pieces(v: &Vocab, model: &str) {
    let lines = reference_lines(model, "pieces.jsonl");
    let mut failures = Vec::new();
    for line in &lines {
        let id = json_int(line, "id") as i32;
        let got = (
            v.piece(id, 0, false).unwrap().to_vec(),
            v.piece(id, 0, true).unwrap().to_vec(),
            i64::from(v.attr(id).unwrap()),
            v.is_eog(id),
            v.is_control(id).unwrap(),
        );
        let want = (
            json_hex(line, "piece_hex"),
            json_hex(line, "piece_special_hex"),
            json_int(line, "attr"),
            json_bool(line, "is_eog"),
            json_bool(line, "is_control"),
        );
        if got != want {
            failures.push(format!("token {id}: got {got:?}, want {want:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{model}: {} of {} pieces differ:\n{}",
        failures.len(),
        lines.len(),
        failures.join("\n")
    );
}

#[test]
fn smollm2_matches_llama_cpp() {
    let v = smollm2();
    check_facts(v, SMOLLM2_REF);
    check_tokenize(v, SMOLLM2_REF);
    check_pieces(v, SMOLLM2_REF);
}

#[test]
fn gemma3_matches_llama_cpp() {
    let v = gemma3();
    check_facts(v, GEMMA3_REF);
    check_tokenize(v, GEMMA3_REF);
    check_pieces(v, GEMMA3_REF);
}

#[test]
fn smollm2_eot_is_the_one_llama_cpp_meets_first() {
    // Both <|endoftext|> (0) and <|im_end|> (2) are EOT candidates; llama.cpp's hash map yields 0
    // first. <reponame> (4) is found as the FIM repo token, which makes it end generation too.
    let v = smollm2();
    let ids = v.special_ids();
    assert_eq!((ids.eot, ids.fim_rep, ids.fim_pre), (0, 4, TOKEN_NULL));
    assert!(v.is_eog(0) && v.is_eog(2) && v.is_eog(4) && !v.is_eog(1));
}

/// A deterministic stream of awkward inputs: random bytes, broken UTF-8, special-token texts,
/// whitespace runs, every script.
fn awkward_texts() -> Vec<Vec<u8>> {
    let pieces: &[&[u8]] = &[
        b" ",
        b"  ",
        b"\n",
        b"\r\n",
        b"\t",
        b"\x0b",
        "\u{a0}".as_bytes(),
        "\u{3000}".as_bytes(),
        b"'s",
        b"'LL",
        b"12345",
        b"Hello",
        b"\xff",
        b"\xc3",
        b"\xe2\x82",
        b"\xed\xa0\x80",
        b"\xc0\x80",
        b"\xf0\x9f\x98\x80",
        "é".as_bytes(),
        "e\u{301}".as_bytes(),
        "日本語".as_bytes(),
        "👍🏽".as_bytes(),
        b"<|im_start|>",
        b"<|im_end|>",
        b"<start_of_turn>",
        b"<bos>",
        b"<eos>",
        b"<unused7>",
        b"<table>",
        b"[multimodal]",
        b"<",
        b"|",
        b">",
        b"\x00",
        b"$",
        b"...",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..400)
        .map(|_| {
            let n = (next() % 24) as usize;
            let mut t = Vec::new();
            for _ in 0..n {
                let r = next();
                if r % 5 == 0 {
                    t.push((r >> 8) as u8);
                } else {
                    t.extend_from_slice(pieces[(r >> 16) as usize % pieces.len()]);
                }
            }
            t
        })
        .collect()
}

#[test]
fn any_input_tokenizes_and_round_trips_through_pieces() {
    for v in [smollm2(), gemma3()] {
        for text in awkward_texts() {
            for (add, parse) in [(false, false), (true, true)] {
                let ids = v.tokenize(&text, add, parse).unwrap();
                for &id in &ids {
                    assert!(v.check(id).is_ok());
                }
                v.detokenize(&ids, true, true).unwrap();
            }
            // Valid UTF-8 without special texts comes back byte for byte.
            if std::str::from_utf8(&text).is_ok() && !text.contains(&b'<') && !text.contains(&b'[') {
                let ids = v.tokenize(&text, false, false).unwrap();
                let back = v.detokenize(&ids, false, false).unwrap().text;
                if v.vocab_type() == VocabType::Bpe {
                    assert_eq!(back, text, "{:?}", String::from_utf8_lossy(&text));
                }
            }
        }
    }
}

#[test]
fn long_inputs_stay_linear() {
    // Long runs of one character are where quadratic work would show.
    let v = gemma3();
    for unit in [&b" "[..], b"\n", b"a", b"1", b"<", "日".as_bytes()] {
        let text = unit.repeat(200_000);
        let start = std::time::Instant::now();
        let ids = v.tokenize(&text, true, true).unwrap();
        assert!(!ids.is_empty());
        let limit_ms = if cfg!(debug_assertions) { 60_000 } else { 3_000 };
        assert!(
            start.elapsed().as_millis() < limit_ms,
            "{:?} x 200000 took {:?}",
            unit,
            start.elapsed()
        );
    }
    // "hello", " world", " ", five digits; then " hello" ...; and the last space.
    let text = b"hello world 12345 ".repeat(60_000);
    assert_eq!(smollm2().tokenize(&text, false, false).unwrap().len(), 60_000 * 8 + 1);
}

#[test]
fn one_vocabulary_serves_many_threads() {
    fn assert_shareable<T: Send + Sync>() {}
    assert_shareable::<Vocab>();
    let v = smollm2();
    let texts = awkward_texts();
    let want: Vec<_> = texts.iter().map(|t| v.tokenize(t, true, true).unwrap()).collect();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for (t, w) in texts.iter().zip(&want) {
                    assert_eq!(&v.tokenize(t, true, true).unwrap(), w);
                }
            });
        }
    });
}

#[test]
fn out_of_range_ids_are_errors_that_name_the_id() {
    let v = smollm2();
    for id in [-1, 49152, i32::MAX, i32::MIN] {
        let e = v.attr(id).unwrap_err().to_string();
        assert!(e.contains(&id.to_string()) && e.contains("49152"), "{e}");
        assert!(v.piece(id, 0, true).is_err() && v.text(id).is_err() && v.score(id).is_err());
        assert!(v.detokenize(&[1, id], false, false).is_err());
        assert!(!v.is_eog(id));
    }
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers, family by family. Expectations follow llama.cpp's regexes (and the way its
// std::regex path sees non-ASCII text: one "letter" class, so case splits only apply to ASCII).

fn words(pre: PreTokenizer, text: &str) -> Vec<String> {
    let cpts = Cpts::new(text.as_bytes());
    let mut ends = Vec::new();
    pre.split(&cpts, &mut ends);
    let chars: Vec<char> = text.chars().collect();
    let mut start = 0;
    ends.iter()
        .map(|&e| {
            let w = chars[start..e].iter().collect();
            start = e;
            w
        })
        .collect()
}

fn check_split(pre: PreTokenizer, text: &str, want: &[&str]) {
    assert_eq!(words(pre, text), want, "{pre:?} on {text:?}");
}

#[test]
fn gpt2_family() {
    use PreTokenizer::Gpt2;
    check_split(
        Gpt2,
        "Hello world's 123  abc",
        &["Hello", " world", "'s", " 123", " ", " abc"],
    );
    // Contractions are lowercase only; an apostrophe before a capital is punctuation.
    check_split(Gpt2, "I'M don't", &["I", "'", "M", " don", "'t"]);
    check_split(Gpt2, "a  \n\tb  ", &["a", "  \n", "\t", "b", "  "]);
    check_split(Gpt2, "x+=1;// ok", &["x", "+=", "1", ";//", " ok"]);
    check_split(Gpt2, "日本語 テスト", &["日本語", " テスト"]);
}

#[test]
fn llama3_family() {
    use PreTokenizer::Llama3;
    check_split(
        Llama3,
        "I'M 12345 héllo\n\n  x",
        &["I", "'M", " ", "123", "45", " héllo", "\n\n", " ", " x"],
    );
    // A punctuation character leads a word; punctuation runs keep trailing newlines.
    check_split(Llama3, "(foo)...\n\nbar", &["(foo", ")...\n\n", "bar"]);
    check_split(Llama3, "1234567", &["123", "456", "7"]);
    check_split(Llama3, "  \r\n  end ", &["  \r\n", " ", " end", " "]);
}

#[test]
fn qwen2_and_qwen35_families() {
    check_split(PreTokenizer::Qwen2, "abc 2024", &["abc", " ", "2", "0", "2", "4"]);
    // Qwen3.5 keeps combining marks with letters; Qwen2 does not count them as letters.
    check_split(PreTokenizer::Qwen35, "cafe\u{301} x", &["cafe\u{301}", " x"]);
    check_split(PreTokenizer::Qwen2, "cafe\u{301} x", &["cafe", "\u{301}", " x"]);
}

#[test]
fn starcoder_family_splits_every_digit() {
    // smollm, starcoder, refact, command-r, ...: `\p{N}` first, then GPT-2.
    check_split(PreTokenizer::Starcoder, "x=12 y", &["x", "=", "1", "2", " y"]);
    check_split(PreTokenizer::Starcoder, "v2.0 ²", &["v", "2", ".", "0", " ", "²"]);
}

#[test]
fn default_family() {
    // Punctuation runs, GPT-2, digit runs, then ASCII digits in threes.
    check_split(
        PreTokenizer::Default,
        "Hello!! 12345 $x",
        &["Hello", "!!", " ", "123", "45", " ", "$", "x"],
    );
    check_split(PreTokenizer::Default, "a`b", &["a", "`", "b"]);
}

#[test]
fn falcon_family() {
    check_split(PreTokenizer::Falcon, "a`b 1234", &["a", "`", "b", " ", "123", "4"]);
    check_split(PreTokenizer::Falcon, "x <= y", &["x", " ", "<=", " y"]);
}

#[test]
fn deepseek_coder_family() {
    check_split(
        PreTokenizer::DeepseekCoder,
        "foo(1)\n你好 bar",
        &["foo", "(", "1", ")", "\n", "你好", " bar"],
    );
    check_split(PreTokenizer::DeepseekCoder, "12", &["1", "2"]);
}

#[test]
fn deepseek_llm_family() {
    check_split(
        PreTokenizer::DeepseekLlm,
        "Hello, 世界! 123\n",
        &["Hello", ",", " ", "世界", "!", " ", "123", "\n"],
    );
    // Trailing whitespace becomes its own word; Greek is in the letter ranges.
    check_split(PreTokenizer::DeepseekLlm, "αβγ  ", &["αβγ", "  "]);
}

#[test]
fn gpt4o_family() {
    use PreTokenizer::Gpt4o;
    check_split(
        Gpt4o,
        "HTTPServer's iPhone 1234567",
        &["HTTPServer's", " i", "Phone", " ", "123", "456", "7"],
    );
    check_split(Gpt4o, "ÉCOLEdu", &["ÉCOLEdu"]);
    // Non-ASCII letters count as both cases, so a capital run gives back its last one.
    check_split(Gpt4o, "ÀB!", &["À", "B", "!"]);
    check_split(Gpt4o, "x //\n\ny", &["x", " //\n\n", "y"]);
    check_split(Gpt4o, "WE'RE  here", &["WE'RE", " ", " here"]);
}

#[test]
fn tekken_family() {
    use PreTokenizer::Tekken;
    check_split(
        Tekken,
        "HTTPServer's iPhone 1234",
        &["HTTPServer", "'s", " i", "Phone", " ", "1", "2", "3", "4"],
    );
    check_split(Tekken, "a\r\n\r\nb", &["a", "\r\n\r\n", "b"]);
}

/// Every pre-tokenizer family.
const FAMILIES: [PreTokenizer; 11] = {
    use PreTokenizer::*;
    [
        Default,
        Llama3,
        Qwen2,
        Qwen35,
        DeepseekLlm,
        DeepseekCoder,
        Falcon,
        Starcoder,
        Gpt2,
        Gpt4o,
        Tekken,
    ]
};

#[test]
fn every_family_covers_its_input() {
    // The words always concatenate to the input, whatever it is.
    for text in awkward_texts() {
        let canonical = unicode::canonical(&text);
        let cpts = Cpts::new(&canonical);
        for pre in FAMILIES {
            let mut ends = Vec::new();
            pre.split(&cpts, &mut ends);
            assert!(
                ends.windows(2).all(|w| w[0] < w[1]),
                "{pre:?}: empty or unordered words"
            );
            assert_eq!(
                cpts.byte_len(0..ends.last().copied().unwrap_or(0)),
                canonical.len(),
                "{pre:?}"
            );
        }
    }
}

#[test]
fn every_family_is_linear_on_long_runs() {
    for unit in [" ", "\n", "a", "A", "À", "1", "!", "\u{3000}", " a", "ÀB"] {
        let text = format!("x{}x", unit.repeat(100_000));
        let cpts = Cpts::new(text.as_bytes());
        for pre in FAMILIES {
            let start = std::time::Instant::now();
            let mut ends = Vec::new();
            pre.split(&cpts, &mut ends);
            let limit_ms = if cfg!(debug_assertions) { 20_000 } else { 1_000 };
            assert!(
                start.elapsed().as_millis() < limit_ms,
                "{pre:?} on {unit:?} x 100000 took {:?}",
                start.elapsed()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Small vocabularies built in memory

fn strs(items: &[&str]) -> Value {
    Value::Array(Array::Str(items.iter().map(|s| s.as_bytes().to_vec()).collect()))
}

fn build(kvs: Vec<(&str, Value)>) -> Result<Vocab> {
    let map: HashMap<String, Value> = kvs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    load::load(&|k| map.get(k))
}

/// A SentencePiece vocabulary: control tokens, the 256 byte tokens, and a few pieces.
fn tiny_spm(extra: Vec<(&str, Value)>) -> Vocab {
    let mut tokens = vec!["<unk>".to_owned(), "<s>".to_owned(), "</s>".to_owned()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0, 0.0, 0.0];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for (t, s) in [
        ("▁ab", -1.0),
        ("ab", -2.0),
        ("▁a", -3.0),
        ("a", -10.0),
        ("b", -10.0),
        ("▁", -10.0),
        ("<hi>", 0.0),
    ] {
        tokens.push(t.to_owned());
        types.push(if t == "<hi>" { 4 } else { 1 });
        scores.push(s);
    }
    let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut kvs = vec![
        ("tokenizer.ggml.model", Value::Str(b"llama".to_vec())),
        ("tokenizer.ggml.tokens", strs(&tokens)),
        ("tokenizer.ggml.scores", Value::Array(Array::F32(scores))),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
    ];
    kvs.extend(extra);
    build(kvs).unwrap()
}

fn id(v: &Vocab, text: &str) -> i32 {
    v.token_of(text.as_bytes()).unwrap()
}

#[test]
fn spm_merges_by_score_and_falls_back_to_bytes() {
    let v = tiny_spm(vec![]);
    // Defaults of a `llama` vocabulary: BOS 1, EOS 2, UNK 0, add BOS, a space prefix.
    assert_eq!(
        (v.special_ids().bos, v.special_ids().eos, v.special_ids().unk),
        (1, 2, 0)
    );
    assert!(v.add_bos() && !v.add_eos());
    let ab = id(&v, "▁ab");
    assert_eq!(v.tokenize(b"ab ab", false, false).unwrap(), [ab, ab]);
    assert_eq!(v.tokenize(b"ab ab", true, false).unwrap(), [1, ab, ab]);
    // "c" and "é" are not pieces: their bytes are.
    let byte = |b: u8| id(&v, &format!("<0x{b:02X}>"));
    assert_eq!(v.tokenize(b"ac", false, false).unwrap(), [id(&v, "▁a"), byte(b'c')]);
    assert_eq!(
        v.tokenize("é".as_bytes(), false, false).unwrap(),
        [id(&v, "▁"), byte(0xc3), byte(0xa9)]
    );
    // The newline token is the newline byte.
    assert_eq!(v.special_ids().nl, byte(b'\n'));
    // Byte tokens render as their byte; the leading space of the first piece goes when asked.
    // Detokenizing drops the space prefix again, unless a BOS was removed first (as llama.cpp does).
    assert_eq!(v.detokenize(&[ab, byte(b'!')], false, false).unwrap().text, b"ab!");
    assert_eq!(v.detokenize(&[1, ab, byte(b'!')], true, false).unwrap().text, b" ab!");
    assert_eq!(v.piece(ab, 1, false).unwrap(), b"ab");
}

#[test]
fn spm_space_prefix_follows_special_tokens() {
    let v = tiny_spm(vec![]);
    let (hi, ab, a) = (id(&v, "<hi>"), id(&v, "▁ab"), id(&v, "▁a"));
    // A user-defined token is split out even without parse_special; the text after it gets the prefix.
    assert_eq!(v.tokenize(b"ab<hi>ab", false, false).unwrap(), [ab, hi, ab]);
    // Control tokens only with parse_special.
    assert_eq!(v.tokenize(b"</s>a", false, true).unwrap(), [2, a]);
    assert_ne!(v.tokenize(b"</s>a", false, false).unwrap()[0], 2);
    let v = tiny_spm(vec![("tokenizer.ggml.add_space_prefix", Value::Bool(false))]);
    assert_eq!(v.tokenize(b"ab", false, false).unwrap(), [id(&v, "ab")]);
}

/// A byte-level BPE vocabulary: the 256 byte characters, some merges, and special tokens.
fn tiny_bpe(pre: &str, extra: Vec<(&str, Value)>) -> Result<Vocab> {
    let ch = |b: u8| char::from_u32(unicode::byte_to_char(b)).unwrap().to_string();
    let mut tokens: Vec<String> = (0..=255u8).map(ch).collect();
    let merges = [
        "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "1 2",
    ];
    for m in merges {
        tokens.push(m.replace(' ', ""));
    }
    tokens.extend(["<|end|>", "<|user|>"].map(str::to_owned));
    let mut types = vec![1; tokens.len()];
    types[tokens.len() - 2..].fill(3);
    let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut kvs = vec![
        ("tokenizer.ggml.model", Value::Str(b"gpt2".to_vec())),
        ("tokenizer.ggml.pre", Value::Str(pre.as_bytes().to_vec())),
        ("tokenizer.ggml.tokens", strs(&tokens)),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
        ("tokenizer.ggml.merges", strs(&merges)),
    ];
    kvs.extend(extra);
    build(kvs)
}

#[test]
fn bpe_merges_by_rank() {
    let v = tiny_bpe("gpt-2", vec![]).unwrap();
    let hello = id(&v, "hello");
    let world = id(&v, "Ġworld");
    assert_eq!(v.tokenize(b"hello world", false, false).unwrap(), [hello, world]);
    assert_eq!(
        v.detokenize(&[hello, world], false, false).unwrap().text,
        b"hello world"
    );
    // Bytes without merges stay single byte tokens (token i is byte i here); malformed UTF-8 is
    // read as U+FFFD, as llama.cpp does.
    assert_eq!(v.tokenize(b"\xff", false, false).unwrap(), [0xef, 0xbf, 0xbd]);
    assert_eq!(
        v.tokenize("é".as_bytes(), false, false).unwrap(),
        [id(&v, "Ã"), id(&v, "©")]
    );
    // The newline token is what "\n" tokenizes to.
    assert_eq!(v.special_ids().nl, id(&v, "Ċ"));
    // <|end|> is recognised as EOT and EOG by its text, and made a control token.
    let end = id(&v, "<|end|>");
    assert_eq!(v.special_ids().eot, end);
    assert!(v.is_eog(end) && v.is_control(end).unwrap());
    assert_eq!(v.tokenize(b"hello<|end|>", false, true).unwrap(), [hello, end]);
    assert_ne!(v.tokenize(b"hello<|end|>", false, false).unwrap(), [hello, end]);
}

#[test]
fn bpe_flags_come_from_the_pre_tokenizer_and_metadata() {
    // llama-bpe: BOS added by default; the GPT-2 defaults (11) are outside this vocabulary.
    let v = tiny_bpe("llama-bpe", vec![("tokenizer.ggml.bos_token_id", Value::U32(258))]).unwrap();
    assert!(v.add_bos());
    assert_eq!(v.tokenize(b"12", true, false).unwrap(), [258, id(&v, "12")]);
    let v = tiny_bpe("gpt-2", vec![("tokenizer.ggml.add_bos_token", Value::Bool(true))]).unwrap();
    // BOS 11 is inside this vocabulary, so it stays.
    assert_eq!(v.tokenize(b"", true, false).unwrap(), [11]);
    let e = tiny_bpe("olmo", vec![("tokenizer.ggml.eos_token_id", Value::U32(5000))])
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("'tokenizer.ggml.eos_token_id' = 5000 is outside the vocabulary"),
        "{e}"
    );
}

#[test]
fn detokenize_cleans_spaces_when_the_vocabulary_asks() {
    // gpt-2 cleans up tokenization spaces; smollm does not.
    let text = b"a , b ' c 's d 're e 't";
    let cleaned = b"a, b'c's d're e 't";
    let v = tiny_bpe("gpt-2", vec![]).unwrap();
    let ids = v.tokenize(text, false, false).unwrap();
    let out = v.detokenize(&ids, false, false).unwrap();
    assert_eq!((out.text.as_slice(), out.raw_len), (&cleaned[..], text.len()));
    let v = tiny_bpe("smollm", vec![]).unwrap();
    let ids = v.tokenize(text, false, false).unwrap();
    assert_eq!(v.detokenize(&ids, false, false).unwrap().text, text);
}

#[test]
fn clean_spaces_passes() {
    let run = |s: &[u8]| {
        let mut v = s.to_vec();
        clean_spaces(&mut v);
        v
    };
    assert_eq!(run(b""), b"");
    assert_eq!(run(b" "), b" ");
    assert_eq!(run(b"x ?"), b"x?");
    assert_eq!(run(b"a ' ' b"), b"a'' b");
    assert_eq!(run(b"I 'm you 'll we 've"), b"I'm you 'll we've");
}

#[test]
fn special_tokens_strip_as_their_attributes_say() {
    use special::Fragment::{Text, Token};
    // Longest first; lstrip eats whitespace before, rstrip after.
    let specials = Specials::new(vec![0, 1, 2], |id| [&b"<a>"[..], b"<ab>", b"b"][id as usize]);
    let describe = |id: u32| Special {
        id,
        text: [&b"<a>"[..], b"<ab>", b"b"][id as usize],
        lstrip: id == 0,
        rstrip: id == 1,
    };
    let text = b"x  <a> <ab>  yb";
    let got = specials.split(text, |_| true, describe);
    assert_eq!(
        got,
        [Text(0, 1), Token(0), Text(6, 7), Token(1), Text(13, 14), Token(2)]
    );
    let got = specials.split(text, |id| id != 1, describe);
    assert_eq!(
        got,
        [Text(0, 1), Token(0), Text(6, 9), Token(2), Text(10, 14), Token(2)]
    );
    assert!(specials.split(b"", |_| true, describe).is_empty());
}

#[test]
fn unsupported_vocabularies_are_refused_by_name() {
    for (model, pre, msg) in [
        ("whitespace", "", "tokenizer 'whitespace'"),
        ("hybriddna", "", "tokenizer 'hybriddna'"),
        ("what", "", "unknown tokenizer: 'what'"),
        ("gpt2", "bloom", "pre-tokenizer 'bloom'"),
        ("gpt2", "my-own", "unknown pre-tokenizer type: 'my-own'"),
    ] {
        let e = build(vec![
            ("tokenizer.ggml.model", Value::Str(model.as_bytes().to_vec())),
            ("tokenizer.ggml.pre", Value::Str(pre.as_bytes().to_vec())),
            ("tokenizer.ggml.tokens", strs(&["a"])),
            ("tokenizer.ggml.merges", strs(&[])),
        ])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains(msg), "{model}/{pre}: {e}");
    }
}

#[test]
fn malformed_metadata_is_an_error_naming_the_key() {
    let base = || {
        vec![
            ("tokenizer.ggml.model", Value::Str(b"llama".to_vec())),
            ("tokenizer.ggml.tokens", strs(&["a", "b"])),
        ]
    };
    let cases: Vec<(Vec<(&str, Value)>, &str)> = vec![
        (vec![("tokenizer.ggml.tokens", Value::U32(3))], "tokenizer.ggml.tokens"),
        (
            vec![("tokenizer.ggml.scores", Value::Array(Array::F32(vec![0.0])))],
            "tokenizer.ggml.scores",
        ),
        (
            vec![("tokenizer.ggml.token_type", Value::Array(Array::U8(vec![1, 1])))],
            "tokenizer.ggml.token_type",
        ),
        (
            vec![("tokenizer.ggml.bos_token_id", Value::I32(1))],
            "tokenizer.ggml.bos_token_id",
        ),
        (
            vec![("tokenizer.ggml.add_bos_token", Value::U32(1))],
            "tokenizer.ggml.add_bos_token",
        ),
        (vec![("tokenizer.ggml.tokens", strs(&["a", "a"]))], "the same text 'a'"),
    ];
    for (extra, msg) in cases {
        let mut kvs = base();
        for (k, v) in extra {
            kvs.retain(|(key, _)| *key != k);
            kvs.push((k, v));
        }
        let e = build(kvs).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(msg), "expected an error about {msg}, got {e:?}");
    }
    let e = build(vec![("tokenizer.ggml.tokens", strs(&["a"]))])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("tokenizer.ggml.model"), "{e}");
    // An empty token text is renamed, as llama.cpp does.
    let v = build(vec![
        ("tokenizer.ggml.model", Value::Str(b"llama".to_vec())),
        ("tokenizer.ggml.tokens", strs(&["a", ""])),
    ])
    .unwrap();
    assert_eq!(v.text(1).unwrap(), b"[EMPTY_1]");
}

#[test]
fn hash_map_order_is_libstdcxx_order() {
    // Iteration order of std::unordered_map<std::string, int> after inserting "tok0".."tok39" in
    // order, printed by a program built with GCC 12's libstdc++.
    let want = [
        38, 37, 36, 33, 32, 39, 31, 30, 29, 11, 17, 7, 8, 34, 5, 6, 9, 19, 3, 2, 1, 27, 18, 13, 15, 22, 12, 20, 14, 4,
        21, 16, 25, 35, 23, 0, 24, 10, 26, 28,
    ];
    let hashes: Vec<u64> = (0..40)
        .map(|i| stl_order::std_hash(format!("tok{i}").as_bytes()))
        .collect();
    assert_eq!(stl_order::iteration_order(&hashes).unwrap(), want);
}

#[test]
fn utf8_is_decoded_as_llama_cpp_does() {
    let decode = |b: &[u8]| {
        let mut v = Vec::new();
        unicode::decode(b, |c, n| v.push((c, n)));
        v
    };
    // Malformed sequences give U+FFFD and advance one byte; overlong forms and surrogates decode.
    assert_eq!(decode(b"\xe2\x82"), [(0xfffd, 1), (0xfffd, 1)]);
    assert_eq!(decode(b"\xc0\x80"), [(0, 2)]);
    assert_eq!(decode(b"\xed\xa0\x80"), [(0xd800, 3)]);
    assert_eq!(decode(b"\xf7\xbf\xbf\xbf"), [(0x1f_ffff, 4)]);
    assert_eq!(&*unicode::canonical(b"a\xc0\x80\xff"), b"a\x00\xef\xbf\xbd");
    // GPT-2's byte alphabet: printable bytes are themselves, the rest from U+0100 in order.
    assert_eq!(
        (
            unicode::byte_to_char(b'a'),
            unicode::byte_to_char(0),
            unicode::byte_to_char(b' ')
        ),
        (97, 0x100, 0x120)
    );
    for b in 0..=255u8 {
        assert_eq!(unicode::char_to_byte(unicode::byte_to_char(b)), Some(b));
    }
}

/// llama.cpp's dummy tokenizer (`test`, used by the dummy models of llama.cpp's own tests): every
/// 5 bytes of text hash to a token, special tokens are still split out, nothing is ever added, and
/// a token's piece is its id in hex. Expected ids from llama.cpp's formula (base-31 hash mod n_vocab).
#[test]
fn test_tokenizer_hashes_chunks_and_renders_ids_in_hex() {
    let names: Vec<String> = (0..128).map(|i| format!("tok_{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut types = vec![1; 128];
    types[7] = 4; // user-defined: always split out of the text
    let v = build(vec![
        ("tokenizer.ggml.model", Value::Str(b"test".to_vec())),
        ("tokenizer.ggml.tokens", strs(&names)),
        ("tokenizer.ggml.scores", Value::Array(Array::F32(vec![0.0; 128]))),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
        ("tokenizer.ggml.add_bos_token", Value::Bool(true)),
    ])
    .unwrap();
    assert_eq!(v.vocab_type(), VocabType::Test);
    let ids = v.special_ids();
    assert_eq!(
        (ids.bos, ids.eos, ids.unk, ids.nl),
        (TOKEN_NULL, TOKEN_NULL, TOKEN_NULL, 10)
    );
    assert_eq!(v.tokenize(b"hello world!", true, false).unwrap(), [82, 50, 61]);
    assert_eq!(v.tokenize(b"hellotok_7d!", false, false).unwrap(), [82, 7, 61]);
    assert_eq!(v.tokenize(b"", true, false).unwrap(), [] as [i32; 0]);
    assert_eq!(v.piece(100, 0, false).unwrap(), b"64");
    assert_eq!(v.piece(7, 0, true).unwrap(), b"7");
    assert_eq!(v.detokenize(&[1, 100, 127], false, false).unwrap().text, b"1647f");
}

// ---------------------------------------------------------------------------------------------
// llama.cpp's own tokenizer test data

/// llama.cpp's tokenizer tests (`tests/test-tokenizer-0.cpp` over `models/ggml-vocab-*.gguf`, their
/// `.inp` cases and `.out` token ids, which scripts/fetch-ggml.sh extracts from the pinned sdist):
/// every case of every vocabulary tokenizes (no special tokens added, none parsed) to the listed ids.
#[test]
fn llama_cpp_test_vocabularies_tokenize_every_case_as_listed() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".ggml/vocab");
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/fetch-ggml.sh", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".gguf.inp"))
        .collect();
    inputs.sort();
    assert_eq!(inputs.len(), 15, "llama.cpp 0.3.36 has 15 test vocabularies with cases");
    let mut failures = Vec::new();
    for inp in &inputs {
        let gguf = inp.with_extension("");
        let name = gguf
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let out = std::fs::read_to_string(gguf.with_extension("gguf.out")).expect("the .out file");
        let bytes = std::fs::read(&gguf).expect("the vocabulary");
        let vocab = match GgufFile::parse(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|g| Vocab::from_gguf(&g).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                failures.push(format!("{name}: does not load: {e}"));
                continue;
            }
        };
        let text = std::fs::read(inp).expect("the .inp file");
        let cases = split_cases(&text);
        let expected: Vec<&str> = out.lines().collect();
        assert_eq!(
            cases.len(),
            expected.len(),
            "{name}: cases and results differ in number"
        );
        let mut wrong = 0;
        for (case, want) in cases.iter().zip(&expected) {
            let want: Vec<i32> = want
                .split_whitespace()
                .map(|t| t.parse().expect("a token id"))
                .collect();
            let got = vocab.tokenize(case, false, false).expect("tokenizes");
            if got != want {
                if wrong < 3 {
                    failures.push(format!(
                        "{name}: {:?} gave {got:?}, llama.cpp {want:?}",
                        String::from_utf8_lossy(case)
                    ));
                }
                wrong += 1;
            }
        }
        if wrong > 0 {
            failures.push(format!("{name}: {wrong} of {} cases differ", cases.len()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The cases of an `.inp` file: separated by "\n__ggml_vocab_test__\n" (the last one ends the file).
fn split_cases(text: &[u8]) -> Vec<&[u8]> {
    const SEP: &[u8] = b"\n__ggml_vocab_test__\n";
    let mut cases = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.windows(SEP.len()).position(|w| w == SEP) {
            Some(i) => {
                cases.push(&rest[..i]);
                rest = &rest[i + SEP.len()..];
            }
            None => {
                cases.push(rest);
                break;
            }
        }
    }
    cases
}

/// A WordPiece vocabulary: BERT's special tokens at their usual ids, a few words and pieces.
fn tiny_wpm(extra: Vec<(&str, Value)>) -> Vocab {
    let mut tokens: Vec<String> = (0..104).map(|i| format!("[unused{i}]")).collect();
    for (id, t) in [
        (0, "[PAD]"),
        (100, "[UNK]"),
        (101, "[CLS]"),
        (102, "[SEP]"),
        (103, "[MASK]"),
    ] {
        tokens[id] = t.to_owned();
    }
    for t in [
        "▁hello", "▁cafe", "▁un", "##believ", "believ", "able", "▁,", "▁!", "▁中", "▁a",
    ] {
        tokens.push(t.to_owned());
    }
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut types = vec![1; tokens.len()];
    for id in [0, 100, 101, 102, 103] {
        types[id] = 3;
    }
    let mut kvs = vec![
        ("tokenizer.ggml.model", Value::Str(b"bert".to_vec())),
        ("tokenizer.ggml.tokens", strs(&refs)),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
    ];
    kvs.extend(extra);
    build(kvs).expect("a WordPiece vocabulary loads")
}

#[test]
fn wordpiece_normalizes_splits_and_covers_words_greedily() {
    let v = tiny_wpm(Vec::new());
    let id = |t: &str| v.token_of(t.as_bytes()).expect("token");
    // Lowercased, accents stripped, punctuation and CJK standing alone, whitespace between words.
    assert_eq!(
        v.tokenize("HELLO,Café!\t中".as_bytes(), false, false)
            .expect("tokenizes"),
        [id("▁hello"), id("▁,"), id("▁cafe"), id("▁!"), id("▁中")]
    );
    // The longest token from the left each time; a word that cannot be covered is unknown.
    assert_eq!(
        v.tokenize(b"unbelievable a", false, false).expect("tokenizes"),
        [id("▁un"), id("believ"), id("able"), id("▁a")]
    );
    assert_eq!(
        v.tokenize(b"hello xyz", false, false).expect("tokenizes"),
        [id("▁hello"), 100]
    );
    // Special tokens frame the text with [CLS] and [SEP]; nothing else is added.
    assert_eq!(
        v.tokenize(b"hello", true, false).expect("tokenizes"),
        [101, id("▁hello"), 102]
    );
    assert_eq!(v.vocab_type(), VocabType::Wpm);
    assert_eq!(v.special_ids().nl, 0, "the newline token is the padding token");
    assert_eq!(v.piece(id("▁hello"), 0, false).expect("piece"), b" hello");
    // Without lowercasing, case (and, by default then, accents) stay.
    let cased = tiny_wpm(vec![("tokenizer.ggml.normalizer.lowercase", Value::Bool(false))]);
    assert_eq!(cased.tokenize(b"HELLO", false, false).expect("tokenizes"), [100]);
}

#[test]
fn gemma4_bpe_merges_raw_utf8_with_escaped_spaces() {
    let mut tokens: Vec<String> = vec!["<pad>".into(), "<eos>".into(), "<bos>".into()];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    for t in ["▁", "h", "i", "é", "hi", "▁hi", "\n", "\n\n", "▁é"] {
        tokens.push(t.to_owned());
    }
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut types = vec![1; tokens.len()];
    types[..3].fill(3);
    types[3..259].fill(6);
    let v = build(vec![
        ("tokenizer.ggml.model", Value::Str(b"gemma4".to_vec())),
        ("tokenizer.ggml.pre", Value::Str(b"default".to_vec())),
        ("tokenizer.ggml.tokens", strs(&refs)),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
        ("tokenizer.ggml.merges", strs(&["h i", "▁ hi", "▁ é"])),
        ("tokenizer.ggml.bos_token_id", Value::U32(2)),
        ("tokenizer.ggml.add_bos_token", Value::Bool(false)),
    ])
    .expect("a Gemma 4 vocabulary loads");
    let id = |t: &str| v.token_of(t.as_bytes()).expect("token");
    // Spaces become U+2581 and merge with what follows; a multi-byte character is one symbol;
    // a run of newlines that is a token stays whole; an unknown character falls back to bytes.
    assert_eq!(
        v.tokenize(" hi é\n\nz".as_bytes(), false, false).expect("tokenizes"),
        [id("▁hi"), id("▁é"), id("\n\n"), id("<0x7A>")]
    );
    // BOS is added even though the file says not to (llama.cpp's override for Gemma 4).
    assert_eq!(v.tokenize(b"hi", true, false).expect("tokenizes"), [2, id("hi")]);
    assert_eq!(v.piece(id("▁hi"), 0, false).expect("piece"), b" hi");
}

/// A unigram vocabulary: control tokens, then pieces with log-probabilities.
fn tiny_ugm(extra: Vec<(&str, Value)>) -> Vocab {
    let pieces = [
        ("<pad>", 0.0, 3),
        ("</s>", 0.0, 3),
        ("<unk>", 0.0, 2),
        ("▁", -2.0, 1),
        ("▁a", -1.0, 1),
        ("b", -3.0, 1),
        ("ab", -2.5, 1),
        ("▁ab", -4.5, 1),
        ("<x>", 0.0, 4),
    ];
    let mut kvs = vec![
        ("tokenizer.ggml.model", Value::Str(b"t5".to_vec())),
        ("tokenizer.ggml.tokens", strs(&pieces.map(|p| p.0))),
        (
            "tokenizer.ggml.scores",
            Value::Array(Array::F32(pieces.map(|p| p.1).to_vec())),
        ),
        (
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(pieces.map(|p| p.2).to_vec())),
        ),
        ("tokenizer.ggml.add_space_prefix", Value::Bool(true)),
    ];
    kvs.extend(extra);
    build(kvs).expect("a unigram vocabulary loads")
}

#[test]
fn unigram_finds_the_most_probable_segmentation() {
    let v = tiny_ugm(Vec::new());
    // "▁ab": "▁a"+"b" scores -4, "▁ab" -4.5, "▁"+"ab" -4.5: the first wins. Unknown code points
    // cost the lowest score less 10, and a run of them is one unknown token.
    assert_eq!(v.tokenize(b"ab", false, false).expect("tokenizes"), [4, 5]);
    assert_eq!(
        v.tokenize("ab€€b".as_bytes(), false, false).expect("tokenizes"),
        [4, 5, 2, 5]
    );
    // User-defined tokens are split out whole; EOS ends the text unless the file says not to.
    assert_eq!(v.tokenize(b"<x>ab", true, false).expect("tokenizes"), [8, 4, 5, 1]);
    assert_eq!(v.vocab_type(), VocabType::Ugm);
    // Spaces are escaped, each one (no merging unless remove_extra_whitespaces).
    assert_eq!(v.tokenize(b"a  b", false, false).expect("tokenizes"), [4, 3, 3, 5]);
    let merged = tiny_ugm(vec![("tokenizer.ggml.remove_extra_whitespaces", Value::Bool(true))]);
    assert_eq!(merged.tokenize(b"a  b", false, false).expect("tokenizes"), [4, 3, 5]);
    // A charsmap too small for its header is refused when loading.
    let bad = build(vec![
        ("tokenizer.ggml.model", Value::Str(b"t5".to_vec())),
        ("tokenizer.ggml.tokens", strs(&["a"])),
        (
            "tokenizer.ggml.precompiled_charsmap",
            Value::Array(Array::U8(vec![1, 0])),
        ),
    ]);
    assert!(bad
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
        .contains("precompiled_charsmap"));
}

#[test]
fn merges_are_listed_back_as_llama_cpp_ranks_them() {
    let lines: Vec<Vec<u8>> = ["a b", "nospace", "a b", "c d", " x y", "c d"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let out = super::load::ranked_merges(&lines);
    // A repeated pair leaves its rank empty, unless it is past the last rank; a line without a
    // space (after its first byte) is the pair ("", "").
    let expected: [&[u8]; 5] = [b"a b", b" ", b"", b"c d", b" x y"];
    assert_eq!(out, expected.map(<[u8]>::to_vec));
}

/// An RWKV vocabulary: "<s>", every byte but 'z', a few longer byte strings, escaped as the
/// converter writes them.
fn tiny_rwkv(extra: Vec<(&str, Value)>) -> Result<Vocab> {
    let mut tokens = vec!["<s>".to_owned()];
    let mut types = vec![3];
    for b in (0..=255u8).filter(|&b| b != b'z') {
        tokens.push(match b {
            b'\t' => "\\t".to_owned(),
            b'\n' => "\\n".to_owned(),
            b'\\' => "\\\\".to_owned(),
            b'\'' => "\\'".to_owned(),
            0x20..=0x7e => char::from(b).to_string(),
            _ => format!("\\x{b:02x}"),
        });
        types.push(1);
    }
    for t in ["ab", "abcd", "\\n\\n", "\\xe6\\x97", "xy!"] {
        tokens.push(t.to_owned());
        types.push(1);
    }
    let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut kvs = vec![
        ("tokenizer.ggml.model", Value::Str(b"rwkv".to_vec())),
        ("tokenizer.ggml.tokens", strs(&tokens)),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
    ];
    kvs.extend(extra);
    build(kvs)
}

#[test]
fn rwkv_texts_unescape_as_llama_cpp_reads_them() {
    let u = |s: &str| rwkv::unescape(s.as_bytes());
    assert_eq!(u("a\\tb\\nc\\rd"), b"a\tb\nc\rd");
    assert_eq!(u("\\x41\\xe6\\x97"), [0x41, 0xe6, 0x97]);
    assert_eq!(u("\\\\\\'\\\""), b"\\'\"");
    // Upper-case hex digits count from '0' ('A' is 17), in 8-bit arithmetic; a cut escape is dropped.
    assert_eq!(u("\\xAB"), [(17u8 << 4).wrapping_add(18)]);
    assert_eq!(u("ok\\x4"), b"ok");
    assert_eq!(u("ok\\"), b"ok");
}

#[test]
fn rwkv_takes_the_longest_token_greedily() {
    let v = tiny_rwkv(Vec::new()).expect("an RWKV vocabulary loads");
    assert_eq!(v.vocab_type(), VocabType::Rwkv);
    let ids = v.special_ids();
    assert_eq!(
        (ids.bos, ids.eos, ids.unk, ids.pad),
        (TOKEN_NULL, TOKEN_NULL, TOKEN_NULL, TOKEN_NULL)
    );
    assert!(!v.add_bos() && !v.add_eos());
    let t = |s: &str| id(&v, s);
    // Greedy, not best: "abc" is "ab" + "c" although "abcd" starts there; "\n\n" is one token.
    assert_eq!(v.tokenize(b"abcab", false, false).unwrap(), [t("ab"), t("c"), t("ab")]);
    assert_eq!(
        v.tokenize(b"abcd\n\n\n", false, false).unwrap(),
        [t("abcd"), t("\\n\\n"), t("\\n")]
    );
    assert_eq!(v.special_ids().nl, t("\\n"));
    // Byte strings that are not UTF-8 are tokens too; a byte no token starts with is UNK, even
    // when the vocabulary has none.
    assert_eq!(
        v.tokenize("日z".as_bytes(), false, false).unwrap(),
        [t("\\xe6\\x97"), t("\\xa5"), TOKEN_NULL]
    );
    // "<s>" is a token of the trie as well as a control token; no special token is ever added.
    assert_eq!(v.tokenize(b"<s>a", true, false).unwrap(), [0, t("a")]);
    let with_bos = tiny_rwkv(vec![
        ("tokenizer.ggml.add_bos_token", Value::Bool(true)),
        ("tokenizer.ggml.bos_token_id", Value::U32(0)),
    ])
    .expect("loads");
    assert_eq!(
        with_bos.tokenize(b"a", true, false).unwrap(),
        [with_bos.token_of(b"a").unwrap()]
    );
    // Pieces are the unescaped bytes, whatever the token's type (control ones only when asked).
    assert_eq!(v.piece(t("\\n\\n"), 0, false).unwrap(), b"\n\n");
    assert_eq!(v.piece(t("\\xe6\\x97"), 0, false).unwrap(), [0xe6, 0x97]);
    assert_eq!(v.piece(0, 0, false).unwrap(), b"");
    assert_eq!(v.piece(0, 0, true).unwrap(), b"<s>");
    let text = "abcd 日本\n\n".as_bytes();
    let tokens = v.tokenize(text, false, false).unwrap();
    assert_eq!(v.detokenize(&tokens, false, false).unwrap().text, text);
}

#[test]
fn rwkv_refuses_text_where_llama_cpp_would_loop_forever() {
    // "x" starts "xy!" but is no token: llama.cpp starts over from the beginning forever.
    let v = tiny_rwkv(Vec::new()).expect("loads");
    assert_eq!(v.tokenize(b"xy!", false, false).unwrap(), [id(&v, "xy!")]);
    let vocab_without_x = build(vec![
        ("tokenizer.ggml.model", Value::Str(b"rwkv".to_vec())),
        ("tokenizer.ggml.tokens", strs(&["\\n", "xy", "a"])),
    ])
    .expect("loads");
    assert_eq!(vocab_without_x.tokenize(b"xya", false, false).unwrap(), [1, 2]);
    let e = vocab_without_x.tokenize(b"axa", false, false).unwrap_err().to_string();
    assert!(e.contains("byte 1"), "{e}");
}

/// A PLaMo-2 vocabulary: control tokens, the 256 byte tokens, scored pieces, padding scored -1000.
fn tiny_plamo2(pieces: &[(&str, f32)], extra: Vec<(&str, Value)>) -> Result<Vocab> {
    let mut tokens: Vec<String> = ["<|plamo:unk|>", "<|plamo:bos|>", "<|plamo:eos|>", "<|plamo:pad|>"]
        .map(String::from)
        .to_vec();
    let mut types = vec![2, 3, 3, 3];
    let mut scores = vec![0.0; 4];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for &(t, s) in pieces {
        tokens.push(t.to_owned());
        types.push(if t.starts_with("[PAD") { 5 } else { 1 });
        scores.push(s);
    }
    let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let mut kvs = vec![
        ("tokenizer.ggml.model", Value::Str(b"plamo2".to_vec())),
        ("tokenizer.ggml.tokens", strs(&tokens)),
        ("tokenizer.ggml.scores", Value::Array(Array::F32(scores))),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
    ];
    kvs.extend(extra);
    build(kvs)
}

const PLAMO2_PIECES: &[(&str, f32)] = &[
    ("a", -5.0),
    ("b", -5.0),
    ("c", -5.0),
    ("ab", -4.0),
    ("bc", -3.0),
    ("abc", -8.0),
    (" ", -2.0),
    ("\n", -2.0),
    ("日本", -3.0),
    ("日", -4.0),
    ("本", -4.0),
    ("[PAD1]", -1000.0),
];

#[test]
fn plamo2_finds_the_best_scored_segmentation() {
    let v = tiny_plamo2(PLAMO2_PIECES, Vec::new()).expect("a PLaMo-2 vocabulary loads");
    assert_eq!(v.vocab_type(), VocabType::Plamo2);
    let ids = v.special_ids();
    assert_eq!((ids.bos, ids.eos, ids.unk, ids.pad), (1, 2, 0, 3));
    assert!(!v.add_bos() && !v.add_eos());
    let t = |s: &str| id(&v, s);
    let byte = |b: u8| id(&v, &format!("<0x{b:02X}>"));
    // "abc": "a"+"bc" costs 8, "ab"+"c" 9, "abc" 8: the tie goes to the longer first piece.
    assert_eq!(v.tokenize(b"abc", false, false).unwrap(), [t("abc")]);
    assert_eq!(v.tokenize(b"abca", false, false).unwrap(), [t("abc"), t("a")]);
    assert_eq!(v.tokenize("日本語".as_bytes(), false, false).unwrap()[0], t("日本"));
    // A code point no piece covers is its UTF-8 bytes; a leading byte order mark is dropped.
    assert_eq!(
        v.tokenize("a語".as_bytes(), false, false).unwrap(),
        [t("a"), byte(0xe8), byte(0xaa), byte(0x9e)]
    );
    assert_eq!(
        v.tokenize("\u{feff}a\u{feff}".as_bytes(), false, false).unwrap()[..2],
        [t("a"), byte(0xef)]
    );
    // Malformed UTF-8 is U+FFFD, written as its bytes.
    assert_eq!(
        v.tokenize(b"\xff", false, false).unwrap(),
        [byte(0xef), byte(0xbf), byte(0xbd)]
    );
    assert_eq!(v.special_ids().nl, t("\n"));
    // A piece scored -1000 ends the scan of the candidates as the unknown sentinel does: " "
    // before "[PAD1]" is not found, and falls back to its byte.
    assert_eq!(v.tokenize(b" a", false, false).unwrap(), [t(" "), t("a")]);
    assert_eq!(v.tokenize(b" [PAD1]", false, false).unwrap(), [byte(b' '), t("[PAD1]")]);
    // Control tokens are pieces too; no special token is added, whatever the file says.
    assert_eq!(v.tokenize(b"<|plamo:bos|>", false, false).unwrap(), [1]);
    let with_bos =
        tiny_plamo2(PLAMO2_PIECES, vec![("tokenizer.ggml.add_bos_token", Value::Bool(true))]).expect("loads");
    assert!(with_bos.add_bos());
    assert_eq!(with_bos.tokenize(b"a", true, false).unwrap(), [t("a")]);
    // Detokenizing drops a leading BOS when asked, as the vocabulary adds one.
    assert_eq!(with_bos.detokenize(&[1, t("abc")], true, false).unwrap().text, b"abc");
}

#[test]
fn plamo2_pieces_are_texts_and_bytes() {
    let v = tiny_plamo2(PLAMO2_PIECES, Vec::new()).expect("loads");
    let t = |s: &str| id(&v, s);
    assert_eq!(v.piece(t("<0x41>"), 0, false).unwrap(), b"A");
    assert_eq!(v.piece(t("<0xE8>"), 0, false).unwrap(), [0xe8]);
    assert_eq!(v.piece(t(" "), 1, false).unwrap(), b"");
    assert_eq!(v.piece(t("日本"), 0, false).unwrap(), "日本".as_bytes());
    assert_eq!(v.piece(1, 0, false).unwrap(), b"");
    assert_eq!(v.piece(1, 0, true).unwrap(), b"<|plamo:bos|>");
    let text = "abc 日本語\n\u{1F600}".as_bytes();
    let tokens = v.tokenize(text, false, false).unwrap();
    assert_eq!(v.detokenize(&tokens, false, false).unwrap().text, text);
}

#[test]
fn plamo2_needs_every_byte_token() {
    let mut kvs = [
        ("tokenizer.ggml.model", Value::Str(b"plamo2".to_vec())),
        ("tokenizer.ggml.tokens", strs(&["<unk>", "<0x00>", "a"])),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(vec![2, 6, 1]))),
    ];
    let e = build(kvs.to_vec()).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("Byte token for <0x1> is not set"), "{e}");
    // Token 0 counts as no byte token, as in llama.cpp.
    kvs[1] = ("tokenizer.ggml.tokens", strs(&["<0x00>", "<unk>", "a"]));
    kvs[2] = ("tokenizer.ggml.token_type", Value::Array(Array::I32(vec![6, 2, 1])));
    let e = build(kvs.to_vec()).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("Byte token for <0x0> is not set"), "{e}");
}
