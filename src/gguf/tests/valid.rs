//! Valid files parse, and the parsed values, tensor infos and layout are what was written.

use super::parse_ok;
use super::writer::{all_arrays, all_scalars, rich, File, Kv, Tensor};
use crate::gguf::{Array, TensorInfo, Value};

#[test]
fn sample_file_parses_with_its_layout() {
    let (bytes, infos_end) = File::sample().build();
    let f = parse_ok(&bytes);
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.data_offset(), infos_end.next_multiple_of(32) as u64);
    assert_eq!(f.data_size(), 240);
    assert_eq!(f.data_offset() + f.data_size(), bytes.len() as u64);

    let keys: Vec<&str> = f.metadata().iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "general.architecture",
            "llama.block_count",
            "llama.rope.freq_base",
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.scores"
        ]
    );
    assert_eq!(f.get("general.architecture"), Some(&Value::Str(b"llama".to_vec())));
    assert_eq!(f.get("llama.block_count").and_then(Value::as_u32), Some(1));
    assert_eq!(f.get("missing"), None);

    let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["token_embd.weight", "blk.0.attn_q.weight", "output_norm.weight"]
    );
    let q = f.tensor("blk.0.attn_q.weight");
    assert_eq!(
        q,
        Some(&TensorInfo {
            name: "blk.0.attn_q.weight".into(),
            ggml_type: 2,
            n_dims: 2,
            ne: [64, 2, 1, 1],
            offset: 128,
            size: 72,
        })
    );
    assert_eq!(q.map(TensorInfo::n_elements), Some(128));
    assert_eq!(
        f.tensor("output_norm.weight").map(|t| (t.ne, t.size)),
        Some(([8, 1, 1, 1], 16))
    );
    assert_eq!(f.tensor("missing"), None);
}

#[test]
fn every_scalar_type_round_trips() {
    let mut f = File::sample();
    for (k, v) in all_scalars() {
        f.kvs.push(Kv::new(k, v));
    }
    let parsed = parse_ok(&f.bytes());
    for (k, v) in all_scalars() {
        assert_eq!(parsed.get(k), Some(&v), "key {k}");
    }
}

#[test]
fn every_array_type_round_trips() {
    let parsed = parse_ok(&rich().bytes());
    for (k, v) in all_arrays() {
        assert_eq!(parsed.get(k), Some(&v), "key {k}");
    }
    assert_eq!(parsed.metadata().len(), 5 + 12 + 12);
}

#[test]
fn empty_arrays_of_every_type_parse() {
    let empties = [
        Array::U8(vec![]),
        Array::I8(vec![]),
        Array::U16(vec![]),
        Array::I16(vec![]),
        Array::U32(vec![]),
        Array::I32(vec![]),
        Array::F32(vec![]),
        Array::Bool(vec![]),
        Array::Str(vec![]),
        Array::U64(vec![]),
        Array::I64(vec![]),
        Array::F64(vec![]),
    ];
    let mut f = File::new();
    for (i, a) in empties.iter().enumerate() {
        f.kvs.push(Kv::new(&format!("empty.{i}"), Value::Array(a.clone())));
    }
    let parsed = parse_ok(&f.bytes());
    for (i, a) in empties.iter().enumerate() {
        let got = parsed.get(&format!("empty.{i}")).and_then(Value::as_array);
        assert_eq!(got, Some(a));
        assert!(got.is_some_and(Array::is_empty));
    }
}

#[test]
fn custom_alignment_is_honoured() {
    let mut f = File::sample();
    f.kvs.push(Kv::new("general.alignment", Value::U32(64)));
    f.alignment = 64;
    f.tensors[1].offset = 128;
    f.tensors[2].offset = 256;
    let (bytes, infos_end) = f.build();
    let parsed = parse_ok(&bytes);
    assert_eq!(parsed.alignment(), 64);
    assert_eq!(parsed.data_offset(), infos_end.next_multiple_of(64) as u64);
    assert_eq!(parsed.data_offset() % 64, 0);
    assert_eq!(parsed.data_size(), 256 + 16);
}

#[test]
fn versions_2_and_3_parse() {
    for version in [2u32, 3] {
        let mut f = rich();
        f.version = version;
        assert_eq!(parse_ok(&f.bytes()).version(), version);
    }
}

#[test]
fn files_without_tensors_parse() {
    let mut f = File::new();
    f.kvs
        .push(Kv::new("general.architecture", Value::Str(b"none".to_vec())));
    let (bytes, infos_end) = f.build();
    assert_eq!(bytes.len(), infos_end);
    let parsed = parse_ok(&bytes);
    assert!(parsed.tensors().is_empty());
    assert_eq!(parsed.data_size(), 0);
    assert_eq!(parsed.data_offset(), infos_end.next_multiple_of(32) as u64);

    // An empty file apart from the header.
    let parsed = parse_ok(&File::new().bytes());
    assert!(parsed.metadata().is_empty());
    assert_eq!(parsed.data_offset(), 32);
}

#[test]
fn tensors_may_be_listed_out_of_offset_order() {
    let mut f = File::sample();
    f.tensors.swap(0, 2);
    f.tensors.swap(1, 2);
    let parsed = parse_ok(&f.bytes());
    let order: Vec<u64> = parsed.tensors().iter().map(|t| t.offset).collect();
    assert_eq!(order, [224, 0, 128]);
    assert_eq!(parsed.data_size(), 240);
    assert_eq!(parsed.tensor("token_embd.weight").map(|t| t.offset), Some(0));
}

#[test]
fn data_starts_after_padding_to_the_alignment() {
    let (bytes, infos_end) = File::sample().build();
    // The header is not a multiple of 32 by itself, so padding is present.
    assert_ne!(infos_end % 32, 0);
    let parsed = parse_ok(&bytes);
    let start = parsed.data_offset() as usize;
    assert!(start > infos_end);
    assert!(bytes[infos_end..start].iter().all(|&b| b == 0));
    // The writer fills data with i % 251 from the data section start.
    assert_eq!(bytes.get(start + 130), Some(&130));
}

#[test]
fn trailing_padding_and_gaps_between_tensors_are_allowed() {
    let mut f = File::sample();
    f.data_len = Some(512);
    let parsed = parse_ok(&f.bytes());
    assert_eq!(parsed.data_size(), 240);
}

#[test]
fn edge_shapes_parse() {
    let mut f = File::sample();
    // A 63-byte name is the longest ggml allows.
    let long = "n".repeat(63);
    f.tensors.push(Tensor::new(&long, 12, &[256, 1, 1, 2], 256)); // 288 bytes
                                                                  // Zero-element tensors occupy no bytes and may share an offset.
    f.tensors.push(Tensor::new("empty.a", 0, &[0, 5], 32));
    f.tensors.push(Tensor::new("empty.b", 0, &[4, 0], 32));
    let parsed = parse_ok(&f.bytes());
    let t = parsed.tensor(&long);
    assert_eq!(t.map(|t| (t.n_dims, t.ne, t.size)), Some((4, [256, 1, 1, 2], 288)));
    assert_eq!(parsed.tensor("empty.a").map(|t| (t.size, t.n_elements())), Some((0, 0)));
    assert_eq!(parsed.data_size(), 256 + 288);
}

#[test]
fn keys_need_not_be_ascii() {
    let mut f = File::sample();
    f.kvs.push(Kv::new("tokenizer.ggml.précis", Value::Bool(false)));
    assert_eq!(
        parse_ok(&f.bytes()).get("tokenizer.ggml.précis"),
        Some(&Value::Bool(false))
    );
}
