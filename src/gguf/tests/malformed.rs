//! Every malformed input the reader must reject, each with a message that names the problem.

use super::writer::{put_u32, put_u64, rich, File, Kv, Tensor};
use super::{assert_rejected, find, parse_err};
use crate::gguf::Value;

#[test]
fn truncation_at_every_length_is_an_error() {
    let bytes = rich().bytes();
    super::parse_ok(&bytes);
    for len in 0..bytes.len() {
        let (at, msg) = parse_err(&bytes[..len]);
        assert!(at <= len as u64, "offset {at} past the end of a {len}-byte file: {msg}");
    }
}

#[test]
fn truncation_messages_name_what_was_being_read() {
    let (bytes, infos_end) = rich().build();
    let cut = |len: u64, part: &str| assert_rejected(&bytes[..len as usize], &[part]);
    cut(3, "not a GGUF file: it is only 3 bytes long");
    cut(6, "the version needs 4 bytes but only 2 are left");
    cut(20, "the metadata count needs 8 bytes but only 4 are left");
    // Early cuts fail the metadata count bound; these are late enough to reach the reads.
    let key = find(&bytes, b"a.f64");
    cut(key + 3, "metadata key 28 needs 5 bytes but only 3 are left");
    cut(key + 7, "the value type of key 'a.f64' needs 4 bytes");
    cut(key + 11, "the element type of array 'a.f64' needs 4 bytes");
    cut(key + 15, "the length of array 'a.f64' needs 8 bytes");
    cut(
        key + 25,
        "the length of array 'a.f64' is 2, but 2 items of at least 8 bytes each",
    );
    let sample = File::sample().bytes();
    let cut_sample = |len: u64, part: &str| assert_rejected(&sample[..len as usize], &[part]);
    let key = find(&sample, b"tokenizer.ggml.tokens");
    let element_2 = key + 21 + 4 + 4 + 8 + (8 + 3) + (8 + 1);
    let array = "element 2 of array 'tokenizer.ggml.tokens'";
    cut_sample(element_2 + 4, &format!("{array} needs 8 bytes but only 4 are left"));
    cut_sample(element_2 + 9, &format!("{array} needs 3 bytes but only 1 are left"));
    let key = find(&bytes, b"t.i64");
    cut(
        key + 5 + 4 + 7,
        "the value of key 't.i64' needs 8 bytes but only 7 are left",
    );
    let name = find(&bytes, b"output_norm.weight");
    cut(name + 4, "the name of tensor 2 needs 18 bytes");
    cut(
        name + 18 + 2,
        "the dimension count of tensor 'output_norm.weight' needs 4 bytes",
    );
    cut(
        name + 18 + 4 + 1,
        "dimension 0 of tensor 'output_norm.weight' needs 8 bytes",
    );
    cut(
        name + 18 + 4 + 8 + 3,
        "the type of tensor 'output_norm.weight' needs 4 bytes",
    );
    cut(
        infos_end as u64 - 2,
        "the data offset of tensor 'output_norm.weight' needs 8 bytes",
    );
    cut(bytes.len() as u64 - 1, "tensor 'output_norm.weight' data");
}

#[test]
fn legacy_magics_are_named() {
    for (magic, name) in [(0x6767_6d6cu32, "GGML"), (0x6767_6d66, "GGMF"), (0x6767_6a74, "GGJT")] {
        let mut f = File::sample();
        f.magic = magic.to_le_bytes();
        let at = assert_rejected(&f.bytes(), &[&format!("legacy {name} file"), "convert it to GGUF"]);
        assert_eq!(at, 0);
    }
}

#[test]
fn big_endian_gguf_is_named() {
    for version in [2u32, 3] {
        let mut f = File::sample();
        f.version = version.swap_bytes();
        let at = assert_rejected(&f.bytes(), &["big-endian GGUF is not supported"]);
        assert_eq!(at, 4);
    }
}

