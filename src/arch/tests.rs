//! The registry's tests: its list in the docs and architectures' own facts.

use super::*;
use crate::gguf::tests::writer::{File, Kv};
use crate::gguf::GgufFile;

/// HParams of a four-layer file of `arch` (16 wide, two heads) with `extra` keys added.
fn tiny(arch: &dyn ArchSpec, extra: Vec<Kv>) -> Result<HParams> {
    let name = arch.name();
    let mut f = File::new();
    let a = |k: &str| format!("{name}.{k}");
    f.kvs = vec![
        Kv::new("general.architecture", Value::Str(name.as_bytes().to_vec())),
        Kv::new(&a("block_count"), Value::U32(4)),
        Kv::new(&a("context_length"), Value::U32(64)),
        Kv::new(&a("embedding_length"), Value::U32(16)),
        Kv::new(&a("feed_forward_length"), Value::U32(32)),
        Kv::new(&a("attention.head_count"), Value::U32(2)),
        Kv::new(&a("attention.layer_norm_rms_epsilon"), Value::F32(1e-5)),
    ];
    f.kvs.extend(extra);
    let file = GgufFile::parse(&f.bytes())?;
    HParams::load(arch, &Meta(&file), 4)
}

/// HParams of a four-layer granite_swa file with `extra` keys added.
fn granite_swa(mut extra: Vec<Kv>) -> Result<HParams> {
    extra.insert(0, Kv::new("granite_swa.logit_scale", Value::F32(1.0)));
    extra.insert(1, Kv::new("granite_swa.attention.sliding_window", Value::U32(8)));
    tiny(&granite_swa::GraniteSwa, extra)
}

/// docs/architectures.md as the registry gives it: the intro, then each name with its note,
/// sorted by name (the registry's order follows when each was added, not what a reader seeks).
fn architecture_list() -> String {
    let mut archs: Vec<(&str, &str)> = ARCHITECTURES.iter().map(|a| (a.name(), a.about())).collect();
    archs.sort();
    let mut doc = format!(
        "# Architectures\n\n\
         The {} architectures the engine runs, by their `general.architecture` name, sorted by name, each \
         with a note on what it is or how it differs from its kin. A file of any other architecture is \
         refused at load with the list of these. `scripts/gen-models.py` writes a tiny random-weight \
         model of each that no test model covers, compared bit for bit with llama.cpp in \
         `benches/compare.sh`.\n\n\
         This page is generated from the registry (`ARCHITECTURES` in `src/arch/mod.rs`, each \
         architecture's `ArchSpec::about`): edit the notes there and run \
         `ENGINE_WRITE_DOCS=1 cargo test --release architecture_list`. Adding an architecture: \
         [adding-an-architecture.md](adding-an-architecture.md).\n\n",
        archs.len()
    );
    for (name, about) in archs {
        doc += &format!("- `{name}` — {about}\n");
    }
    doc
}

