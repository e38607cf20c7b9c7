//! Timings and counters: what `llama_perf_context` reports, and the counters that show graph reuse
//! and allocation behaviour.

use crate::model::Model;

/// Timings in microseconds, as llama.cpp keeps them.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerfData {
    pub t_start_us: i64,
    pub t_load_us: i64,
    /// Prompt processing (batches of more than one token).
    pub t_p_eval_us: i64,
    pub n_p_eval: i32,
    /// Generation (single-token batches).
    pub t_eval_us: i64,
    pub n_eval: i32,
}

impl PerfData {
    pub fn new(model: &Model) -> PerfData {
        PerfData {
            t_start_us: model.t_start_us(),
            t_load_us: model.t_load_us(),
            ..PerfData::default()
        }
    }

    pub fn reset(&mut self) {
        self.t_p_eval_us = 0;
        self.n_p_eval = 0;
        self.t_eval_us = 0;
        self.n_eval = 0;
    }
}

/// What happened to graphs and buffers, for tests and `llama_perf_context.n_reused`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Graphs built during decodes (reservation at creation not counted).
    pub graphs_built: u64,
    /// Ubatches that ran the previous graph unchanged: nothing built, nothing allocated.
    pub graphs_reused: u64,
    /// Times the scheduler had to grow its compute buffers after creation.
    pub compute_buffer_grows: u64,
    /// Compute buffer size after reservation (or the last growth).
    pub compute_buffer_bytes: usize,
    /// K-shift passes applied after sequence position changes.
    pub k_shifts: u64,
}
