//! KV-cache (memory) sequence operations. Sequence ids outside [0, n_seq_max) are refused with a
//! log line (llama.cpp aborts on them); a negative id means "any sequence" where llama.h says so.
//! A NULL memory (what `llama_get_memory` gives for an encoder or a vocab-only model) has nothing
//! in it: every operation quietly does nothing and reports so, as llama.cpp's do.

use super::entry::entry;
use super::handle::{memory, Ctx};
use super::types::*;
use crate::error::{Error, Result};

/// The sequence id as an index, checked against the context.
fn seq(c: &Ctx, seq_id: llama_seq_id) -> Result<usize> {
    usize::try_from(seq_id)
        .ok()
        .filter(|&s| s < c.params.n_seq_max as usize)
        .ok_or_else(|| Error::invalid(format!("seq_id {seq_id} is out of range [0, {})", c.params.n_seq_max)))
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_clear(mem: llama_memory_t, data: bool) {
    entry!((), {
        if mem.is_null() {
            return Ok(());
        }
        memory(mem)?.memory_clear(data);
        Ok(())
    })
}

/// Always succeeds for an attention cache; recurrent state cannot drop part of a sequence's
/// history (false then, nothing changed).
#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_rm(
    mem: llama_memory_t,
    seq_id: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
) -> bool {
    entry!(false, {
        if mem.is_null() {
            return Ok(true);
        }
        let mut c = memory(mem)?;
        let s = if seq_id < 0 { None } else { Some(seq(&c, seq_id)?) };
        Ok(c.memory_seq_rm(s, p0, p1))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_cp(
    mem: llama_memory_t,
    seq_id_src: llama_seq_id,
    seq_id_dst: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
) {
    entry!((), {
        if mem.is_null() {
            return Ok(());
        }
        let mut c = memory(mem)?;
        let (src, dst) = (seq(&c, seq_id_src)?, seq(&c, seq_id_dst)?);
        c.memory_seq_cp(src, dst, p0, p1)
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_keep(mem: llama_memory_t, seq_id: llama_seq_id) {
    entry!((), {
        if mem.is_null() {
            return Ok(());
        }
        let mut c = memory(mem)?;
        let s = seq(&c, seq_id)?;
        c.memory_seq_keep(s);
        Ok(())
    })
}

/// Positions move now; the cached keys are re-rotated before the next decode reads them.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_add(
    mem: llama_memory_t,
    seq_id: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
    delta: llama_pos,
) {
    entry!((), {
        if mem.is_null() {
            return Ok(());
        }
        let mut c = memory(mem)?;
        let s = seq(&c, seq_id)?;
        c.memory_seq_add(s, p0, p1, delta)
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_div(
    mem: llama_memory_t,
    seq_id: llama_seq_id,
    p0: llama_pos,
    p1: llama_pos,
    d: i32,
) {
    entry!((), {
        if mem.is_null() {
            return Ok(());
        }
        let mut c = memory(mem)?;
        let s = seq(&c, seq_id)?;
        if d < 1 {
            return Err(Error::invalid(format!("divisor d = {d} must be positive")));
        }
        c.memory_seq_div(s, p0, p1, d)
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_pos_min(mem: llama_memory_t, seq_id: llama_seq_id) -> llama_pos {
    entry!(-1, {
        if mem.is_null() {
            return Ok(-1);
        }
        let c = memory(mem)?;
        let s = seq(&c, seq_id)?;
        Ok(c.memory_seq_pos_min(s).unwrap_or(-1))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_memory_seq_pos_max(mem: llama_memory_t, seq_id: llama_seq_id) -> llama_pos {
    entry!(-1, {
        if mem.is_null() {
            return Ok(-1);
        }
        let c = memory(mem)?;
        let s = seq(&c, seq_id)?;
        Ok(c.memory_seq_pos_max(s).unwrap_or(-1))
    })
}

/// Keys rotated by one position per token can be turned to new positions by a K-shift, and a
/// recurrent state has only its last position, which can move freely; keys rotated by several
/// (M-RoPE) cannot, as in llama.cpp.
#[no_mangle]
pub unsafe extern "C" fn llama_memory_can_shift(mem: llama_memory_t) -> bool {
    entry!(false, {
        if mem.is_null() {
            return Ok(false);
        }
        Ok(memory(mem)?.can_shift())
    })
}
