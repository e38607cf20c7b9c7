//! Tensors of one memory (a KV cache, recurrent states) spread over buffer types: each layer's in
//! the memory of its layer's device. Each buffer type gets an arena and one buffer.

use super::{Arena, BufferType, BufferTypeId, OwnedBuffer, RawType, TensorRef};

/// Tensors being created, grouped by buffer type; [`Placed::allocate`] gives them memory.
pub struct Placed {
    groups: Vec<(BufferType, Arena)>,
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

    pub fn new_tensor(&mut self, buft: BufferType, t: RawType, ne: &[i64], name: &str) -> Result<TensorRef, String> {
        let i = match self.groups.iter().position(|(b, _)| *b == buft) {
            Some(i) => i,
            None => {
                self.groups.push((buft, Arena::new(self.capacity)?));
                self.groups.len() - 1
            }
        };
        self.groups[i].1.new_tensor(t, ne, name)
    }

    /// Allocate every group's tensors in a buffer of its type, zeroed (fresh memory may hold NaN
    /// patterns, and masked or empty rows must read as numbers).
    pub fn allocate(self) -> Result<PlacedBuffers, String> {
        let mut parts = Vec::with_capacity(self.groups.len());
        for (buft, arena) in self.groups {
            let buffer = OwnedBuffer::for_arena(&arena, buft).map_err(|e| format!("{}: {e}", buft.name()))?;
            buffer.clear(0);
            parts.push((buffer, arena));
        }
        Ok(PlacedBuffers { parts })
    }
}

/// The buffers of a [`Placed`] set of tensors.
pub struct PlacedBuffers {
    // A buffer is released before its arena (tuple fields drop in order).
    parts: Vec<(OwnedBuffer, Arena)>,
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
