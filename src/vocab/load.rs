//! Building a `Vocab` from `tokenizer.ggml.*` metadata, step by step as llama.cpp's
//! `llama_vocab::impl::load` does: vocabulary type and pre-tokenizer, tokens, newline token, special
//! token ids, the EOT/FIM/EOG tokens it recognises by their text, and token attributes.

use super::bpe::Bpe;
use super::pretok::PreTokenizer;
use super::special::Specials;
use super::store::{Strings, TextIndex};
use super::{
    attr, plamo2, rwkv, stl_order, ugm, unicode, wpm, Model, SavedFacts, SpecialIds, Vocab, VocabType, TOKEN_NULL,
};
use crate::error::{Error, Result};
use crate::gguf::{Array, Value};

type Meta<'a> = &'a dyn Fn(&str) -> Option<&'a Value>;

fn err(msg: impl Into<String>) -> Error {
    Error::Vocab(msg.into())
}

fn wrong_type(key: &str, v: &Value, expected: &str) -> Error {
    err(format!(
        "key {key} has type {} but {expected} is expected",
        v.type_name()
    ))
}

/// A string value as llama.cpp reads it: through a C string, so cut at the first NUL.
fn c_string(s: &[u8]) -> &[u8] {
    s.split(|&b| b == 0).next().unwrap_or_default()
}

fn get_str<'a>(meta: Meta<'a>, key: &str) -> Result<Option<&'a [u8]>> {
    meta(key)
        .map(|v| v.as_str().map(c_string).ok_or_else(|| wrong_type(key, v, "str")))
        .transpose()
}

fn get_bool(meta: Meta, key: &str) -> Result<Option<bool>> {
    meta(key)
        .map(|v| v.as_bool().ok_or_else(|| wrong_type(key, v, "bool")))
        .transpose()
}

fn get_u32(meta: Meta, key: &str) -> Result<Option<u32>> {
    meta(key)
        .map(|v| v.as_u32().ok_or_else(|| wrong_type(key, v, "u32")))
        .transpose()
}

fn get_array<'a>(meta: Meta<'a>, key: &str) -> Result<Option<&'a Array>> {
    meta(key)
        .map(|v| {
            v.as_array()
                .ok_or_else(|| err(format!("invalid gguf type for {key}: {}", v.type_name())))
        })
        .transpose()
}

const TOKENS: &str = "tokenizer.ggml.tokens";

/// llama.cpp's settings for a BPE vocabulary, chosen by `tokenizer.ggml.pre`.
struct PreConfig {
    pre: PreTokenizer,
    clean_spaces: bool,
    ignore_merges: bool,
    add_bos: bool,
    add_sep: bool,
    no_bos: bool,
}

fn pre_config(name: &[u8]) -> Result<PreConfig> {
    use PreTokenizer::*;
    let name = String::from_utf8_lossy(name);
    let mut c = PreConfig {
        pre: Default,
        clean_spaces: true,
        ignore_merges: false,
        add_bos: false,
        add_sep: false,
        no_bos: false,
    };
    // Names and settings as in llama.cpp's pre-tokenizer table.
    match name.as_ref() {
        "" => {
            crate::log_warn!(
                "missing pre-tokenizer type (tokenizer.ggml.pre), using 'default'; generation \
                 quality will be degraded, consider regenerating the model"
            );
        }
        "default" => {}
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2"
        | "jina-v5-nano" => {
            c.pre = Llama3;
            c.ignore_merges = true;
            c.add_bos = true;
        }
        "dbrx" | "smaug-bpe" => c.pre = Llama3,
        "chatglm-bpe" | "glm4" | "glm5" => {
            c.pre = Llama3;
            c.no_bos = true;
            c.ignore_merges = name != "chatglm-bpe";
        }
        "deepseek-llm" => (c.pre, c.clean_spaces) = (DeepseekLlm, false),
        "deepseek-coder" => (c.pre, c.clean_spaces) = (DeepseekCoder, false),
        "falcon" => c.pre = Falcon,
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => c.pre = Starcoder,
        "command-r" | "smollm" => (c.pre, c.clean_spaces) = (Starcoder, false),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de" | "a.x-4.0" | "mellum"
        | "modern-bert" | "mpt" | "olmo" | "jais" | "exaone4" => c.pre = Gpt2,
        "jina-v1-en" | "jina-v2-code" | "roberta-bpe" => (c.pre, c.add_sep) = (Gpt2, true),
        "trillion" | "granite-docling" => (c.pre, c.clean_spaces) = (Gpt2, false),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" | "grok-2" => {
            (c.pre, c.clean_spaces) = (Qwen2, false)
        }
        "stablelm2" | "megrez" => c.pre = Qwen2,
        "qwen35" => (c.pre, c.clean_spaces) = (Qwen35, false),
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => (c.pre, c.clean_spaces) = (Gpt4o, false),
        // SentencePiece-style BPE over raw UTF-8, spaces escaped as U+2581.
        "gemma4" | "granite-embed-multi-311m" => c.pre = Gemma4,
        "tekken" => {
            (c.pre, c.clean_spaces) = (Tekken, false);
            c.ignore_merges = true;
            c.add_bos = true;
        }
        "minicpm5"
        | "deepseek-v3"
        | "spark2_5"
        | "youtu"
        | "jais-2"
        | "sarvam-moe"
        | "whitespace"
        | "poro-chat"
        | "viking"
        | "bloom"
        | "gpt3-finnish"
        | "exaone-moe"
        | "chameleon"
        | "granite-embed-multi-97m"
        | "tiny_aya"
        | "cohere2moe"
        | "superbpe"
        | "bailingmoe"
        | "bailingmoe2"
        | "llada-moe"
        | "seed-coder"
        | "hunyuan-dense"
        | "hy_v4"
        | "joyai-llm"
        | "kimi-k2"
        | "ufakzeka"
        | "afmoe"
        | "laguna" => {
            return Err(err(format!(
                "pre-tokenizer '{name}' (tokenizer.ggml.pre) is not supported yet"
            )))
        }
        _ => {
            return Err(err(format!(
                "unknown pre-tokenizer type: '{name}' (tokenizer.ggml.pre)"
            )))
        }
    }
    Ok(c)
}

