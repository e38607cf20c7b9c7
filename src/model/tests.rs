//! Model-level validation over tiny synthetic GGUF files: what a well-formed file must also satisfy
//! to be a model we can load.

use super::spec::TensorSpec;
use super::{KvOverride, LoadMode, LoadParams, Model, OverrideValue};
use crate::error::Error;
use crate::gguf::tests::writer::{File, Kv, Tensor};
use crate::gguf::{Array, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

const E: i64 = 8; // n_embd
const FF: i64 = 16; // n_ff
const V: i64 = 4; // n_vocab
const HEAD: i64 = 4; // head size (2 heads, 1 kv head)

pub(crate) fn kvs(n_layer: u32) -> Vec<Kv> {
    let s = |x: &str| Value::Str(x.as_bytes().to_vec());
    vec![
        Kv::new("general.architecture", s("llama")),
        Kv::new("llama.block_count", Value::U32(n_layer)),
        Kv::new("llama.context_length", Value::U32(64)),
        Kv::new("llama.embedding_length", Value::U32(E as u32)),
        Kv::new("llama.feed_forward_length", Value::U32(FF as u32)),
        Kv::new("llama.attention.head_count", Value::U32(2)),
        Kv::new("llama.attention.head_count_kv", Value::U32(1)),
        Kv::new("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        Kv::new("tokenizer.ggml.model", s("llama")),
        Kv::new(
            "tokenizer.ggml.tokens",
            Value::Array(Array::Str(vec![
                b"<unk>".to_vec(),
                b"<s>".to_vec(),
                b"</s>".to_vec(),
                b"a".to_vec(),
            ])),
        ),
        Kv::new(
            "tokenizer.ggml.scores",
            Value::Array(Array::F32(vec![0.0, 0.0, 0.0, -1.0])),
        ),
        Kv::new("tokenizer.ggml.token_type", Value::Array(Array::I32(vec![2, 3, 3, 1]))),
        Kv::new("tokenizer.ggml.bos_token_id", Value::U32(1)),
        Kv::new("tokenizer.ggml.eos_token_id", Value::U32(2)),
    ]
}

/// (name, dims) of every tensor a one-layer model of the sizes above has.
fn tensor_shapes() -> Vec<(&'static str, Vec<i64>)> {
    vec![
        ("token_embd.weight", vec![E, V]),
        ("output_norm.weight", vec![E]),
        ("blk.0.attn_norm.weight", vec![E]),
        ("blk.0.attn_q.weight", vec![E, 2 * HEAD]),
        ("blk.0.attn_k.weight", vec![E, HEAD]),
        ("blk.0.attn_v.weight", vec![E, HEAD]),
        ("blk.0.attn_output.weight", vec![2 * HEAD, E]),
        ("blk.0.ffn_norm.weight", vec![E]),
        ("blk.0.ffn_gate.weight", vec![E, FF]),
        ("blk.0.ffn_up.weight", vec![E, FF]),
        ("blk.0.ffn_down.weight", vec![FF, E]),
    ]
}

/// A valid one-layer f32 model; `edit` may change it before it is written.
fn model_file(edit: impl FnOnce(&mut File)) -> Vec<u8> {
    let mut f = File::new();
    f.kvs = kvs(1);
    let mut offset = 0;
    for (name, dims) in tensor_shapes() {
        let t = Tensor::new(name, 0, &dims, offset);
        offset = (offset + t.size()).next_multiple_of(32);
        f.tensors.push(t);
    }
    edit(&mut f);
    f.bytes()
}

pub(crate) fn write_temp(bytes: &[u8]) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let p = std::env::temp_dir().join(format!(
        "engine-model-test-{}-{}.gguf",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&p, bytes).expect("write temp model");
    p
}

fn load(bytes: &[u8], params: LoadParams) -> Result<Model, Error> {
    let path = write_temp(bytes);
    let r = Model::load(&[path.to_string_lossy().into_owned()], params, crate::arch::spec);
    let _ = std::fs::remove_file(&path);
    r
}

fn load_err(bytes: &[u8]) -> String {
    match load(bytes, LoadParams::default()) {
        Ok(_) => panic!("an invalid model was accepted"),
        Err(e) => e.to_string(),
    }
}

fn set_kv(f: &mut File, key: &str, v: Value) {
    f.kvs.retain(|kv| kv.key != key.as_bytes());
    f.kvs.push(Kv::new(key, v));
}

#[test]
fn a_valid_tiny_model_loads_with_its_weights_in_place() {
    for mode in [LoadMode::Map, LoadMode::Read] {
        let params = LoadParams {
            mode,
            ..LoadParams::default()
        };
        let m = load(&model_file(|_| {}), params).expect("valid model");
        let hp = m.hparams.as_ref().expect("hparams");
        assert_eq!(
            (hp.n_embd, hp.n_layer, hp.n_head[0], hp.n_head_kv[0], hp.n_ff[0]),
            (8, 1, 2, 1, 16)
        );
        assert_eq!((hp.n_embd_head_k, hp.n_rot, hp.n_vocab), (4, 4, 4));
        let w = m
            .weights()
            .expect("weights")
            .get("blk.0.ffn_down.weight")
            .expect("tensor");
        assert_eq!(w.ne(), [FF, E, 1, 1]);
        assert_eq!(
            m.n_params(),
            tensor_shapes()
                .iter()
                .map(|(_, d)| d.iter().product::<i64>() as u64)
                .sum()
        );
    }
}

#[test]
fn missing_and_mistyped_keys_are_named() {
    let msg = load_err(&model_file(|f| f.kvs.retain(|kv| kv.key != b"llama.block_count")));
    assert!(msg.contains("required key 'llama.block_count' is missing"), "{msg}");
    let msg = load_err(&model_file(|f| {
        set_kv(f, "llama.embedding_length", Value::Str(b"8".to_vec()))
    }));
    assert!(
        msg.contains("key 'llama.embedding_length' has type str but an integer was expected"),
        "{msg}"
    );
    let msg = load_err(&model_file(|f| {
        set_kv(f, "llama.attention.layer_norm_rms_epsilon", Value::U32(1))
    }));
    assert!(
        msg.contains("'llama.attention.layer_norm_rms_epsilon' has type u32 but a float was expected"),
        "{msg}"
    );
    let msg = load_err(&model_file(|f| f.kvs.retain(|kv| kv.key != b"general.architecture")));
    assert!(msg.contains("required key 'general.architecture' is missing"), "{msg}");
}

#[test]
fn unknown_architectures_are_refused_by_name() {
    let file = model_file(|f| set_kv(f, "general.architecture", Value::Str(b"no-such-arch".to_vec())));
    let msg = load_err(&file);
    assert!(
        msg.contains("unknown or unsupported architecture 'no-such-arch'"),
        "{msg}"
    );
    assert!(
        msg.contains("llama.cpp 0.3.36"),
        "the message names the list followed: {msg}"
    );
    // Its vocabulary can still be read.
    let params = LoadParams {
        vocab_only: true,
        ..LoadParams::default()
    };
    let m = load(&file, params).expect("vocab-only load of an unknown architecture");
    assert!(m.arch.is_none());
    assert_eq!(m.vocab.n_tokens(), 4);
}

#[test]
fn special_token_ids_outside_the_vocabulary_are_refused() {
    let msg = load_err(&model_file(|f| {
        set_kv(f, "tokenizer.ggml.bos_token_id", Value::U32(99))
    }));
    assert!(
        msg.contains("'tokenizer.ggml.bos_token_id' = 99 is outside the vocabulary of 4 tokens"),
        "{msg}"
    );
}

#[test]
fn absurd_counts_are_refused() {
    let msg = load_err(&model_file(|f| set_kv(f, "llama.block_count", Value::U32(100_000))));
    assert!(msg.contains("absurd layer count 100000"), "{msg}");
    let msg = load_err(&model_file(|f| set_kv(f, "llama.block_count", Value::U32(0))));
    assert!(msg.contains("absurd layer count 0"), "{msg}");
    let msg = load_err(&model_file(|f| {
        set_kv(f, "llama.attention.head_count_kv", Value::U32(3))
    }));
    assert!(msg.contains("head_count_kv' = 3 is out of range"), "{msg}");
    let msg = load_err(&model_file(|f| {
        set_kv(f, "llama.embedding_length", Value::U32(u32::MAX))
    }));
    assert!(
        msg.contains("'llama.embedding_length' = 4294967295 is out of range"),
        "{msg}"
    );
}

#[test]
fn shapes_must_agree_with_the_hyper_parameters() {
    // A block count of 2 requires layer-1 tensors the file does not have.
    let msg = load_err(&model_file(|f| set_kv(f, "llama.block_count", Value::U32(2))));
    assert!(msg.contains("missing tensor 'blk.1.attn_norm.weight'"), "{msg}");
    // A wider embedding contradicts every tensor's shape.
    let msg = load_err(&model_file(|f| set_kv(f, "llama.embedding_length", Value::U32(16))));
    assert!(
        msg.contains("has shape [8, 4] but the hyper-parameters require [16, 4]"),
        "{msg}"
    );
    let msg = load_err(&model_file(|f| f.tensors.retain(|t| t.name != b"blk.0.ffn_up.weight")));
    assert!(msg.contains("missing tensor 'blk.0.ffn_up.weight'"), "{msg}");
    let msg = load_err(&model_file(|f| {
        let end = f.tensors.iter().map(|t| t.offset + t.size()).max().unwrap_or(0);
        f.tensors
            .push(Tensor::new("blk.0.mystery.weight", 0, &[E], end.next_multiple_of(32)));
    }));
    assert!(msg.contains("unexpected tensor 'blk.0.mystery.weight'"), "{msg}");
}

#[test]
fn overrides_change_what_the_model_reads_and_wrong_kinds_are_refused() {
    let over = |key: &str, value| LoadParams {
        overrides: vec![KvOverride {
            key: key.to_string(),
            value,
        }],
        ..LoadParams::default()
    };
    let m = load(
        &model_file(|_| {}),
        over("llama.context_length", OverrideValue::Int(128)),
    )
    .expect("override");
    assert_eq!(m.hparams.as_ref().map(|h| h.n_ctx_train), Some(128));
    // The metadata API shows the file's own value, as llama.cpp does.
    assert_eq!(m.meta_value(b"llama.context_length"), Some(&b"64\0"[..]));
    let err = load(
        &model_file(|_| {}),
        over("llama.context_length", OverrideValue::Float(1.0)),
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        err.contains("override of 'llama.context_length' has the wrong type"),
        "{err}"
    );
    let err = load(
        &model_file(|_| {}),
        over("llama.context_length", OverrideValue::Int(-1)),
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(err.contains("wrong type"), "{err}");
}

#[test]
fn splits_load_together_and_must_be_complete_and_in_order() {
    // Split the tiny model into two files: metadata and the first tensors in split 0, the rest in 1.
    let split = |no: u16, names: &[&str]| {
        let mut f = File::new();
        if no == 0 {
            f.kvs = kvs(1);
        }
        f.kvs.push(Kv::new("split.no", Value::U16(no)));
        f.kvs.push(Kv::new("split.count", Value::U16(2)));
        let mut offset = 0;
        for (name, dims) in tensor_shapes().into_iter().filter(|(n, _)| names.contains(n)) {
            let t = Tensor::new(name, 0, &dims, offset);
            offset = (offset + t.size()).next_multiple_of(32);
            f.tensors.push(t);
        }
        f.bytes()
    };
    let names: Vec<&str> = tensor_shapes().iter().map(|(n, _)| *n).collect();
    let (first, second) = names.split_at(5);
    let p0 = write_temp(&split(0, first));
    let p1 = write_temp(&split(1, second));
    let paths = [p0.to_string_lossy().into_owned(), p1.to_string_lossy().into_owned()];
    let m = Model::load(&paths, LoadParams::default(), crate::arch::spec).expect("two splits");
    assert!(m.weights().and_then(|w| w.get("blk.0.ffn_down.weight")).is_some());
    let err = Model::load(&paths[..1], LoadParams::default(), crate::arch::spec)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("belongs to a model of 2 split files but 1 were given"),
        "{err}"
    );
    let swapped = [paths[1].clone(), paths[0].clone()];
    let err = Model::load(&swapped, LoadParams::default(), crate::arch::spec)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(!err.is_empty(), "splits out of order must fail");
    for p in [p0, p1] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn the_progress_callback_can_cancel() {
    let mut calls = 0;
    let mut cb = |_: f32| {
        calls += 1;
        false
    };
    let params = LoadParams {
        progress: Some(&mut cb),
        ..LoadParams::default()
    };
    let err = load(&model_file(|_| {}), params)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("cancelled"), "{err}");
    assert_eq!(calls, 1);
}

/// The tiny model with its FFN as `n_expert` experts (the router and the three stacks).
fn moe_file(n_expert: i64, edit: impl FnOnce(&mut File)) -> Vec<u8> {
    model_file(|f| {
        f.tensors
            .retain(|t| !t.name.starts_with(b"blk.0.ffn_") || t.name == b"blk.0.ffn_norm.weight");
        let mut offset = f.tensors.iter().map(|t| t.offset + t.size()).max().unwrap_or(0);
        for (name, dims) in [
            ("blk.0.ffn_gate_inp.weight", vec![E, n_expert]),
            ("blk.0.ffn_gate_exps.weight", vec![E, FF, n_expert]),
            ("blk.0.ffn_up_exps.weight", vec![E, FF, n_expert]),
            ("blk.0.ffn_down_exps.weight", vec![FF, E, n_expert]),
        ] {
            offset = offset.next_multiple_of(32);
            let t = Tensor::new(name, 0, &dims, offset);
            offset += t.size();
            f.tensors.push(t);
        }
        set_kv(f, "llama.expert_count", Value::U32(n_expert as u32));
        set_kv(f, "llama.expert_used_count", Value::U32(2));
        edit(f);
    })
}

#[test]
fn expert_counts_are_checked_and_select_the_expert_tensors() {
    let m = load(&moe_file(4, |_| {}), LoadParams::default()).expect("a mixture of experts loads");
    let hp = m.hparams.as_ref().expect("hparams");
    assert_eq!((hp.n_expert, hp.n_expert_used, hp.n_ff_exp), (4, 2, FF as u32));
    // More experts used than there are, none used, or too many experts.
    let msg = load_err(&moe_file(4, |f| set_kv(f, "llama.expert_used_count", Value::U32(5))));
    assert!(
        msg.contains("'llama.expert_used_count' = 5 is out of range (1..=4)"),
        "{msg}"
    );
    let msg = load_err(&moe_file(4, |f| set_kv(f, "llama.expert_used_count", Value::U32(0))));
    assert!(
        msg.contains("'llama.expert_used_count' = 0 is out of range (1..=4)"),
        "{msg}"
    );
    let msg = load_err(&moe_file(4, |f| set_kv(f, "llama.expert_count", Value::U32(5000))));
    assert!(msg.contains("'llama.expert_count' = 5000 is out of range"), "{msg}");
    // Per-layer counts that differ are refused by name.
    let msg = load_err(&moe_file(4, |f| {
        set_kv(f, "llama.expert_used_count", Value::Array(Array::U32(vec![2, 3])));
        set_kv(f, "llama.block_count", Value::U32(2));
    }));
    assert!(msg.contains("has 2 entries") || msg.contains("per layer"), "{msg}");
    // A dense model's FFN tensors are not experts.
    let msg = load_err(&model_file(|f| {
        set_kv(f, "llama.expert_count", Value::U32(4));
        set_kv(f, "llama.expert_used_count", Value::U32(2));
    }));
    assert!(msg.contains("missing tensor 'blk.0.ffn_gate_inp.weight'"), "{msg}");
}

#[test]
fn weight_scales_are_optional_companions_of_layer_matrices() {
    let with = |name: &'static str, n: i64| {
        move |f: &mut File| {
            let end = f.tensors.iter().map(|t| t.offset + t.size()).max().unwrap_or(0);
            f.tensors.push(Tensor::new(name, 0, &[n], end.next_multiple_of(32)));
        }
    };
    let m = load(&model_file(with("blk.0.attn_q.scale", 1)), LoadParams::default());
    let m = m.expect("a matrix's scale loads");
    assert!(m.weights().and_then(|w| w.get("blk.0.attn_q.scale")).is_some());
    load(
        &model_file(with("blk.0.ffn_down.input_scale", 1)),
        LoadParams::default(),
    )
    .expect("an input scale loads");
    load(&moe_file(4, with("blk.0.ffn_up_exps.scale", 4)), LoadParams::default()).expect("one scale per expert");
    let msg = load_err(&moe_file(4, with("blk.0.ffn_up_exps.scale", 1)));
    assert!(msg.contains("blk.0.ffn_up_exps.scale"), "{msg}");
    // Norms and the embeddings have none.
    let msg = load_err(&model_file(with("blk.0.attn_norm.scale", 1)));
    assert!(msg.contains("unexpected tensor 'blk.0.attn_norm.scale'"), "{msg}");
}

#[test]
fn a_fused_projection_replaces_the_separate_ones() {
    let fused = |f: &mut File| {
        f.tensors.retain(|t| {
            !matches!(
                t.name.as_slice(),
                b"blk.0.attn_q.weight" | b"blk.0.attn_k.weight" | b"blk.0.attn_v.weight"
            )
        });
        let end = f.tensors.iter().map(|t| t.offset + t.size()).max().unwrap_or(0);
        let qkv = Tensor::new("blk.0.attn_qkv.weight", 0, &[E, 4 * HEAD], end.next_multiple_of(32));
        f.tensors.push(qkv);
    };
    load(&model_file(fused), LoadParams::default()).expect("a fused projection loads");
    let msg = load_err(&model_file(|f| f.tensors.retain(|t| t.name != b"blk.0.attn_k.weight")));
    assert!(msg.contains("missing tensor 'blk.0.attn_k.weight'"), "{msg}");
}

#[test]
fn rope_scaling_types_are_read_and_unknown_ones_refused() {
    use crate::model::hparams::RopeScaling;
    let s = |x: &str| Value::Str(x.as_bytes().to_vec());
    for (name, want) in [
        ("yarn", RopeScaling::Yarn),
        ("longrope", RopeScaling::LongRope),
        ("none", RopeScaling::None),
    ] {
        let m = load(
            &model_file(|f| set_kv(f, "llama.rope.scaling.type", s(name))),
            LoadParams::default(),
        );
        assert_eq!(m.expect("loads").hparams.as_ref().map(|h| h.rope_scaling), Some(want));
    }
    let msg = load_err(&model_file(|f| set_kv(f, "llama.rope.scaling.type", s("warp"))));
    assert!(msg.contains("unknown rope scaling type 'warp'"), "{msg}");
}

#[test]
fn pooling_and_causality_come_from_the_file() {
    let m = load(&model_file(|_| {}), LoadParams::default()).expect("loads");
    let hp = m.hparams.as_ref().expect("hparams");
    assert_eq!((hp.pooling_type, hp.causal, hp.n_cls_out()), (-1, true, 1));
    let m = load(
        &model_file(|f| {
            set_kv(f, "llama.pooling_type", Value::I32(3));
            set_kv(f, "llama.attention.causal", Value::Bool(false));
        }),
        LoadParams::default(),
    )
    .expect("loads");
    let hp = m.hparams.as_ref().expect("hparams");
    assert_eq!((hp.pooling_type, hp.causal), (3, false));
    // Out-of-range pooling reads as unspecified, as llama.cpp's unspecified (-1, stored unsigned).
    let m = load(
        &model_file(|f| set_kv(f, "llama.pooling_type", Value::U32(u32::MAX))),
        LoadParams::default(),
    );
    assert_eq!(m.expect("loads").hparams.as_ref().map(|h| h.pooling_type), Some(-1));
}

#[test]
fn a_tensor_may_have_either_of_two_shapes_where_its_spec_allows() {
    let info = |ne: [u64; 4]| crate::gguf::TensorInfo {
        name: "blk.0.attn_gate.weight".into(),
        ggml_type: 0,
        n_dims: 2,
        ne,
        offset: 0,
        size: 0,
    };
    let spec = TensorSpec::new("blk.0.attn_gate.weight", &[64, 4], true);
    let either = vec![spec.clone().or_shape(&[64, 64])];
    for ne in [[64, 4, 1, 1], [64, 64, 1, 1]] {
        let t = info(ne);
        assert!(super::check_tensors_match(&either, &[(0, &t)]).is_ok(), "{ne:?}");
    }
    let per_element = info([64, 64, 1, 1]);
    let err = super::check_tensors_match(&[spec], &[(0, &per_element)]).unwrap_err();
    assert!(err.to_string().contains("has shape [64, 64]"), "{err}");
    let neither = info([64, 8, 1, 1]);
    assert!(super::check_tensors_match(&either, &[(0, &neither)]).is_err());
}

#[test]
fn sliding_windows_and_chunks_hide_what_llama_cpp_masks() {
    use crate::model::hparams::Swa;
    let w = Swa::Window(4);
    assert!(!w.hides(7, 4) && w.hides(8, 4), "the last 4 positions are seen");
    let c = Swa::Chunked(4);
    assert!(!c.hides(7, 4) && c.hides(8, 7), "a chunk starts at a multiple of 4");
    assert!(!c.hides(11, 8) && !c.hides(3, 0));
    let s = Swa::Symmetric(4);
    assert!(
        !s.hides(2, 4) && !s.hides(6, 4) && s.hides(1, 4) && s.hides(7, 4),
        "2 positions each way are seen"
    );
    assert!(
        !Swa::Chunked(0).hides(5, 0),
        "an empty chunk size does not divide by zero"
    );
}

#[test]
fn attention_temperature_steps_as_llama_cpp_computes_it() {
    use crate::model::hparams::AttnTemp;
    let llama4 = AttnTemp {
        scale: 0.1,
        length: 8192,
        offset: 1.0,
    };
    assert_eq!(
        (llama4.at(0), llama4.at(8190)),
        (1.0, 1.0),
        "the first step starts at 8191"
    );
    assert_eq!(llama4.at(8191), (2f64.ln() * f64::from(0.1f32) + 1.0) as f32);
    assert_eq!(llama4.at(16383), (3f64.ln() * f64::from(0.1f32) + 1.0) as f32);
    let unset = AttnTemp::default();
    assert_eq!(unset.at(100_000), 1.0, "no scale, no tuning (and no division by zero)");
}

#[test]
fn check_tensors_finds_a_nan_in_quantized_blocks() {
    // One Q8_0 block: an F16 scale, then 32 quants.
    let mut block = vec![0u8; 34];
    block[..2].copy_from_slice(&0x3c00u16.to_le_bytes());
    let info = crate::gguf::TensorInfo {
        name: "blk.0.attn_q.weight".into(),
        ggml_type: 8,
        n_dims: 1,
        ne: [32, 1, 1, 1],
        offset: 0,
        size: 34,
    };
    assert!(super::ftype::validate_data(&info, &block, 0).is_ok());
    block[..2].copy_from_slice(&0x7e00u16.to_le_bytes());
    let err = super::ftype::validate_data(&info, &block, 0).unwrap_err().to_string();
    assert!(err.contains("'blk.0.attn_q.weight' has invalid data"), "{err}");
}

/// A model made from metadata alone (`llama_model_init_from_user`): llama.cpp's tensors for Llama
/// in its order, each handed to `fill`; the metadata's tensor infos give types.
fn from_user(f: &File, fill: &mut dyn FnMut(crate::ggml::TensorRef)) -> Result<Model, Error> {
    Model::from_user(&f.bytes(), LoadParams::default(), crate::arch::spec, fill)
}

#[test]
fn a_model_from_metadata_gets_llama_cpp_s_tensors_in_its_order() {
    let mut f = File::new();
    f.kvs = kvs(2);
    // Listed with a type: F16 instead of the default F32.
    f.tensors.push(Tensor::new("blk.1.attn_q.weight", 1, &[E, 2 * HEAD], 0));
    let mut seen = Vec::new();
    let m = from_user(&f, &mut |t| {
        seen.push((t.name(), t.ggml_type()));
        crate::ggml::tensor_set(t, &vec![0u8; t.nbytes()]).expect("fill");
    })
    .expect("a model from metadata");
    let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        &names[..8],
        [
            "token_embd.weight",
            "output_norm.weight",
            "output.weight",
            "blk.0.attn_norm.weight",
            "blk.0.attn_q.weight",
            "blk.0.attn_k.weight",
            "blk.0.attn_v.weight",
            "blk.0.attn_q.bias",
        ]
    );
    // Rotary factors made again per layer, after each layer's FFN norm; the scales come last,
    // layer by layer, the weights' scales before their input scales.
    let at = |n: &str| names.iter().position(|&x| x == n).expect(n);
    assert_eq!(names.iter().filter(|&&n| n == "rope_freqs.weight").count(), 2);
    assert_eq!(names[at("blk.0.ffn_norm.weight") + 1], "rope_freqs.weight");
    assert!(at("blk.1.ffn_up.bias") < at("blk.0.attn_q.scale"));
    assert!(at("blk.0.ffn_up.input_scale") < at("blk.1.attn_q.scale"));
    assert_eq!(names.last(), Some(&"blk.1.ffn_up.input_scale"));
    assert_eq!(names.len(), 3 + 2 * 17 + 2 * 14);
    let types: std::collections::HashMap<&str, u32> = seen.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    assert_eq!(types["blk.1.attn_q.weight"], 1);
    assert_eq!(types["blk.0.attn_q.weight"], 0);
    // As llama.cpp counts: no file, no parameters.
    assert_eq!(m.n_params(), 0);
    assert!(m.weights().is_some_and(|w| w.get("rope_freqs.weight").is_some()));
}

#[test]
fn per_layer_copies_must_get_the_same_data() {
    let mut f = File::new();
    f.kvs = kvs(2);
    let mut n = 0u8;
    let err = from_user(&f, &mut |t| {
        n = n.wrapping_add(1);
        crate::ggml::tensor_set(t, &vec![n; t.nbytes()]).expect("fill");
    })
    .err()
    .expect("copies with different data were accepted");
    assert!(err.to_string().contains("rope_freqs.weight"), "{err}");
}

#[test]
fn the_embeddings_width_is_the_model_width_unless_the_file_gives_another() {
    let m = load(&model_file(|_| {}), LoadParams::default()).expect("loads");
    let hp = m.hparams.as_ref().expect("hparams");
    assert_eq!(hp.embd_out(), hp.n_embd);
    let m = load(
        &model_file(|f| set_kv(f, "llama.embedding_length_out", Value::U32(3))),
        LoadParams::default(),
    )
    .expect("loads");
    assert_eq!(m.hparams.as_ref().map(|h| h.embd_out()), Some(3));
    let msg = load_err(&model_file(|f| {
        set_kv(f, "llama.embedding_length_out", Value::U32(u32::MAX))
    }));
    assert!(msg.contains("llama.embedding_length_out"), "{msg}");
}
