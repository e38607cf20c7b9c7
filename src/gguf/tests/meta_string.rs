//! `Value` accessors, type names, and the llama.cpp metadata string format.

use crate::gguf::{type_traits, Array, Value};

#[test]
fn scalars_print_like_llama_cpp() {
    let cases = [
        (Value::U8(200), "200"),
        (Value::I8(-100), "-100"),
        (Value::U16(60000), "60000"),
        (Value::I16(-30000), "-30000"),
        (Value::U32(4_000_000_000), "4000000000"),
        (Value::I32(-2_000_000_000), "-2000000000"),
        (Value::U64(u64::MAX), "18446744073709551615"),
        (Value::I64(i64::MIN), "-9223372036854775808"),
        (Value::Bool(true), "true"),
        (Value::Bool(false), "false"),
        (Value::Str(b"a \"quoted\" \\ word".to_vec()), "a \"quoted\" \\ word"),
        (Value::Str(b"bad \xff byte".to_vec()), "bad \u{fffd} byte"),
    ];
    for (value, want) in cases {
        assert_eq!(value.to_meta_string(), want, "{value:?}");
    }
}

#[test]
fn floats_print_like_printf_percent_f() {
    let cases = [
        (Value::F32(10000.0), "10000.000000"),
        (Value::F32(1e-6), "0.000001"),
        (Value::F32(0.1), "0.100000"),
        (Value::F32(1e-5), "0.000010"),
        (Value::F32(-1e-9), "-0.000000"),
        (Value::F32(f32::NEG_INFINITY), "-inf"),
        (Value::F32(f32::NAN), "nan"),
        (Value::F32(-f32::NAN), "-nan"),
        (Value::F64(-0.0), "-0.000000"),
        (Value::F64(0.0000005), "0.000000"),
        (Value::F64(0.0000015), "0.000002"),
        (Value::F64(1e20), "100000000000000000000.000000"),
        (Value::F64(f64::INFINITY), "inf"),
    ];
    for (value, want) in cases {
        assert_eq!(value.to_meta_string(), want, "{value:?}");
    }
}

#[test]
fn arrays_print_bracketed_with_strings_quoted_and_escaped() {
    let cases = [
        (Array::U8(vec![1, 2, 3]), "[1, 2, 3]"),
        (Array::I64(vec![-1]), "[-1]"),
        (Array::F32(vec![0.5, -2.0]), "[0.500000, -2.000000]"),
        (Array::F64(vec![]), "[]"),
        (Array::Bool(vec![true, false]), "[true, false]"),
        (
            Array::Str(vec![b"a".to_vec(), b"say \"hi\"".to_vec(), b"back\\slash".to_vec()]),
            r#"["a", "say \"hi\"", "back\\slash"]"#,
        ),
        (Array::Str(vec![Vec::new()]), r#"[""]"#),
    ];
    for (array, want) in cases {
        assert_eq!(Value::Array(array).to_meta_string(), want);
    }
}

#[test]
fn type_names_are_gguf_names() {
    let values = [
        (Value::U8(0), "u8"),
        (Value::I8(0), "i8"),
        (Value::U16(0), "u16"),
        (Value::I16(0), "i16"),
        (Value::U32(0), "u32"),
        (Value::I32(0), "i32"),
        (Value::F32(0.0), "f32"),
        (Value::Bool(false), "bool"),
        (Value::Str(Vec::new()), "str"),
        (Value::Array(Array::Str(Vec::new())), "arr"),
        (Value::U64(0), "u64"),
        (Value::I64(0), "i64"),
        (Value::F64(0.0), "f64"),
    ];
    for (value, name) in values {
        assert_eq!(value.type_name(), name);
    }
    assert_eq!(Array::Str(Vec::new()).type_name(), "str");
    assert_eq!(Array::I16(Vec::new()).type_name(), "i16");
}

#[test]
fn accessors_do_not_convert_between_types() {
    assert_eq!(Value::U32(7).as_u32(), Some(7));
    assert_eq!(Value::U32(7).as_u64(), None);
    assert_eq!(Value::U32(7).as_i32(), None);
    assert_eq!(Value::I32(-7).as_i32(), Some(-7));
    assert_eq!(Value::U64(7).as_u64(), Some(7));
    assert_eq!(Value::U64(7).as_u32(), None);
    assert_eq!(Value::F32(1.5).as_f32(), Some(1.5));
    assert_eq!(Value::F64(1.5).as_f32(), None);
    assert_eq!(Value::Bool(true).as_bool(), Some(true));
    assert_eq!(Value::U8(1).as_bool(), None);
    assert_eq!(Value::Str(b"x".to_vec()).as_str(), Some(&b"x"[..]));
    assert_eq!(Value::Array(Array::U8(b"x".to_vec())).as_str(), None);
    let a = Value::Array(Array::U32(vec![1, 2]));
    assert_eq!(a.as_array().map(Array::len), Some(2));
    assert_eq!(Value::U32(1).as_array(), None);
}

#[test]
fn type_table_matches_ggml() {
    let facts = [
        (0, "f32", 1, 4),
        (1, "f16", 1, 2),
        (2, "q4_0", 32, 18),
        (3, "q4_1", 32, 20),
        (8, "q8_0", 32, 34),
        (12, "q4_K", 256, 144),
        (14, "q6_K", 256, 210),
        (15, "q8_K", 256, 292),
        (23, "iq4_xs", 256, 136),
        (28, "f64", 1, 8),
        (30, "bf16", 1, 2),
        (35, "tq2_0", 256, 66),
        (39, "mxfp4", 32, 17),
        (40, "nvfp4", 64, 36),
        (41, "q1_0", 128, 18),
        (42, "q2_0", 64, 18),
    ];
    for (id, name, block, size) in facts {
        let t = type_traits(id);
        assert_eq!(
            t.map(|t| (t.name, t.block_size, t.type_size)),
            Some((name, block, size))
        );
    }
    for id in [4, 5, 31, 32, 33, 36, 37, 38, 43, u32::MAX] {
        assert!(type_traits(id).is_none(), "type {id}");
    }
    let known = (0..=42).filter(|&id| type_traits(id).is_some()).count();
    assert_eq!(known, 43 - 8);
}