/// `llama_token_type` (from `tokenizer.ggml.token_type`) -> attribute.
fn attr_of_type(t: i32) -> u32 {
    match t {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        _ => attr::UNDEFINED,
    }
}

// Texts llama.cpp recognises, from its vocabulary loader.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
/// gpt-oss tokens that llama.cpp always renders.
const ALWAYS_RENDERED: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

pub(super) fn load(meta: Meta) -> Result<Vocab> {
    let model_name =
        get_str(meta, "tokenizer.ggml.model")?.ok_or_else(|| err("key not found in model: tokenizer.ggml.model"))?;
    // Gemma 4's tokenizer has its own pre-tokenizer, whatever the file names.
    let gemma4 = model_name == b"gemma4";
    let pre_name = if gemma4 {
        &b"gemma4"[..]
    } else {
        get_str(meta, "tokenizer.ggml.pre")?.unwrap_or_default()
    };

    let kind = match model_name {
        b"llama" => VocabType::Spm,
        b"gpt2" | b"gemma4" => VocabType::Bpe,
        b"test" => VocabType::Test,
        b"bert" => VocabType::Wpm,
        b"t5" => VocabType::Ugm,
        b"rwkv" => VocabType::Rwkv,
        b"plamo2" => VocabType::Plamo2,
        b"no_vocab" | b"none" | b"hybriddna" | b"whitespace" => {
            return Err(err(format!(
                "tokenizer '{}' (tokenizer.ggml.model) is not supported yet; supported: 'llama' \
                 (SentencePiece), 'gpt2' (byte-level BPE), 'gemma4' (Gemma 4's BPE), 'bert' \
                 (WordPiece), 't5' (unigram), 'rwkv' (RWKV's greedy tokenizer), 'plamo2' (PLaMo-2's) \
                 and 'test' (llama.cpp's dummy tokenizer)",
                String::from_utf8_lossy(model_name)
            )))
        }
        other => return Err(err(format!("unknown tokenizer: '{}'", String::from_utf8_lossy(other)))),
    };
    let spm = kind == VocabType::Spm;

    // Defaults by vocabulary type, before the metadata overrides them.
    let (bos, eos) = match kind {
        VocabType::Spm => (1, 2),
        VocabType::Bpe if gemma4 => (TOKEN_NULL, TOKEN_NULL),
        VocabType::Bpe => (11, 11),
        VocabType::Test | VocabType::Rwkv => (TOKEN_NULL, TOKEN_NULL),
        VocabType::Wpm => (101, TOKEN_NULL),
        VocabType::Plamo2 => (1, 2),
        VocabType::Ugm => (TOKEN_NULL, 1),
    };
    let ugm = kind == VocabType::Ugm;
    let wpm = kind == VocabType::Wpm;
    let plamo2 = kind == VocabType::Plamo2;
    let mut ids = SpecialIds {
        bos,
        eos,
        eot: TOKEN_NULL,
        eom: TOKEN_NULL,
        unk: if spm || plamo2 {
            0
        } else if wpm {
            100
        } else if ugm {
            2
        } else {
            TOKEN_NULL
        },
        sep: if wpm { 102 } else { TOKEN_NULL },
        pad: if wpm || ugm {
            0
        } else if plamo2 {
            3
        } else {
            TOKEN_NULL
        },
        mask: if wpm { 103 } else { TOKEN_NULL },
        nl: TOKEN_NULL,
        fim_pre: TOKEN_NULL,
        fim_suf: TOKEN_NULL,
        fim_mid: TOKEN_NULL,
        fim_pad: TOKEN_NULL,
        fim_rep: TOKEN_NULL,
        fim_sep: TOKEN_NULL,
    };
    let (pre, mut add_bos, mut add_sep, mut add_space_prefix, clean_spaces, ignore_merges) = match kind {
        VocabType::Spm => (None, true, false, true, false, false),
        // Only BPE vocabularies have pre-tokenizers; the test tokenizer keeps llama.cpp's defaults.
        VocabType::Test => (None, false, false, false, false, false),
        VocabType::Wpm => (None, true, true, false, true, false),
        VocabType::Ugm | VocabType::Rwkv | VocabType::Plamo2 => (None, false, false, false, false, false),
        VocabType::Bpe => {
            let c = pre_config(pre_name)?;
            if c.no_bos {
                ids.bos = TOKEN_NULL;
            }
            (
                Some(c.pre),
                c.add_bos,
                c.add_sep,
                false,
                c.clean_spaces,
                c.ignore_merges,
            )
        }
    };
    // Unigram vocabularies end a prompt with EOS unless they say otherwise.
    let mut add_eos = ugm;
    if let Some(v) = get_bool(meta, "tokenizer.ggml.add_space_prefix")? {
        add_space_prefix = v;
    }
    let remove_extra_whitespaces = get_bool(meta, "tokenizer.ggml.remove_extra_whitespaces")?.unwrap_or(false);

    let Some(tokens) = get_array(meta, TOKENS)? else {
        return Err(err("cannot find tokenizer vocab in model file (tokenizer.ggml.tokens)"));
    };
    let Array::Str(tokens) = tokens else {
        return Err(err(format!(
            "invalid gguf type for {TOKENS}: array of {}",
            tokens.type_name()
        )));
    };
    let n = tokens.len();
    if i32::try_from(n).is_err() {
        return Err(err(format!("{TOKENS} has {n} entries, more than a token id can index")));
    }
    let scores = read_scores(meta, n)?;
    let attrs = read_attrs(meta, n)?;

    let mut texts = Strings::with_capacity(n, tokens.iter().map(Vec::len).sum());
    for (i, t) in tokens.iter().enumerate() {
        let t = c_string(t);
        if t.is_empty() {
            crate::log_warn!("empty token at index {i}");
            texts.push(format!("[EMPTY_{i}]").as_bytes())
        } else {
            texts.push(t)
        }
        .ok_or_else(|| err("token texts exceed 4 GiB"))?;
    }
    let text_index = TextIndex::build(n, |i| Some(texts.get(i))).map_err(|(a, b)| {
        err(format!(
            "tokens {a} and {b} have the same text '{}'",
            String::from_utf8_lossy(texts.get(a as usize))
        ))
    })?;
    let token_of = |s: &[u8]| text_index.get(s, |i| Some(texts.get(i)));

    let model = match kind {
        VocabType::Spm => {
            let mut byte_tokens = Box::new([None; 256]);
            for (b, slot) in byte_tokens.iter_mut().enumerate() {
                *slot = token_of(format!("<0x{b:02X}>").as_bytes()).or_else(|| token_of(&[b as u8]));
            }
            Model::Spm { byte_tokens }
        }
        VocabType::Test => Model::Test,
        VocabType::Rwkv => Model::Rwkv(Box::new(rwkv::Rwkv::new(n, |i| texts.get(i)))),
        VocabType::Plamo2 => {
            let table = plamo2::Plamo2::new(n, |i| plamo2::TokenInfo {
                text: texts.get(i),
                score: scores[i],
                is_byte: attrs[i] & attr::BYTE != 0,
            });
            Model::Plamo2(Box::new(table.map_err(err)?))
        }
        VocabType::Wpm => {
            // BertNormalizer: lowercase by default, accents stripped as lowercase says by default.
            let lowercase = get_bool(meta, "tokenizer.ggml.normalizer.lowercase")?.unwrap_or(true);
            let strip_accents = get_bool(meta, "tokenizer.ggml.normalizer.strip_accents")?.unwrap_or(lowercase);
            Model::Wpm {
                norm: wpm::Normalizer {
                    lowercase,
                    strip_accents,
                },
                max_len: (0..n).map(|i| texts.get(i).len()).max().unwrap_or(0),
            }
        }
        VocabType::Ugm => {
            let key = "tokenizer.ggml.precompiled_charsmap";
            let charsmap = match get_array(meta, key)? {
                None => None,
                Some(Array::U8(b)) => Some(b.clone()),
                Some(Array::I8(b)) => Some(b.iter().map(|&x| x as u8).collect()),
                Some(other) => {
                    return Err(err(format!(
                        "invalid gguf type for {key}: array of {}",
                        other.type_name()
                    )))
                }
            };
            let charsmap = charsmap.map(|b| ugm::Charsmap::parse(&b)).transpose().map_err(err)?;
            // The lowest normal token's score, less llama.cpp's penalty of 10.
            let min_score = (0..n)
                .filter(|&i| attrs[i] & attr::NORMAL != 0)
                .map(|i| scores[i])
                .fold(f32::MAX, f32::min);
            Model::Ugm(Box::new(ugm::Ugm {
                charsmap,
                spaces: ugm::Spaces {
                    prefix: add_space_prefix,
                    merge: remove_extra_whitespaces,
                },
                unknown_score: f64::from(min_score - 10.0),
                max_len: (0..n).map(|i| texts.get(i).len()).max().unwrap_or(0),
            }))
        }
        VocabType::Bpe => {
            let merges = match get_array(meta, "tokenizer.ggml.merges")? {
                Some(Array::Str(m)) => m.as_slice(),
                Some(other) => {
                    return Err(err(format!(
                        "invalid gguf type for tokenizer.ggml.merges: array of {}",
                        other.type_name()
                    )))
                }
                None => {
                    return Err(err(
                        "cannot find tokenizer merges in model file (tokenizer.ggml.merges)",
                    ))
                }
            };
            let pre = pre.unwrap_or(PreTokenizer::Default);
            let byte_level = pre != PreTokenizer::Gemma4;
            let bpe = Bpe::new(&texts, |s| token_of(s), merges, ignore_merges, byte_level).map_err(err)?;
            Model::Bpe {
                pre,
                bpe: Box::new(bpe),
            }
        }
    };

    let saved = SavedFacts {
        model: model_name.to_vec(),
        pre: get_str(meta, "tokenizer.ggml.pre")?.unwrap_or_default().to_vec(),
        n_token_types: get_u32(meta, "tokenizer.ggml.token_type_count")?.unwrap_or(0),
        remove_extra_whitespaces,
        has_charsmap: kind == VocabType::Ugm
            && get_array(meta, "tokenizer.ggml.precompiled_charsmap")?.is_some_and(|a| !a.is_empty()),
        merges: match (&kind, get_array(meta, "tokenizer.ggml.merges")?) {
            (VocabType::Bpe, Some(Array::Str(m))) => ranked_merges(m),
            _ => Vec::new(),
        },
    };
    let mut vocab = Vocab {
        saved,
        model,
        texts,
        text_index,
        scores,
        attrs,
        pieces: Strings::default(),
        ids,
        add_bos,
        add_eos,
        add_sep,
        add_space_prefix,
        clean_spaces,
        eog: Vec::new(),
        suppress: Vec::new(),
        specials: Specials::new(Vec::new(), |_| &[]),
    };

    // The newline token, found before special tokens are known (so none is split out).
    vocab.ids.nl = match &vocab.model {
        Model::Spm { byte_tokens } => byte_tokens[usize::from(b'\n')].map_or_else(
            || {
                crate::log_warn!("SPM vocabulary without a newline token; using the padding token");
                vocab.ids.pad
            },
            |id| id as i32,
        ),
        Model::Wpm { .. } => vocab.ids.pad,
        Model::Bpe { .. } | Model::Ugm(_) | Model::Rwkv(_) | Model::Plamo2(_) | Model::Test => {
            match vocab.tokenize(b"\n", false, false)?.first() {
                Some(&id) => id,
                None => {
                    crate::log_warn!("the vocabulary has no newline token; using the padding token");
                    vocab.ids.pad
                }
            }
        }
    };

    read_special_ids(meta, n, &mut vocab.ids)?;
    for (key, flag) in [
        ("tokenizer.ggml.add_bos_token", &mut add_bos),
        ("tokenizer.ggml.add_eos_token", &mut add_eos),
        ("tokenizer.ggml.add_sep_token", &mut add_sep),
    ] {
        if let Some(v) = get_bool(meta, key)? {
            *flag = v;
        }
    }
    let escaped = vocab.escapes_spaces();
    if escaped && !add_bos {
        // llama.cpp overrides Gemma 4 files that say otherwise.
        crate::log_warn!("overriding tokenizer.ggml.add_bos_token to true for Gemma 4");
        add_bos = true;
    }
    (vocab.add_bos, vocab.add_eos, vocab.add_sep) = (add_bos, add_eos, add_sep);
    vocab.suppress = read_suppress(meta, n)?;

    let (index, texts, attrs) = (&vocab.text_index, &vocab.texts, &mut vocab.attrs);
    let token_of = |s: &str| index.get(s.as_bytes(), |i| Some(texts.get(i))).map(|id| id as usize);
    detect_by_text(texts, &token_of, &mut vocab.ids, attrs);
    mark_unused(texts, attrs);
    vocab.eog = end_of_generation(texts, &token_of, &vocab.ids, attrs);

    let special_ids: Vec<u32> = (0..n as u32)
        .filter(|&i| attrs[i as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0)
        .collect();
    vocab.pieces = render_pieces(texts, attrs, kind, escaped)?;
    model_specific_attrs(meta, &token_of, &special_ids, attrs)?;
    vocab.specials = Specials::new(special_ids, |id| texts.get(id as usize));
    Ok(vocab)
}

/// The merges as llama.cpp lists them back from its ranks: each line split at its first space
/// after the first byte and joined again ("" for none), a repeated pair leaving its later rank
/// empty (and not listed at all past the last rank).
pub(super) fn ranked_merges(lines: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<Vec<u8>> = lines
        .iter()
        .map(|line| {
            let line = c_string(line);
            let pair = match line.iter().skip(1).position(|&b| b == b' ') {
                Some(_) => line.to_vec(),
                None => b" ".to_vec(),
            };
            if seen.insert(pair.clone()) {
                pair
            } else {
                Vec::new()
            }
        })
        .collect();
    while out.last().is_some_and(Vec::is_empty) {
        out.pop();
    }
    out
}

fn read_scores(meta: Meta, n: usize) -> Result<Vec<f32>> {
    let key = "tokenizer.ggml.scores";
    let scores: Vec<f32> = match get_array(meta, key)? {
        None => vec![0.0; n],
        Some(Array::F32(s)) => s.iter().take(n).copied().collect(),
        Some(Array::I32(s)) => s.iter().take(n).map(|&v| v as f32).collect(),
        Some(other) => {
            return Err(err(format!(
                "invalid gguf type for {key}: array of {}",
                other.type_name()
            )))
        }
    };
    if scores.len() < n {
        return Err(err(format!("{key} has {} entries for {n} tokens", scores.len())));
    }
    Ok(scores)
}

fn read_attrs(meta: Meta, n: usize) -> Result<Vec<u32>> {
    let key = "tokenizer.ggml.token_type";
    match get_array(meta, key)? {
        None => Ok(vec![attr::NORMAL; n]),
        Some(Array::I32(t)) if t.len() >= n => Ok(t.iter().take(n).map(|&t| attr_of_type(t)).collect()),
        Some(Array::I32(t)) => Err(err(format!("{key} has {} entries for {n} tokens", t.len()))),
        Some(other) => Err(err(format!(
            "invalid gguf type for {key}: array of {}",
            other.type_name()
        ))),
    }
}

/// Special token ids from the metadata. A default outside the vocabulary is dropped with a warning,
/// as llama.cpp does; an id the file states outside it makes the file invalid (llama.cpp only warns,
/// but such a file is corrupt and the load must say so).
fn read_special_ids(meta: Meta, n: usize, ids: &mut SpecialIds) -> Result<()> {
    type Slot = fn(&mut SpecialIds) -> &mut i32;
    let slots: [(&str, Slot); 17] = [
        ("tokenizer.ggml.bos_token_id", |s| &mut s.bos),
        ("tokenizer.ggml.eos_token_id", |s| &mut s.eos),
        ("tokenizer.ggml.eot_token_id", |s| &mut s.eot),
        ("tokenizer.ggml.eom_token_id", |s| &mut s.eom),
        ("tokenizer.ggml.unknown_token_id", |s| &mut s.unk),
        ("tokenizer.ggml.seperator_token_id", |s| &mut s.sep),
        ("tokenizer.ggml.padding_token_id", |s| &mut s.pad),
        ("tokenizer.ggml.mask_token_id", |s| &mut s.mask),
        ("tokenizer.ggml.fim_pre_token_id", |s| &mut s.fim_pre),
        ("tokenizer.ggml.fim_suf_token_id", |s| &mut s.fim_suf),
        ("tokenizer.ggml.fim_mid_token_id", |s| &mut s.fim_mid),
        ("tokenizer.ggml.fim_pad_token_id", |s| &mut s.fim_pad),
        ("tokenizer.ggml.fim_rep_token_id", |s| &mut s.fim_rep),
        ("tokenizer.ggml.fim_sep_token_id", |s| &mut s.fim_sep),
        // Deprecated names of the first three FIM tokens.
        ("tokenizer.ggml.prefix_token_id", |s| &mut s.fim_pre),
        ("tokenizer.ggml.suffix_token_id", |s| &mut s.fim_suf),
        ("tokenizer.ggml.middle_token_id", |s| &mut s.fim_mid),
    ];
    for (key, slot) in slots {
        let id = slot(ids);
        if *id >= 0 && *id as usize >= n {
            crate::log_warn!("default special token '{key}' = {id} is out of the vocabulary, disabling it");
            *id = TOKEN_NULL;
        }
        if let Some(new) = get_u32(meta, key)? {
            if new as usize >= n {
                return Err(err(format!(
                    "special token '{key}' = {new} is outside the vocabulary of {n} tokens"
                )));
            }
            *id = new as i32;
        }
    }
    Ok(())
}

fn read_suppress(meta: Meta, n: usize) -> Result<Vec<i32>> {
    let key = "tokenizer.ggml.suppress_tokens";
    match get_array(meta, key)? {
        None => Ok(Vec::new()),
        Some(Array::I32(ids)) => Ok(ids.iter().copied().filter(|&id| id >= 0 && (id as usize) < n).collect()),
        Some(other) => Err(err(format!(
            "invalid gguf type for {key}: array of {}",
            other.type_name()
        ))),
    }
}

fn set_control(texts: &Strings, attrs: &mut [u32], id: usize) {
    if attrs[id] & attr::CONTROL == 0 {
        crate::log_warn!(
            "control-looking token {id} '{}' was not control-type; this is probably a bug in the model, \
             its type will be overridden",
            String::from_utf8_lossy(texts.get(id))
        );
        attrs[id] |= attr::CONTROL;
    }
}

/// EOT, EOM and FIM tokens the metadata does not name, recognised by their text (made control
/// tokens). Where several texts match, llama.cpp keeps the first its hash map yields.
fn detect_by_text(texts: &Strings, token_of: &dyn Fn(&str) -> Option<usize>, ids: &mut SpecialIds, attrs: &mut [u32]) {
    type Slot = fn(&mut SpecialIds) -> &mut i32;
    let slots: [(&[&str], Slot); 8] = [
        (EOT_TEXTS, |s| &mut s.eot),
        (EOM_TEXTS, |s| &mut s.eom),
        (FIM_PRE_TEXTS, |s| &mut s.fim_pre),
        (FIM_SUF_TEXTS, |s| &mut s.fim_suf),
        (FIM_MID_TEXTS, |s| &mut s.fim_mid),
        (FIM_PAD_TEXTS, |s| &mut s.fim_pad),
        (FIM_REP_TEXTS, |s| &mut s.fim_rep),
        (FIM_SEP_TEXTS, |s| &mut s.fim_sep),
    ];
    let mut map_order: Option<Vec<u32>> = None;
    for (candidates, slot) in slots {
        let id = slot(ids);
        if *id != TOKEN_NULL {
            continue;
        }
        let found: Vec<usize> = candidates.iter().filter_map(|t| token_of(t)).collect();
        let chosen = match found.as_slice() {
            [] => continue,
            [one] => *one,
            several => {
                let rank = map_order.get_or_insert_with(|| hash_map_rank(texts));
                *several
                    .iter()
                    .min_by_key(|&&i| rank.get(i).copied().unwrap_or(u32::MAX))
                    .unwrap_or(&several[0])
            }
        };
        *id = chosen as i32;
        set_control(texts, attrs, chosen);
    }
}

/// Position of each token in the iteration order of llama.cpp's text -> id map (empty if unknown).
fn hash_map_rank(texts: &Strings) -> Vec<u32> {
    let hashes: Vec<u64> = (0..texts.len()).map(|i| stl_order::std_hash(texts.get(i))).collect();
    let Some(order) = stl_order::iteration_order(&hashes) else {
        crate::log_warn!("too many tokens to reproduce llama.cpp's map order; taking the lowest id");
        return Vec::new();
    };
    let mut rank = vec![0; order.len()];
    for (pos, &id) in order.iter().enumerate() {
        rank[id as usize] = pos as u32;
    }
    rank
}

/// Control tokens whose text says "unused" are marked unused.
fn mark_unused(texts: &Strings, attrs: &mut [u32]) {
    for (i, a) in attrs.iter_mut().enumerate() {
        if *a & attr::CONTROL != 0 && texts.get(i).windows(6).any(|w| w == b"unused") {
            *a |= attr::UNUSED;
        }
    }
}

/// The end-of-generation tokens, sorted, with llama.cpp's adjustments of attributes on the way.
fn end_of_generation(
    texts: &Strings,
    token_of: &dyn Fn(&str) -> Option<usize>,
    ids: &SpecialIds,
    attrs: &mut [u32],
) -> Vec<i32> {
    let mut eog = std::collections::BTreeSet::new();
    eog.extend(
        [ids.fim_pad, ids.fim_rep, ids.fim_sep]
            .into_iter()
            .filter(|&id| id != TOKEN_NULL),
    );
    for id in EOG_TEXTS.iter().filter_map(|t| token_of(t)) {
        eog.insert(id as i32);
        set_control(texts, attrs, id);
    }
    for id in ALWAYS_RENDERED.iter().filter_map(|t| token_of(t)) {
        crate::log_warn!(
            "setting token {id} '{}' to user-defined",
            String::from_utf8_lossy(texts.get(id))
        );
        attrs[id] = attr::USER_DEFINED;
    }
    for (id, what) in [(ids.eos, "EOS"), (ids.eot, "EOT"), (ids.eom, "EOM")] {
        if id != TOKEN_NULL && eog.insert(id) {
            crate::log_warn!(
                "the {what} token is not an end-of-generation token; the tokenizer config may be incorrect"
            );
        }
    }

    let text_of = |id: i32| {
        usize::try_from(id)
            .ok()
            .filter(|&i| i < texts.len())
            .map(|i| texts.get(i))
    };
    let with_text = |eog: &std::collections::BTreeSet<i32>, t: &str| {
        eog.iter().copied().find(|&id| text_of(id) == Some(t.as_bytes()))
    };
    // o200k_harmony and solar-open: "<|end|>" ends a message, not the generation.
    if let Some(end) = with_text(&eog, "<|end|>") {
        let has = |t: &str| with_text(&eog, t).is_some();
        let call = has("<|call|>") || has("<|calls|>");
        if call && (has("<|return|>") || has("<|flush|>")) {
            crate::log_warn!("'<|end|>' is not an end-of-generation token in this vocabulary");
            eog.remove(&end);
            attrs[end as usize] = attr::USER_DEFINED;
        }
    }
    // Gemma 4 and PLaMo have a normal "</s>" token.
    if let Some(s) = with_text(&eog, "</s>") {
        if with_text(&eog, "<|tool_response>").is_some() || with_text(&eog, "<|plamo:eos|>").is_some() {
            crate::log_warn!("'</s>' is a normal token here, not an end-of-generation token");
            eog.remove(&s);
            attrs[s as usize] = attr::NORMAL;
        }
    }
    eog.into_iter().collect()
}

/// `llama_token_to_piece(special = true)` of every token (`escaped`: a BPE vocabulary whose
/// texts hold U+2581 for spaces).
fn render_pieces(texts: &Strings, attrs: &[u32], kind: VocabType, escaped: bool) -> Result<Strings> {
    let n = texts.len();
    let mut pieces = Strings::with_capacity(n, texts.total_len());
    for (i, &a) in attrs.iter().enumerate() {
        let t = texts.get(i);
        let full = || err("token pieces exceed 4 GiB");
        if kind == VocabType::Test {
            // The test tokenizer renders every token as its id in hex.
            pieces.push(format!("{i:x}").as_bytes()).ok_or_else(full)?;
        } else if kind == VocabType::Rwkv {
            // Whatever its type, an RWKV token is the bytes its text escapes.
            pieces.push(&rwkv::unescape(t)).ok_or_else(full)?;
        } else if kind == VocabType::Plamo2 {
            // A PLaMo-2 token is its text, a well-formed byte token its byte.
            match plamo2::byte_of(t).filter(|_| a & attr::BYTE != 0) {
                Some(b) => pieces.push(&[b]),
                None => pieces.push(t),
            }
            .ok_or_else(full)?;
        } else if a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED) != 0 {
            pieces.push(t).ok_or_else(full)?;
        } else if a & attr::NORMAL != 0 {
            pieces
                .push_with(|out| {
                    if escaped || matches!(kind, VocabType::Spm | VocabType::Wpm | VocabType::Ugm) {
                        unescape_spaces(t, out)
                    } else {
                        decode_bpe_piece(t, out)
                    }
                })
                .ok_or_else(full)?;
        } else if a & attr::BYTE != 0 {
            pieces.push(&[token_byte(i, t)?]).ok_or_else(full)?;
        } else {
            pieces.push(&[]).ok_or_else(full)?;
        }
    }
    Ok(pieces)
}