#[test]
fn architecture_list_in_the_docs_is_the_registry_s() {
    let mut names = std::collections::HashSet::new();
    let mut notes = std::collections::HashSet::new();
    for a in ARCHITECTURES {
        let (name, about) = (a.name(), a.about());
        assert!(names.insert(name), "'{name}' is registered twice");
        // A family's member that copies another's fields must still say what it is.
        assert!(notes.insert(about), "{name}: another architecture has the same note");
        assert!(!about.is_empty() && !about.contains('\n'), "{name}: one line of note");
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/architectures.md");
    let doc = architecture_list();
    if std::env::var_os("ENGINE_WRITE_DOCS").is_some() {
        std::fs::write(path, &doc).unwrap();
    }
    let written = std::fs::read_to_string(path).unwrap_or_default();
    if let Some((line, (was, is))) = written.lines().zip(doc.lines()).enumerate().find(|(_, (w, d))| w != d) {
        panic!(
            "docs/architectures.md is stale at line {}:\n  it says: {was}\n  registry: {is}\n\
             regenerate it: ENGINE_WRITE_DOCS=1 cargo test --release architecture_list",
            line + 1
        );
    }
    assert!(
        written == doc,
        "docs/architectures.md has {} lines, the registry's list {}; regenerate it: \
         ENGINE_WRITE_DOCS=1 cargo test --release architecture_list",
        written.lines().count(),
        doc.lines().count()
    );
}

#[test]
fn weights_without_adapters_and_control_vectors_are_each_architecture_s_own() {
    let mut hp = tiny(&llama::Llama, vec![]).unwrap();
    let plain = |a: &dyn Decoder, hp: &HParams, stem: &str, layer: Option<usize>| a.without_adapters(hp, stem, layer);
    assert!(plain(&deepseek2::DEEPSEEK2, &hp, "attn_kv_b", Some(12)));
    assert!(plain(&deepseek2::DEEPSEEK2, &hp, "output", None));
    assert!(!plain(&deepseek2::DEEPSEEK2, &hp, "ffn_up", Some(0)));
    // The sparse variants multiply their indexer plainly, and adapt the decompressing `attn_kv_b`.
    assert!(plain(&deepseek2::DEEPSEEK32, &hp, "indexer.attn_k", Some(0)));
    assert!(!plain(&deepseek2::DEEPSEEK32, &hp, "attn_kv_b", Some(0)));
    assert!(!plain(&llama::Llama, &hp, "attn_q", Some(0)));
    assert!(plain(&glm5_next::Glm5Next, &hp, "indexer.attn_k", Some(3)));
    assert!(!plain(&glm5_next::Glm5Next, &hp, "indexer.attn_k_norm", Some(3)));
    // Kimi-Linear's output projection is plain in its linear-attention layers only.
    hp.recurrent_layers = vec![false, false, true, false];
    assert!(plain(&kimi_linear::KimiLinear, &hp, "attn_output", Some(2)));
    assert!(!plain(&kimi_linear::KimiLinear, &hp, "attn_output", Some(3)));

    assert!(llama::Llama.takes_control_vector());
    assert!(!bert::Bert.takes_control_vector());
    assert!(!qwen4exp::Qwen4Exp.takes_control_vector());
}

#[test]
fn per_layer_flags_pad_as_llama_cpp_does() {
    let pattern = Kv::new(
        "granite_swa.attention.sliding_window_pattern",
        Value::Array(Array::Bool(vec![true, false])),
    );
    let rope = Kv::new(
        "granite_swa.attention.rope_pattern",
        Value::Array(Array::U32(vec![0, 1])),
    );
    let hp = granite_swa(vec![pattern, rope]).unwrap();
    // Sliding flags past the array attend globally; rope flags past it rotate.
    assert_eq!(hp.swa_layers, [true, false, false, false]);
    assert_eq!(
        (0..4).map(|il| hp.has_rope(il)).collect::<Vec<_>>(),
        [false, true, true, true]
    );
}

#[test]
fn sliding_layers_with_their_own_head_size_are_refused() {
    let pattern = || {
        Kv::new(
            "granite_swa.attention.sliding_window_pattern",
            Value::Array(Array::I32(vec![1, 0, 1, 0])),
        )
    };
    let own = |v| Kv::new("granite_swa.attention.key_length_swa", Value::U32(v));
    let err = granite_swa(vec![pattern(), own(4)]).unwrap_err().to_string();
    assert!(err.contains("key_length_swa"), "{err}");
    // The same size as the other layers' is what llama.cpp's dummy files write.
    assert!(granite_swa(vec![pattern(), own(8)]).is_ok());
}

#[test]
fn deepstack_inputs_past_the_first_layer_are_refused() {
    let pattern = || {
        Kv::new(
            "granite_swa.attention.sliding_window_pattern",
            Value::Array(Array::Bool(vec![true; 4])),
        )
    };
    let map = |m: Vec<i32>| Kv::new("granite_swa.deepstack_mapping", Value::Array(Array::I32(m)));
    let err = granite_swa(vec![pattern(), map(vec![-1, -1, 0, -1])])
        .unwrap_err()
        .to_string();
    assert!(err.contains("deepstack"), "{err}");
    // The first layer's input is the embeddings themselves: llama.cpp injects nothing there.
    assert!(granite_swa(vec![pattern(), map(vec![0, -1, -1, -1])]).is_ok());
    assert!(granite_swa(vec![pattern()]).is_ok());
}

#[test]
fn deepstack_layers_widen_the_input_rows_of_qwen3_vl() {
    let load = |n_deepstack: Option<u32>| {
        let sections = Kv::new(
            "qwen3vl.rope.dimension_sections",
            Value::Array(Array::I32(vec![2, 1, 1, 0])),
        );
        let n = n_deepstack.map(|n| Kv::new("qwen3vl.n_deepstack_layers", Value::U32(n)));
        tiny(&qwen3::QWEN3VL, [sections].into_iter().chain(n).collect())
    };
    assert_eq!(load(None).unwrap().n_embd_inp(), 16);
    let hp = load(Some(3)).unwrap();
    assert_eq!((hp.n_deepstack, hp.n_embd, hp.n_embd_inp()), (3, 16, 64));
    // The last layer keeps only the output rows, which the features are not cut to.
    let err = load(Some(4)).unwrap_err().to_string();
    assert!(err.contains("n_deepstack_layers"), "{err}");
}

#[test]
fn dense_first_periods_keep_the_first_layer_of_each_global() {
    let mut file = File::new();
    file.kvs = vec![Kv::new("x.attention.sliding_window_pattern", Value::U32(2))];
    let g = GgufFile::parse(&file.bytes()).unwrap();
    let mut hp = granite_swa(vec![Kv::new(
        "granite_swa.attention.sliding_window_pattern",
        Value::Array(Array::Bool(vec![false; 4])),
    )])
    .unwrap();
    hp.arch_name = "x";
    load_sliding_window_dense_first(&Meta(&g), &mut hp, 8, 4, 1.0, 1.0).unwrap();
    assert_eq!(hp.swa_layers, [false, true, false, true]);
    load_sliding_window(&Meta(&g), &mut hp, 8, 4, 1.0, 1.0).unwrap();
    assert_eq!(hp.swa_layers, [true, false, true, false]);
}