#[test]
fn other_magics_are_not_gguf() {
    let mut f = File::sample();
    f.magic = *b"PK\x03\x04";
    assert_rejected(&f.bytes(), &["not a GGUF file", "expected \"GGUF\""]);
    f.magic = *b"gguf";
    assert_rejected(&f.bytes(), &["not a GGUF file"]);
    assert_rejected(b"", &["not a GGUF file: it is only 0 bytes long"]);
}

#[test]
fn version_1_is_legacy() {
    let mut f = File::sample();
    f.version = 1;
    let at = assert_rejected(&f.bytes(), &["GGUF version 1 is a legacy format"]);
    assert_eq!(at, 4);
}

#[test]
fn other_versions_are_unsupported() {
    for version in [0u32, 4, 0xffff_ffff] {
        let mut f = File::sample();
        f.version = version;
        assert_rejected(&f.bytes(), &[&format!("unsupported GGUF version {version}"), "2 and 3"]);
    }
}

#[test]
fn tensor_count_beyond_the_file_is_rejected() {
    let mut f = File::sample();
    f.n_tensors = Some(1_000_000);
    assert_rejected(&f.bytes(), &["the tensor count is 1000000", "bytes left in the file"]);
    // A count the bytes after the header could hold, but not the bytes after the metadata.
    let bytes = File::sample().bytes();
    let n = (bytes.len() as u64 - 24) / 33;
    let infos_start = find(&bytes, b"token_embd.weight") - 8;
    assert!(n * 33 > bytes.len() as u64 - infos_start);
    f.n_tensors = Some(n);
    let at = assert_rejected(
        &f.bytes(),
        &[&format!("the tensor count is {n}"), "bytes left in the file"],
    );
    assert_eq!(at, infos_start);
}

#[test]
fn metadata_count_beyond_the_file_is_rejected() {
    let mut f = File::sample();
    f.n_kv = Some(1_000_000);
    assert_rejected(&f.bytes(), &["the metadata count is 1000000", "bytes left in the file"]);
}

#[test]
fn counts_above_i64_max_are_rejected() {
    for count in [1u64 << 63, u64::MAX] {
        let mut f = File::sample();
        f.n_tensors = Some(count);
        let at = assert_rejected(&f.bytes(), &[&format!("the tensor count is {count}"), "i64::MAX"]);
        assert_eq!(at, 8);
        let mut f = File::sample();
        f.n_kv = Some(count);
        let at = assert_rejected(&f.bytes(), &[&format!("the metadata count is {count}"), "i64::MAX"]);
        assert_eq!(at, 16);
    }
}

#[test]
fn array_lengths_beyond_the_file_are_rejected() {
    for (elem_type, min) in [(0u32, 1), (4, 4), (8, 8), (12, 8)] {
        let mut body = Vec::new();
        put_u32(&mut body, 9);
        put_u32(&mut body, elem_type);
        put_u64(&mut body, 1 << 40);
        let mut f = File::sample();
        f.kvs.push(Kv::raw(b"big.array", body));
        assert_rejected(
            &f.bytes(),
            &[
                "the length of array 'big.array' is 1099511627776",
                &format!("at least {min} bytes each"),
            ],
        );
    }
}

#[test]
fn string_lengths_beyond_the_file_are_rejected() {
    // A string value.
    let mut body = Vec::new();
    put_u32(&mut body, 8);
    put_u64(&mut body, 1 << 40);
    let mut f = File::sample();
    f.kvs.push(Kv::raw(b"big.string", body));
    assert_rejected(
        &f.bytes(),
        &[
            "the value of key 'big.string' needs 1099511627776 bytes",
            "left in the file",
        ],
    );

    let huge = (u64::MAX - 3).to_le_bytes();
    let patch = |bytes: &mut Vec<u8>, at: u64| {
        bytes[at as usize..at as usize + 8].copy_from_slice(&huge);
    };
    // A key.
    let mut bytes = File::sample().bytes();
    let at = find(&bytes, b"llama.block_count") - 8;
    patch(&mut bytes, at);
    assert_rejected(&bytes, &["metadata key 1 needs 18446744073709551612 bytes"]);
    // A tensor name.
    let mut bytes = File::sample().bytes();
    let at = find(&bytes, b"blk.0.attn_q.weight") - 8;
    patch(&mut bytes, at);
    assert_rejected(&bytes, &["the name of tensor 1 needs 18446744073709551612 bytes"]);
    // An element of a string array.
    let mut bytes = File::sample().bytes();
    let at = find(&bytes, b"\"b\"") - 8;
    patch(&mut bytes, at);
    assert_rejected(
        &bytes,
        &["element 2 of array 'tokenizer.ggml.tokens' needs 18446744073709551612 bytes"],
    );
}

