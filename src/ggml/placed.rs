//! Tensors of one memory (a KV cache, recurrent states) spread over buffer types: each layer's in
//! the memory of its layer's device. Each buffer type gets an arena and one buffer.

use super::{Arena, BufferType, BufferTypeId, GgmlError, OwnedBuffer, RawType, TensorRef};

/// Tensors being created, grouped by buffer type; [`Placed::allocate`] gives them memory.
pub struct Placed {
    /// Per buffer type its arena and whether any of its tensors has bytes.
    groups: Vec<(BufferType, Arena, bool)>,
    capacity: usize,
}

impl Placed {
    /// Room for up to `capacity` tensors in each buffer type.
    pub fn new(capacity: usize) -> Placed {
        Placed {
            groups: Vec::new(),
            capacity,
        }
    }

    pub fn new_tensor(&mut self, buft: BufferType, t: RawType, ne: &[i64], name: &str) -> Result<TensorRef, GgmlError> {
        let i = match self.groups.iter().position(|(b, _, _)| *b == buft) {
            Some(i) => i,
            None => {
                self.groups.push((buft, Arena::new(self.capacity)?, false));
                self.groups.len() - 1
            }
        };
        let tensor = self.groups[i].1.new_tensor(t, ne, name)?;
        self.groups[i].2 |= tensor.nbytes() > 0;
        Ok(tensor)
    }

    /// Allocate every group's tensors in a buffer of its type, zeroed (fresh memory may hold NaN
    /// patterns, and masked or empty rows must read as numbers). A group of empty tensors only (the
    /// attention cache of a device holding only recurrent layers) gets no buffer: ggml allocates
    /// none for zero bytes, and nothing reads or writes such a tensor's bytes.
    pub fn allocate(self) -> Result<PlacedBuffers, GgmlError> {
        let mut parts = Vec::with_capacity(self.groups.len());
        let mut empty = Vec::new();
        for (buft, arena, has_bytes) in self.groups {
            if !has_bytes {
                empty.push(arena);
                continue;
            }
            let buffer =
                OwnedBuffer::for_arena(&arena, buft).map_err(|e| GgmlError(format!("{}: {e}", buft.name())))?;
            buffer.clear(0);
            parts.push((buffer, arena));
        }
        Ok(PlacedBuffers { parts, _empty: empty })
    }
}

/// The buffers of a [`Placed`] set of tensors.
pub struct PlacedBuffers {
    // A buffer is released before its arena (tuple fields drop in order).
    parts: Vec<(OwnedBuffer, Arena)>,
    /// The descriptions of tensors without bytes.
    _empty: Vec<Arena>,
}

impl PlacedBuffers {
    pub fn clear(&self, value: u8) {
        self.parts.iter().for_each(|(b, _)| b.clear(value));
    }

    pub fn size(&self) -> usize {
        self.parts.iter().map(|(b, _)| b.size()).sum()
    }

    /// Bytes per buffer type.
    pub fn memory_breakdown(&self) -> Vec<(BufferTypeId, usize)> {
        self.parts.iter().map(|(b, _)| (b.buffer_type(), b.size())).collect()
    }
}