/// U+2581 back to a space.
fn unescape_spaces(t: &[u8], out: &mut Vec<u8>) {
    const ESCAPE: &[u8] = "\u{2581}".as_bytes();
    let mut rest = t;
    while let Some(p) = rest.windows(ESCAPE.len()).position(|w| w == ESCAPE) {
        out.extend_from_slice(&rest[..p]);
        out.push(b' ');
        rest = &rest[p + ESCAPE.len()..];
    }
    out.extend_from_slice(rest);
}

/// A byte-level token text back to bytes; a character outside the alphabet becomes
/// `[UNK_BYTE_0x<its UTF-8 in hex><the token text>]`, as llama.cpp writes it.
fn decode_bpe_piece(t: &[u8], out: &mut Vec<u8>) {
    unicode::decode(t, |cpt, _| match unicode::char_to_byte(cpt) {
        Some(b) => out.push(b),
        None => {
            let mut utf8 = Vec::with_capacity(4);
            unicode::encode(cpt, &mut utf8);
            out.extend_from_slice(b"[UNK_BYTE_0x");
            for b in utf8 {
                out.extend_from_slice(format!("{b:02x}").as_bytes());
            }
            out.extend_from_slice(t);
            out.push(b']');
        }
    });
}

/// The byte of a byte token: llama.cpp parses the two characters after `<0x` with `strtol(.., 16)`.
fn token_byte(id: usize, t: &[u8]) -> Result<u8> {
    let Some(rest) = t.get(3..) else {
        return Err(err(format!(
            "byte token {id} has the text '{}', too short for <0xNN>",
            String::from_utf8_lossy(t)
        )));
    };
    let mut s = &rest[..rest.len().min(2)];
    while let [b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r', r @ ..] = s {
        s = r;
    }
    let (negative, s) = match s {
        [b'-', r @ ..] => (true, r),
        [b'+', r @ ..] => (false, r),
        _ => (false, s),
    };
    let value = s
        .iter()
        .map_while(|&c| char::from(c).to_digit(16))
        .fold(0u32, |v, d| v * 16 + d);
    // strtol's long, stored into a char.
    Ok(if negative {
        value.wrapping_neg() as u8
    } else {
        value as u8
    })
}