#[test]
fn unknown_value_types_are_rejected() {
    let mut body = Vec::new();
    put_u32(&mut body, 13);
    put_u32(&mut body, 0);
    let mut f = File::sample();
    f.kvs.insert(1, Kv::raw(b"odd.key", body));
    let (bytes, _) = f.build();
    let at = assert_rejected(&bytes, &["key 'odd.key' has unknown value type 13"]);
    assert_eq!(at, find(&bytes, b"odd.key") + 7);

    let mut body = Vec::new();
    put_u32(&mut body, 9);
    put_u32(&mut body, 0xffff_ffff);
    put_u64(&mut body, 0);
    let mut f = File::sample();
    f.kvs.push(Kv::raw(b"odd.array", body));
    assert_rejected(&f.bytes(), &["array 'odd.array' has unknown element type 4294967295"]);
}

#[test]
fn nested_arrays_are_rejected() {
    let mut body = Vec::new();
    put_u32(&mut body, 9);
    put_u32(&mut body, 9);
    put_u64(&mut body, 1);
    put_u32(&mut body, 4);
    put_u64(&mut body, 1);
    put_u32(&mut body, 7);
    let mut f = File::sample();
    f.kvs.push(Kv::raw(b"nested", body));
    assert_rejected(&f.bytes(), &["key 'nested'", "nested arrays are not supported"]);
}

#[test]
fn bools_other_than_0_and_1_are_rejected() {
    let mut f = File::sample();
    f.kvs.push(Kv::raw(b"flag", vec![7, 0, 0, 0, 2]));
    assert_rejected(
        &f.bytes(),
        &["key 'flag' is a bool with byte value 2; it must be 0 or 1"],
    );

    let mut body = Vec::new();
    put_u32(&mut body, 9);
    put_u32(&mut body, 7);
    put_u64(&mut body, 3);
    body.extend_from_slice(&[1, 0, 0xff]);
    let mut f = File::sample();
    f.kvs.push(Kv::raw(b"flags", body));
    let (bytes, _) = f.build();
    let at = assert_rejected(&bytes, &["element 2 of array 'flags' is a bool with byte value 255"]);
    assert_eq!(at, find(&bytes, b"flags") + 5 + 4 + 4 + 8 + 2);
}

#[test]
fn unknown_tensor_types_are_rejected() {
    for ggml_type in [43u32, 1000, u32::MAX] {
        let mut f = File::sample();
        f.tensors[1].ggml_type = ggml_type;
        assert_rejected(
            &f.bytes(),
            &[&format!(
                "tensor 'blk.0.attn_q.weight' has ggml type {ggml_type}, not a type ggml knows"
            )],
        );
    }
}

#[test]
fn removed_tensor_types_are_rejected() {
    for ggml_type in [4u32, 5, 31, 32, 33, 36, 37, 38] {
        let mut f = File::sample();
        f.tensors[1].ggml_type = ggml_type;
        assert_rejected(
            &f.bytes(),
            &[&format!(
                "tensor 'blk.0.attn_q.weight' has ggml type {ggml_type}, a type whose support ggml removed"
            )],
        );
    }
}

#[test]
fn dimension_counts_outside_1_to_4_are_rejected() {
    let mut f = File::sample();
    f.tensors[0].dims = Vec::new();
    assert_rejected(
        &f.bytes(),
        &["tensor 'token_embd.weight' has 0 dimensions; it must have 1 to 4"],
    );
    f.tensors[0].dims = vec![8, 4, 1, 1, 1];
    assert_rejected(&f.bytes(), &["tensor 'token_embd.weight' has 5 dimensions"]);
    f.tensors[0].n_dims = Some(u32::MAX);
    assert_rejected(&f.bytes(), &["tensor 'token_embd.weight' has 4294967295 dimensions"]);
}

