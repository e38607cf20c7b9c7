use super::types::{ft, ty, Chooser, Role, Rules};
use super::{block_of, Pruner};
use regex::Regex;

fn rules(ftype: i32) -> Rules {
    Rules {
        arch: "llama".into(),
        ftype,
        n_expert: 0,
        n_gqa: 2,
        n_layer: 8,
        is_70b: false,
        has_imatrix: false,
        only_copy: false,
        pure: false,
        quantize_output_tensor: true,
        output_tensor_type: None,
        token_embedding_type: None,
        overrides: Vec::new(),
    }
}

/// A Llama-like model's tensors of `n_layer` layers, in llama.cpp's order, with their dims.
fn model(n_layer: usize, tied: bool) -> Vec<(String, [u64; 4], usize)> {
    let mut v = vec![("token_embd.weight".to_string(), [256, 1000, 1, 1], 2)];
    if !tied {
        v.push(("output.weight".into(), [256, 1000, 1, 1], 2));
    }
    v.push(("output_norm.weight".into(), [256, 1, 1, 1], 1));
    for il in 0..n_layer {
        for (n, ne, d) in [
            ("attn_k.weight", [256, 128, 1, 1], 2),
            ("attn_norm.weight", [256, 1, 1, 1], 1),
            ("attn_output.weight", [256, 256, 1, 1], 2),
            ("attn_q.weight", [256, 256, 1, 1], 2),
            ("attn_v.weight", [256, 128, 1, 1], 2),
            ("ffn_down.weight", [512, 256, 1, 1], 2),
            ("ffn_gate.weight", [256, 512, 1, 1], 2),
            ("ffn_up.weight", [256, 512, 1, 1], 2),
        ] {
            v.push((format!("blk.{il}.{n}"), ne, d));
        }
    }
    v
}

fn choose_all(r: &Rules, tensors: &[(String, [u64; 4], usize)]) -> Vec<(String, u32)> {
    let mut c = Chooser::new(r, tensors.iter().map(|(n, _, _)| n.as_str()));
    let mut warn = |_: String| {};
    tensors
        .iter()
        .map(|(n, ne, d)| (n.clone(), c.choose(n, ty::F32, *ne, *d, &mut warn).unwrap()))
        .collect()
}

fn type_of(chosen: &[(String, u32)], name: &str) -> u32 {
    chosen.iter().find(|(n, _)| n == name).map(|(_, t)| *t).unwrap()
}

#[test]
fn roles_by_name() {
    assert_eq!(Role::of("output.weight"), Role::Output);
    assert_eq!(Role::of("per_layer_token_embd.weight"), Role::TokenEmbd);
    assert_eq!(Role::of("blk.3.attn_qkv.weight"), Role::AttnQkv);
    assert_eq!(Role::of("blk.3.ffn_down_exps.weight"), Role::FfnDown);
    assert_eq!(Role::of("blk.3.ffn_gate_inp.weight"), Role::FfnGate);
    assert_eq!(Role::of("blk.3.attn_norm.weight"), Role::Other);
}

#[test]
fn norms_and_vectors_stay_as_they_are() {
    let chosen = choose_all(&rules(ft::Q4_0), &model(2, false));
    assert_eq!(type_of(&chosen, "output_norm.weight"), ty::F32);
    assert_eq!(type_of(&chosen, "blk.0.attn_norm.weight"), ty::F32);
    assert_eq!(type_of(&chosen, "blk.0.attn_q.weight"), ty::Q4_0);
    // The output head gets Q6_K in every mixture but Q8_0's.
    assert_eq!(type_of(&chosen, "output.weight"), ty::Q6_K);
    assert_eq!(type_of(&chosen, "token_embd.weight"), ty::Q4_0);
}

#[test]
fn tied_embeddings_are_treated_as_the_output_head() {
    let chosen = choose_all(&rules(ft::Q4_K_S), &model(2, true));
    assert_eq!(type_of(&chosen, "token_embd.weight"), ty::Q6_K);
    let chosen = choose_all(&rules(ft::Q4_K_S), &model(2, false));
    assert_eq!(type_of(&chosen, "token_embd.weight"), ty::Q4_K);
}

#[test]
fn q4_k_m_gives_more_bits_to_some_layers() {
    let chosen = choose_all(&rules(ft::Q4_K_M), &model(8, false));
    // use_more_bits over 8 layers: the first, the last, and every third from the second.
    let v: Vec<u32> = (0..8)
        .map(|il| type_of(&chosen, &format!("blk.{il}.attn_v.weight")))
        .collect();
    let q6 = ty::Q6_K;
    let q4 = ty::Q4_K;
    assert_eq!(v, [q6, q4, q4, q6, q4, q4, q6, q6]);
    let down: Vec<u32> = (0..8)
        .map(|il| type_of(&chosen, &format!("blk.{il}.ffn_down.weight")))
        .collect();
    assert_eq!(down, v);
    assert_eq!(type_of(&chosen, "blk.4.ffn_up.weight"), ty::Q4_K);
}

