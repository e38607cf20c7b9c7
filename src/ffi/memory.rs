//! KV-cache (memory) sequence operations.

use super::not_implemented;
use super::types::*;
use std::ffi::c_int;

#[no_mangle]
pub unsafe extern "C" fn llama_memory_clear(mem: llama_memory_t, data: bool) {
    let _ = (mem, data);
    not_implemented("llama_memory_clear", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_rm(
    mem: llama_memory_t,
    seq_id: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
) -> bool {
    let _ = (mem, seq_id, p0, p1);
    not_implemented("llama_memory_seq_rm", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_cp(
    mem: llama_memory_t,
    seq_id_src: llama_seq_id,
    seq_id_dst: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
) {
    let _ = (mem, seq_id_src, seq_id_dst, p0, p1);
    not_implemented("llama_memory_seq_cp", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_keep(mem: llama_memory_t, seq_id: llama_seq_id) {
    let _ = (mem, seq_id);
    not_implemented("llama_memory_seq_keep", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_add(
    mem: llama_memory_t,
    seq_id: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
    delta: llama_pos,
) {
    let _ = (mem, seq_id, p0, p1, delta);
    not_implemented("llama_memory_seq_add", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_div(
    mem: llama_memory_t,
    seq_id: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
    d: c_int,
) {
    let _ = (mem, seq_id, p0, p1, d);
    not_implemented("llama_memory_seq_div", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_pos_min(mem: llama_memory_t, seq_id: llama_seq_id) -> llama_pos {
    let _ = (mem, seq_id);
    not_implemented("llama_memory_seq_pos_min", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_pos_max(mem: llama_memory_t, seq_id: llama_seq_id) -> llama_pos {
    let _ = (mem, seq_id);
    not_implemented("llama_memory_seq_pos_max", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_can_shift(mem: llama_memory_t) -> bool {
    let _ = mem;
    not_implemented("llama_memory_can_shift", false)
}