#[test]
fn negative_dimensions_are_rejected() {
    let mut f = File::sample();
    f.tensors[0].dims = vec![8, -4];
    assert_rejected(&f.bytes(), &["tensor 'token_embd.weight' dimension 1 is negative (-4)"]);
    f.tensors[0].dims = vec![i64::MIN];
    assert_rejected(&f.bytes(), &["dimension 0 is negative (-9223372036854775808)"]);
}

#[test]
fn element_count_overflow_is_rejected() {
    for dims in [vec![1i64 << 32, 1 << 32], vec![1 << 62, 2], vec![i64::MAX, 1, 1, 2]] {
        let mut f = File::sample();
        f.tensors[0].dims = dims;
        assert_rejected(
            &f.bytes(),
            &[
                "tensor 'token_embd.weight' of shape [",
                "more elements than fit in an i64",
            ],
        );
    }
}

#[test]
fn byte_size_overflow_is_rejected() {
    let mut f = File::sample();
    // 2^62 f64 elements fit in an i64 count, but take 2^65 bytes.
    f.tensors[0] = Tensor::new("big", 28, &[1 << 62], 0);
    assert_rejected(
        &f.bytes(),
        &["tensor 'big' of type f64 and shape [4611686018427387904] has a size in bytes that overflows 64 bits"],
    );
}

#[test]
fn rows_must_be_whole_blocks() {
    let mut f = File::sample();
    f.tensors[1].dims = vec![33, 2];
    assert_rejected(
        &f.bytes(),
        &["tensor 'blk.0.attn_q.weight' of type q4_0 has 33 elements per row, not a multiple of the block size 32"],
    );
}

#[test]
fn alignment_must_be_a_u32() {
    for (value, type_name) in [
        (Value::U64(32), "u64"),
        (Value::I32(32), "i32"),
        (Value::Str(b"32".to_vec()), "str"),
    ] {
        let mut f = File::sample();
        f.kvs.push(Kv::new("general.alignment", value));
        assert_rejected(
            &f.bytes(),
            &[&format!(
                "key 'general.alignment' must be of type u32 but is {type_name}"
            )],
        );
    }
}

#[test]
fn alignment_must_be_a_power_of_two() {
    for alignment in [0u32, 3, 48, u32::MAX] {
        let mut f = File::sample();
        f.kvs.push(Kv::new("general.alignment", Value::U32(alignment)));
        assert_rejected(
            &f.bytes(),
            &[&format!(
                "key 'general.alignment' is {alignment}, which is not a power of two"
            )],
        );
    }
}

#[test]
fn duplicate_keys_are_rejected() {
    let mut f = File::sample();
    f.kvs.push(Kv::new("llama.block_count", Value::U32(2)));
    let (bytes, _) = f.build();
    let at = assert_rejected(&bytes, &["duplicate metadata key 'llama.block_count' (pairs 1 and 5)"]);
    let second = bytes.windows(17).rposition(|w| w == b"llama.block_count");
    assert_eq!(Some(at as usize), second.map(|p| p - 8));
}

#[test]
fn duplicate_tensor_names_are_rejected() {
    let mut f = File::sample();
    f.tensors[2].name = b"token_embd.weight".to_vec();
    assert_rejected(
        &f.bytes(),
        &["duplicate tensor name 'token_embd.weight' (tensors 0 and 2)"],
    );
}

#[test]
fn tensor_names_longer_than_63_bytes_are_rejected() {
    let mut f = File::sample();
    f.tensors[1].name = vec![b'n'; 64];
    assert_rejected(&f.bytes(), &["tensor 1 has a name of 64 bytes ('nnnn", "at most 63"]);
}

#[test]
fn empty_tensor_names_are_rejected() {
    let mut f = File::sample();
    f.tensors[1].name = Vec::new();
    assert_rejected(&f.bytes(), &["tensor 1 has an empty name"]);
}