/// Attributes llama.cpp sets for particular models, by name, pre-tokenizer or architecture.
fn model_specific_attrs(
    meta: Meta,
    token_of: &dyn Fn(&str) -> Option<usize>,
    special_ids: &[u32],
    attrs: &mut [u32],
) -> Result<()> {
    let name = get_str(meta, "general.name")?.unwrap_or_default().to_ascii_lowercase();
    let pre = get_str(meta, "tokenizer.ggml.pre")?.unwrap_or_default();
    let arch = get_str(meta, "general.architecture")?.unwrap_or_default();
    let contains = |s: &[u8], parts: &[&str]| parts.iter().any(|p| s.windows(p.len()).any(|w| w == p.as_bytes()));
    let required =
        |t: &str| token_of(t).ok_or_else(|| err(format!("the model needs a token '{t}' that its vocabulary lacks")));
    if contains(pre, &["jina-v2-de", "jina-v2-es", "jina-v2-code"])
        || contains(arch, &["nomic-bert-moe", "jina-bert-v3"])
    {
        match token_of("<mask>") {
            Some(id) => attrs[id] |= attr::LSTRIP,
            None => crate::log_warn!("the mask token is missing from the vocabulary; please reconvert the model"),
        }
    } else if contains(&name, &["phi-3", "phi3"]) {
        for &id in special_ids {
            attrs[id as usize] |= attr::RSTRIP;
        }
        attrs[required("</s>")?] |= attr::RSTRIP;
        for t in ["<unk>", "<s>", "<|endoftext|>"] {
            attrs[required(t)?] &= !attr::RSTRIP;
        }
    } else if contains(&name, &["modern-bert"]) {
        match token_of("[MASK]") {
            Some(id) => attrs[id] |= attr::LSTRIP,
            None => crate::log_warn!("the mask token is missing from the vocabulary"),
        }
    }
    Ok(())
}
