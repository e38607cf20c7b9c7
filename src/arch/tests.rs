//! The registry's tests: its list in the docs, architectures' own facts, and for every registered
//! architecture its creation order against its tensors and its test model loading.

use super::*;
use crate::gguf::tests::writer::{File, Kv};
use crate::gguf::GgufFile;
use crate::model::{LoadParams, Model};
use crate::test_data::{model_path, GEMMA3, SMOLLM2};
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// HParams of a four-layer file of `arch` (16 wide, two heads) with `extra` keys added.
fn tiny(arch: &dyn ArchSpec, extra: Vec<Kv>) -> Result<HParams> {
    let name = arch.facts().name;
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
    let mut archs: Vec<(&str, &str)> = ARCHITECTURES
        .iter()
        .map(|a| (a.facts().name, a.facts().about))
        .collect();
    archs.sort();
    let mut doc = format!(
        "# Architectures\n\n\
         The {} architectures the engine runs, by their `general.architecture` name, sorted by name, each \
         with a note on what it is or how it differs from its kin. A file of any other architecture is \
         refused at load with the list of these. `scripts/gen-models.py` writes a tiny random-weight \
         model of each that no test model covers, compared bit for bit with llama.cpp in \
         `benches/compare.sh`.\n\n\
         This page is generated from the registry (`ARCHITECTURES` in `src/arch/mod.rs`, each \
         architecture's `Facts::about`): edit the notes there and run \
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
        let (name, about) = (a.facts().name, a.facts().about);
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

/// llama.cpp's `llm_arch_is_diffusion` names exactly these (`llama_model_is_diffusion`).
#[test]
fn the_diffusion_models_are_llama_cpp_s_four() {
    let diffusion: Vec<&str> = ARCHITECTURES
        .iter()
        .filter(|a| a.facts().is_diffusion)
        .map(|a| a.facts().name)
        .collect();
    assert_eq!(diffusion, ["dream", "llada", "llada-moe", "rnd1"]);
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

    // Granite Switch multiplies every weight plainly but the output head.
    assert!(plain(&granite_switch::GraniteSwitch, &hp, "attn_qkv", Some(0)));
    assert!(!plain(&granite_switch::GraniteSwitch, &hp, "output", None));

    assert!(llama::Llama.takes_control_vector());
    assert!(!bert::BERT.takes_control_vector());
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

/// Registered architectures scripts/gen-models.py writes no model of, each with the test model
/// that covers it (scripts/fetch-models.sh) and why it has no generated one.
const COVERED_BY_TEST_MODELS: &[(&str, &str, &str)] = &[(
    "gemma3",
    GEMMA3.0,
    "gemma-3-270m is a real model of it, compared with llama.cpp as a test model",
)];

/// A model file as the engine loads it: the architecture its `general.architecture` names, the
/// one the loaded model reports, and its hyper-parameters as that architecture reads them.
struct Loaded {
    path: PathBuf,
    named: String,
    reported: &'static str,
    hp: HParams,
}

/// Every generated model (scripts/gen-test-models.sh) and the test models of
/// [`COVERED_BY_TEST_MODELS`], each loaded once for the tests that need them, or why it did not
/// load (with its path).
fn loaded_models() -> &'static [std::result::Result<Loaded, String>] {
    static LOADED: OnceLock<Vec<std::result::Result<Loaded, String>>> = OnceLock::new();
    LOADED.get_or_init(|| {
        let covering = COVERED_BY_TEST_MODELS
            .iter()
            .map(|(_, file, _)| PathBuf::from(model_path(file)));
        generated_models().into_iter().chain(covering).map(load).collect()
    })
}

/// The files scripts/gen-test-models.sh writes, the same set benches/compare.sh compares with
/// llama.cpp (generated once per machine for both). They are links into its cache: the links are
/// resolved and the temporary directory holding them removed at once.
pub(crate) fn generated_models() -> Vec<PathBuf> {
    // The vocabulary's model: a missing one fails here saying how to fetch it.
    model_path(SMOLLM2.0);
    let dir = std::env::temp_dir().join(format!("engine-arch-tests-{}", std::process::id()));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/gen-test-models.sh");
    let run = Command::new(script)
        .arg(&dir)
        .output()
        .expect("runs scripts/gen-test-models.sh");
    assert!(
        run.status.success(),
        "scripts/gen-test-models.sh failed ({}); it needs python3 with gguf and numpy (scripts/setup.sh) and \
         .ggml/vocab (scripts/fetch-ggml.sh):\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let printed = fs::read_to_string(dir.join("printed.tsv")).expect("gen-test-models.sh writes printed.tsv");
    let files = printed
        .lines()
        .map(|line| {
            let link = line.split('\t').next().unwrap_or_default();
            fs::canonicalize(link).unwrap_or_else(|e| panic!("{link}: {e}"))
        })
        .collect();
    fs::remove_dir_all(&dir).expect("removes the generated models' links");
    files
}

/// `path` loaded as the context tests load a model, or why it does not load.
fn load(path: PathBuf) -> std::result::Result<Loaded, String> {
    let shown = path.display().to_string();
    let m =
        Model::load(std::slice::from_ref(&shown), LoadParams::default(), spec).map_err(|e| format!("{shown}: {e}"))?;
    let named = m.meta_value(b"general.architecture").unwrap_or_default();
    Ok(Loaded {
        named: String::from_utf8_lossy(named.strip_suffix(&[0]).unwrap_or(named)).into_owned(),
        reported: m
            .arch
            .expect("a model loaded with its weights has its architecture")
            .facts()
            .name,
        hp: m
            .hparams
            .expect("a model loaded with its weights has its hyper-parameters"),
        path,
    })
}

/// Each registered architecture with its loaded models; fails on a model that did not load and on
/// an architecture with none.
fn models_of_each_architecture() -> Vec<(&'static dyn Architecture, Vec<&'static Loaded>)> {
    let loaded = loaded_models();
    let failed: Vec<&str> = loaded
        .iter()
        .filter_map(|l| l.as_ref().err())
        .map(String::as_str)
        .collect();
    assert!(failed.is_empty(), "models that do not load:\n{}", failed.join("\n"));
    let loaded: Vec<&Loaded> = loaded.iter().flatten().collect();
    let mut without = Vec::new();
    let of_each = ARCHITECTURES
        .iter()
        .map(|&a| {
            let models: Vec<&Loaded> = loaded.iter().copied().filter(|l| l.named == a.facts().name).collect();
            if models.is_empty() {
                without.push(a.facts().name);
            }
            (a, models)
        })
        .collect();
    assert!(
        without.is_empty(),
        "registered architectures with no model to load: {without:?}; write one in scripts/gen-models.py \
         (a writer and its MODELS entry: docs/adding-an-architecture.md, step 3), or list the test model \
         covering it in COVERED_BY_TEST_MODELS with the reason"
    );
    of_each
}

/// `models` but for those with the hyper-parameters of one before (a model's files in other
/// weight types).
fn distinct(models: Vec<&Loaded>) -> Vec<&Loaded> {
    let mut kept: Vec<&Loaded> = Vec::new();
    for l in models {
        if kept.iter().all(|k| k.hp != l.hp) {
            kept.push(l);
        }
    }
    kept
}

#[test]
fn every_architecture_s_model_loads_as_that_architecture() {
    for (a, models) in models_of_each_architecture() {
        for l in models {
            assert_eq!(
                l.reported,
                a.facts().name,
                "{} loads as another architecture",
                l.path.display()
            );
        }
    }
    // An exception a generated model now covers is stale: the generated one is what compare.sh
    // checks against llama.cpp.
    for (name, file, _) in COVERED_BY_TEST_MODELS {
        let generated: Vec<_> = loaded_models()
            .iter()
            .flatten()
            .filter(|l| l.named == *name && !l.path.ends_with(file))
            .collect();
        assert!(
            generated.is_empty(),
            "{name} has generated models now ({}): drop it from COVERED_BY_TEST_MODELS",
            generated[0].path.display()
        );
    }
}

/// How `arch`'s creation order for `hp` (`created_tensors`) is not a permutation of the tensors it
/// declares (`tensors`), one line each. The rule, from what `llama_model_init_from_user` does with
/// the list (`model::user`):
/// - every created name is a declared tensor (its shape comes from there), and every declared
///   tensor is declared once;
/// - a name is created again only where llama.cpp makes a tensor again (`TENSOR_DUPLICATED`), and
///   the engine keeps one: the token embeddings as a tied output head (twice, and then no
///   `output.weight`) or a model-wide tensor such as the rotary factors, at most once per layer;
///   a layer's tensor (`blk.N.`) never;
/// - every required tensor is created, or the one that replaces it (`unless`: the fused
///   projection of an architecture whose loader makes that one).
///
/// Optional tensors may be left out: `tensors` declares what a file may hold, alternatives
/// llama.cpp's loader does not make without a file included (the fused attention projection
/// `create_tensor_qkv` skips); the optional ones a list does create are checked against
/// llama.cpp's calls by benches/compare.sh.
fn creation_errors(arch: &dyn ArchSpec, hp: &HParams) -> Vec<String> {
    let specs = arch.tensors(hp);
    let created = arch.created_tensors(hp);
    let mut errors = Vec::new();
    let mut declared: HashMap<&str, &TensorSpec> = HashMap::new();
    for s in &specs {
        if declared.insert(&s.name, s).is_some() {
            errors.push(format!("declares '{}' twice", s.name));
        }
    }
    let mut times: BTreeMap<&str, u32> = BTreeMap::new();
    for name in &created {
        *times.entry(name).or_default() += 1;
    }
    for (&name, &n) in &times {
        if !declared.contains_key(name) {
            errors.push(format!("creates '{name}', which it does not declare"));
        }
        let allowed = match name {
            _ if name.starts_with("blk.") => 1,
            "token_embd.weight" if !times.contains_key("output.weight") => 2,
            "token_embd.weight" => 1,
            _ => hp.n_layer,
        };
        if n > allowed {
            errors.push(format!("creates '{name}' {n} times (at most {allowed})"));
        }
    }
    for s in &specs {
        let made = |name: &str| times.contains_key(name);
        if s.required && !made(&s.name) && !s.unless.as_deref().is_some_and(made) {
            errors.push(format!("does not create '{}', which it requires", s.name));
        }
    }
    errors
}

#[test]
fn every_architecture_creates_the_tensors_it_declares() {
    let mut errors = Vec::new();
    for (a, models) in models_of_each_architecture() {
        for l in distinct(models) {
            errors.extend(
                creation_errors(a, &l.hp)
                    .into_iter()
                    .map(|e| format!("{} ({}): {e}", a.facts().name, l.path.display())),
            );
        }
    }
    assert!(
        errors.is_empty(),
        "creation orders that are not permutations of the tensors:\n{}",
        errors.join("\n")
    );
}