#[test]
fn empty_keys_are_rejected() {
    let mut f = File::sample();
    f.kvs[2].key = Vec::new();
    assert_rejected(&f.bytes(), &["metadata key 2 is empty"]);
}

#[test]
fn non_utf8_keys_and_tensor_names_are_rejected() {
    let mut f = File::sample();
    f.kvs[1].key = b"llama.\xffblock".to_vec();
    assert_rejected(
        &f.bytes(),
        &["metadata key 1 is not valid UTF-8 ('llama.\u{fffd}block')"],
    );
    let mut f = File::sample();
    f.tensors[2].name = b"norm\xc3".to_vec();
    assert_rejected(
        &f.bytes(),
        &["tensor 2 has a name that is not valid UTF-8 ('norm\u{fffd}')"],
    );
}

#[test]
fn nul_bytes_in_keys_and_tensor_names_are_rejected() {
    let mut f = File::sample();
    f.kvs[1].key = b"llama\0x".to_vec();
    assert_rejected(&f.bytes(), &["metadata key 1 contains a NUL byte"]);
    let mut f = File::sample();
    f.tensors[2].name = b"norm\0x".to_vec();
    assert_rejected(&f.bytes(), &["tensor 2 has a name containing a NUL byte"]);
}

#[test]
fn misaligned_tensor_offsets_are_rejected() {
    let mut f = File::sample();
    f.tensors[1].offset = 130;
    let (bytes, infos_end) = f.build();
    let at = assert_rejected(
        &bytes,
        &["tensor 'blk.0.attn_q.weight' data offset 130 is not a multiple of the alignment 32"],
    );
    // Reported at the offset field of tensor 1 (tensor 2's info is name, n_dims, one dim, type, offset).
    assert_eq!(at, infos_end as u64 - (8 + 18 + 4 + 8 + 4 + 8) - 8);

    let mut f = File::sample();
    f.kvs.push(Kv::new("general.alignment", Value::U32(256)));
    f.alignment = 256;
    assert_rejected(&f.bytes(), &["data offset 128 is not a multiple of the alignment 256"]);
}

#[test]
fn overlapping_tensors_are_rejected() {
    let mut f = File::sample();
    // blk.0.attn_q.weight covers 128..200.
    f.tensors[2].offset = 192;
    assert_rejected(
        &f.bytes(),
        &["tensor 'output_norm.weight' data (bytes 192..208 of the data section) overlaps tensor 'blk.0.attn_q.weight'"],
    );

    // A tensor inside another, listed first.
    let mut f = File::sample();
    f.tensors[1].offset = 32;
    assert_rejected(
        &f.bytes(),
        &["tensor 'blk.0.attn_q.weight'", "overlaps tensor 'token_embd.weight'"],
    );

    // Two tensors at the same offset.
    let mut f = File::sample();
    f.tensors[2].offset = 0;
    assert_rejected(&f.bytes(), &["overlaps tensor"]);
}

#[test]
fn tensor_data_past_the_end_of_the_file_is_rejected() {
    let mut f = File::sample();
    f.data_len = Some(239);
    let (bytes, infos_end) = f.build();
    assert_rejected(
        &bytes,
        &[&format!(
            "tensor 'output_norm.weight' data (16 bytes at offset 224 after the data section start {}) \
             extends past the end of the file ({} bytes)",
            infos_end.next_multiple_of(32),
            bytes.len()
        )],
    );

    // Offsets near u64::MAX must not wrap around.
    let mut f = File::sample();
    f.tensors[0].offset = u64::MAX - 31;
    f.data_len = Some(240);
    assert_rejected(
        &f.bytes(),
        &["tensor 'token_embd.weight' data", "extends past the end of the file"],
    );

    // A large valid shape with no data behind it.
    let mut f = File::sample();
    f.tensors[0].dims = vec![1 << 20, 1 << 20];
    f.data_len = Some(240);
    assert_rejected(
        &f.bytes(),
        &[
            "tensor 'token_embd.weight' data (4398046511104 bytes",
            "extends past the end",
        ],
    );
}