#[test]
fn pure_and_overrides() {
    let mut r = rules(ft::Q4_K_M);
    r.pure = true;
    let chosen = choose_all(&r, &model(8, false));
    assert_eq!(type_of(&chosen, "blk.0.attn_v.weight"), ty::Q4_K);
    // The output head's rule is part of the mixture, so pure leaves it at the default too.
    assert_eq!(type_of(&chosen, "output.weight"), ty::Q4_K);
    let mut r = rules(ft::Q4_K_M);
    r.overrides = vec![(Regex::new(r"ffn_(up|gate)").unwrap(), ty::Q8_0)];
    r.output_tensor_type = Some(ty::F16);
    r.token_embedding_type = Some(ty::Q5_0);
    let chosen = choose_all(&r, &model(2, false));
    assert_eq!(type_of(&chosen, "blk.1.ffn_gate.weight"), ty::Q8_0);
    assert_eq!(type_of(&chosen, "output.weight"), ty::F16);
    assert_eq!(type_of(&chosen, "token_embd.weight"), ty::Q5_0);
}

#[test]
fn rows_that_are_not_whole_blocks_fall_back() {
    let r = rules(ft::Q4_K_M);
    let tensors = [
        ("blk.0.attn_q.weight".to_string(), [96, 64, 1, 1], 2),
        ("blk.0.attn_k.weight".to_string(), [100, 64, 1, 1], 2),
    ];
    let mut c = Chooser::new(&r, tensors.iter().map(|(n, _, _)| n.as_str()));
    let mut warnings = Vec::new();
    let mut warn = |s: String| warnings.push(s);
    assert_eq!(
        c.choose(&tensors[0].0, ty::F32, tensors[0].1, 2, &mut warn),
        Ok(ty::Q5_0)
    );
    assert_eq!(
        c.choose(&tensors[1].0, ty::F32, tensors[1].1, 2, &mut warn),
        Ok(ty::F16)
    );
    assert_eq!(c.n_fallback, 2);
    assert!(warnings[1].contains("must use F16"), "{warnings:?}");
    let mut r = rules(ft::Q1_0);
    r.pure = true;
    let mut c = Chooser::new(&r, std::iter::empty());
    let mut warn = |_: String| {};
    assert!(c
        .choose("blk.0.attn_q.weight", ty::F32, [96, 64, 1, 1], 2, &mut warn)
        .is_err());
}

#[test]
fn expert_layers_come_from_their_names() {
    let mut r = rules(ft::Q4_K_M);
    r.n_expert = 4;
    r.n_layer = 2;
    let mut c = Chooser::new(&r, std::iter::empty());
    let mut warn = |_: String| {};
    assert!(c
        .choose("blk.1.ffn_down_exps.weight", ty::F32, [256, 256, 4, 1], 3, &mut warn)
        .is_ok());
    let bad = c.choose("blk.7.ffn_down_exps.weight", ty::F32, [256, 256, 4, 1], 3, &mut warn);
    assert!(bad.unwrap_err().contains("Bad layer 7"));
}

#[test]
fn only_copy_keeps_every_type() {
    let mut r = rules(ft::Q4_0);
    r.only_copy = true;
    let chosen = choose_all(&r, &model(1, false));
    assert!(chosen.iter().all(|(_, t)| *t == ty::F32));
}

#[test]
fn sort_key_is_the_block_number() {
    assert_eq!(block_of("blk.12.attn_q.weight"), 12);
    assert_eq!(block_of("output.weight"), -1);
    assert_eq!(block_of("blk.x.attn_q.weight"), -1);
}

#[test]
fn pruned_layers_renumber_the_rest() {
    let prune = [1, 3];
    let mut p = Pruner::new(&prune);
    let names: Vec<String> = (0..5)
        .map(|il| p.rename(&format!("blk.{il}.attn_q.weight")).unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "blk.0.attn_q.weight",
            "",
            "blk.1.attn_q.weight",
            "",
            "blk.2.attn_q.weight"
        ]
    );
    assert_eq!(p.next_id, 3);
    assert_eq!(p.rename("output.weight").unwrap(), "output.weight");
    assert_eq!(p.original("blk.2.attn_q.weight").unwrap(), "blk.4.attn_q.weight");
    assert!(p.original("blk.9.attn_q.weight").is_err());
}
