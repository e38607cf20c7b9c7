//! Recurrent layers: gathering each sequence's state from the recurrent memory into the ubatch's
//! window (llama.cpp's `build_rs`), and the Mamba and Mamba-2 selective state-space layers that
//! run over them, node for node as llama.cpp builds them so the numbers agree.

use super::{Builder, RecurrentShape};
use crate::error::{Error, Result};
use crate::ggml::{row_size, TensorRef};
use crate::model::hparams::KdaDecay;

/// How a layer reads the gathered states: plain rows, or its own op over the states and the
/// window's copy sources (the scan reads the states where they lie).
type ReadStates<'f> = &'f mut dyn FnMut(&mut Builder, TensorRef, TensorRef) -> Result<TensorRef>;

/// How a gated delta net layer differs between its users. The base scales its projections and
/// projects β and α apart; `fused_beta_alpha`: one plain projection of β and α (per key head, its
/// value heads' β, then their α), plain projections elsewhere too, and the key heads repeated for
/// the value heads here; `sigmoid_gate`: the output norm gated by a sigmoid, not SiLU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaNet {
    pub fused_beta_alpha: bool,
    pub sigmoid_gate: bool,
}

impl Builder<'_> {
    pub fn recurrent_shape(&self) -> Result<RecurrentShape> {
        self.shape
            .recurrent
            .ok_or_else(|| Error::Internal("a recurrent layer in a graph without recurrent state".into()))
    }

    /// The copy-source input and its two parts: the ubatch's sequences and the other cells of
    /// the window (made once per graph).
    fn state_copy(&mut self) -> Result<(TensorRef, TensorRef)> {
        if let Some(views) = self.rs_copy {
            return Ok(views);
        }
        let rs = self.recurrent_shape()?;
        let (n, n_seqs) = (rs.window.n as i64, rs.n_seqs as i64);
        let all = self.g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[n], "rs_s_copy")?;
        self.inputs.s_copy = Some(all);
        let main = self.g.view(all, &[n_seqs], &[], 0)?;
        let extra = self.g.view(all, &[n - n_seqs], &[], n_seqs as usize * 4)?;
        Ok(*self.rs_copy.insert((main, extra)))
    }

    /// The states of `s` ([state_size, cells]) the ubatch's sequences start from, read by
    /// `read` (rows by default). Zeroes the window's fresh cell first and moves the window's other
    /// cells' states into place.
    pub fn gather_states(&mut self, s: TensorRef, state_size: i64, read: Option<ReadStates>) -> Result<TensorRef> {
        let rs = self.recurrent_shape()?;
        let (main, extra) = self.state_copy()?;
        let states = self.g.reshape(s, &[state_size, s.ne()[1]])?;
        let row = states.nb()[1];
        let zero = usize::try_from(rs.window.zero).ok();
        let zero_view = self.g.view(
            states,
            &[if zero.is_some() { state_size } else { 0 }],
            &[],
            zero.unwrap_or(0) * row,
        )?;
        let cleared = self.g.zero_in_place(zero_view)?;
        self.g.expand(cleared);
        let out = match read {
            Some(f) => f(self, states, main)?,
            None => self.g.get_rows(states, main)?,
        };
        self.g.expand(out);
        let moved = self.g.get_rows(states, extra)?;
        let n_extra = (rs.window.n - rs.n_seqs) as i64;
        let dst = self.g.view(
            s,
            &[state_size, n_extra],
            &[s.nb()[1]],
            (rs.window.head + rs.n_seqs) * s.nb()[1],
        )?;
        let copy = self.g.copy_into(moved, dst)?;
        self.g.expand(copy);
        Ok(out)
    }

    /// `blk.{il}.{name}.weight` times `x`, times the weight's scale when the file has one.
    fn ssm_projection(&mut self, il: usize, name: &str, x: TensorRef) -> Result<TensorRef> {
        let w = self.layer_weight(il, &format!("{name}.weight"))?;
        self.linear(w, None, x)
    }

    /// A view of `t` with shape `ne`, strides `nb` (dims 1..) and offset in elements of `t`.
    pub fn sub(&mut self, t: TensorRef, ne: &[i64], nb: &[usize], offset_elems: i64) -> Result<TensorRef> {
        let offset = row_size(t.ggml_type(), offset_elems);
        self.g.view(t, ne, nb, offset).map_err(Error::from)
    }

    /// RMS norm of `x`, times `w` when there is one.
    fn rms_norm_opt(&mut self, x: TensorRef, w: Option<TensorRef>) -> Result<TensorRef> {
        match w {
            Some(w) => self.rms_norm(x, w),
            None => self.g.rms_norm(x, self.hp.rms_eps).map_err(Error::from),
        }
    }

    /// Rollback snapshots the memory keeps per sequence besides the latest state (written by the
    /// layers whose scan can keep them, Mamba-2's).
    fn snapshots(&self) -> usize {
        self.rs.map_or(0, |rs| rs.n_rs_seq())
    }

    /// The tokens' inputs to layer `il`'s convolution, with each sequence's previous window in
    /// front: [d_conv - 1 + n_seq_tokens, channels, n_seqs] (`conv_history`).
    pub fn conv_window(
        &mut self,
        conv_all: TensorRef,
        x: TensorRef,
        channels: i64,
        k: usize,
        fill: bool,
    ) -> Result<TensorRef> {
        let d_conv = i64::from(if self.hp.shortconv_l_cache > 0 {
            self.hp.shortconv_l_cache
        } else {
            self.hp.ssm_d_conv
        });
        self.conv_history(conv_all, x, d_conv - 1, channels, k, fill)
    }

    /// `x` ([channels, n_seq_tokens, n_seqs]) with each sequence's last `cols` inputs, kept in the
    /// state rows of `states`, in front: [cols + n_seq_tokens, channels, n_seqs]. The new last
    /// `cols` go back to the state, and with `k` > 1 those ending up to `k - 1` tokens earlier to
    /// the snapshot planes: those the ubatch reaches, or with `fill` all `k` (a plane older than
    /// the ubatch gets the window it started from, as llama.cpp's delta-net layers write them).
    pub fn conv_history(
        &mut self,
        states: TensorRef,
        x: TensorRef,
        cols: i64,
        channels: i64,
        k: usize,
        fill: bool,
    ) -> Result<TensorRef> {
        let rs = self.recurrent_shape()?;
        let n_seqs = rs.n_seqs as i64;
        let n_seq_tokens = self.shape.n_tokens as i64 / n_seqs;
        let conv = self.gather_states(states, states.ne()[0], None)?;
        let conv = self.g.reshape(conv, &[cols, channels, n_seqs])?;
        let xt = self.g.transpose(x)?;
        let conv_x = self.g.concat(conv, xt, 0)?;
        let nb = conv_x.nb();
        let n_state = cols * channels;
        let row = row_size(states.ggml_type(), n_state);
        let cells = self.rs.map_or(0, |r| r.size());
        let slots = if fill { k } else { (n_seq_tokens as usize).min(k) };
        for slot in 0..slots {
            let offset = (n_seq_tokens as usize).saturating_sub(slot) * nb[0];
            let last = self
                .g
                .view(conv_x, &[cols, channels, n_seqs], &[nb[1], nb[2]], offset)?;
            let at = (slot * cells + rs.window.head) * row;
            let dst = self.g.view(states, &[n_state, n_seqs], &[states.nb()[1]], at)?;
            let saved = self.g.copy_into(last, dst)?;
            self.g.expand(saved);
        }
        Ok(conv_x)
    }

    /// The convolution of `conv_x` with layer `il`'s kernels, its bias (when the layer has one)
    /// and SiLU.
    pub fn conv_silu(&mut self, il: usize, conv_x: TensorRef) -> Result<TensorRef> {
        let w = self.layer_weight(il, "ssm_conv1d.weight")?;
        let mut y = self.g.ssm_conv(conv_x, w)?;
        if let Some(b) = self.layer_weight_opt(il, "ssm_conv1d.bias") {
            y = self.g.add(y, b)?;
        }
        self.g.silu(y).map_err(Error::from)
    }

    /// The scan over the states `ssm_all` for inputs `x` with decays `a`, with the last states
    /// written back (and with `k` > 1 the `k - 1` before them to the snapshot planes). Returns the
    /// scan's result (outputs, then states).
    #[allow(clippy::too_many_arguments)]
    pub fn scan(
        &mut self,
        a: TensorRef,
        ssm_all: TensorRef,
        x: TensorRef,
        dt: TensorRef,
        b: TensorRef,
        c: TensorRef,
        heads: (i64, i64),
        k: usize,
    ) -> Result<TensorRef> {
        let rs = self.recurrent_shape()?;
        let (d_state, n_seqs) = (i64::from(self.hp.ssm_d_state), rs.n_seqs as i64);
        let (head_dim, n_head) = heads;
        let slots = ssm_all.ne()[1];
        let mut read = |bd: &mut Builder, states: TensorRef, ids: TensorRef| -> Result<TensorRef> {
            let s = bd.g.reshape(states, &[d_state, head_dim, n_head, slots])?;
            bd.g.ssm_scan(s, x, dt, a, b, c, ids, k as i64).map_err(Error::from)
        };
        let y = self.gather_states(ssm_all, i64::from(self.hp.n_embd_s()), Some(&mut read))?;
        let n_state = i64::from(self.hp.n_embd_s());
        let x_bytes = row_size(x.ggml_type(), x.ne().iter().product());
        let row = row_size(ssm_all.ggml_type(), n_state);
        let y_row = row_size(y.ggml_type(), n_state);
        let cells = self.rs.map_or(0, |r| r.size());
        let n_written = (x.ne()[2] as usize).min(k) as i64;
        let last = self.g.view(
            y,
            &[n_state, n_seqs, n_written],
            &[y_row, y_row * n_seqs as usize],
            x_bytes,
        )?;
        let dst = self.g.view(
            ssm_all,
            &[n_state, n_seqs, n_written],
            &[ssm_all.nb()[1], cells * row],
            rs.window.head * row,
        )?;
        let saved = self.g.copy_into(last, dst)?;
        self.g.expand(saved);
        Ok(y)
    }

    /// A Mamba layer over `cur` ([n_embd, n_tokens]): input projection to x and the gate z,
    /// causal convolution, the selective scan with per-token Δt, B and C, skip term D, gating
    /// and output projection.
    pub fn mamba_layer(&mut self, il: usize, cur: TensorRef) -> Result<TensorRef> {
        let hp = self.hp;
        let rs = self.recurrent_shape()?;
        let (conv_all, ssm_all) = self.rs_layer(il)?;
        let (d_inner, d_state, dt_rank) = (
            i64::from(hp.ssm_d_inner),
            i64::from(hp.ssm_d_state),
            i64::from(hp.ssm_dt_rank),
        );
        let n_seqs = rs.n_seqs as i64;
        let n_seq_tokens = self.shape.n_tokens as i64 / n_seqs;
        let cur = self.g.reshape(cur, &[i64::from(hp.n_embd), n_seq_tokens, n_seqs])?;
        let xz = self.ssm_projection(il, "ssm_in", cur)?;
        let nb = xz.nb();
        let x = self.sub(xz, &[d_inner, n_seq_tokens, n_seqs], &[nb[1], nb[2]], 0)?;
        let z = self.sub(xz, &[d_inner, n_seq_tokens, n_seqs], &[nb[1], nb[2]], d_inner)?;
        let conv_x = self.conv_window(conv_all, x, d_inner, 1, false)?;
        let x = self.conv_silu(il, conv_x)?;

        let x_db = self.layer_matmul(il, "ssm_x.weight", x)?;
        let nb = x_db.nb();
        let dt = self.sub(x_db, &[dt_rank, n_seq_tokens, n_seqs], &[nb[1], nb[2]], 0)?;
        let bc_shape = [d_state, 1, n_seq_tokens, n_seqs];
        let bc_nb = [d_state as usize * nb[0], nb[1], nb[2]];
        let b = self.sub(x_db, &bc_shape, &bc_nb, dt_rank)?;
        let c = self.sub(x_db, &bc_shape, &bc_nb, dt_rank + d_state)?;
        let norms = [
            self.layer_weight_opt(il, "ssm_dt_norm.weight"),
            self.layer_weight_opt(il, "ssm_b_norm.weight"),
            self.layer_weight_opt(il, "ssm_c_norm.weight"),
        ];
        let (dt, b, c) = if hp.ssm_dt_b_c_rms || norms.iter().all(Option::is_some) {
            (
                self.rms_norm_opt(dt, norms[0])?,
                self.rms_norm_opt(b, norms[1])?,
                self.rms_norm_opt(c, norms[2])?,
            )
        } else {
            (self.g.cont(dt)?, b, c)
        };
        let dt = self.layer_matmul(il, "ssm_dt.weight", dt)?;
        let dt_b = self.layer_weight(il, "ssm_dt.bias")?;
        let dt = self.g.add(dt, dt_b)?;

        let x_in = x;
        let x = self.g.reshape(x, &[1, d_inner, n_seq_tokens, n_seqs])?;
        let a = self.layer_weight(il, "ssm_a")?;
        let y_ssm = self.scan(a, ssm_all, x, dt, b, c, (1, d_inner), 1)?;
        let xnb = x.nb();
        let y = self
            .g
            .view(y_ssm, &[d_inner, n_seq_tokens, n_seqs], &[xnb[2], xnb[3]], 0)?;
        let d = self.layer_weight(il, "ssm_d")?;
        let y = self.gate_ssm(d, y, x_in, z)?;
        let out = self.ssm_projection(il, "ssm_out", y)?;
        let n_embd = i64::from(hp.n_embd);
        self.g
            .reshape(out, &[n_embd, self.shape.n_tokens as i64])
            .map_err(Error::from)
    }

    /// A Mamba-2 layer over `cur` ([n_embd, n_tokens]): one projection to the gate z, the
    /// convolved x, B and C, and per-head Δt; the scan with a scalar decay per head; D, gating,
    /// a grouped RMS norm and the output projection.
    pub fn mamba2_layer(&mut self, il: usize, cur: TensorRef) -> Result<TensorRef> {
        let hp = self.hp;
        let rs = self.recurrent_shape()?;
        let (conv_all, ssm_all) = self.rs_layer(il)?;
        let (d_inner, d_state, n_group) = (
            i64::from(hp.ssm_d_inner),
            i64::from(hp.ssm_d_state),
            i64::from(hp.ssm_n_group),
        );
        let n_head = i64::from(hp.ssm_dt_rank);
        if n_head == 0 || n_group == 0 || d_inner % n_head != 0 || d_inner % n_group != 0 {
            return Err(Error::model(format!(
                "mamba2: inner size {d_inner} must split into {n_head} heads and {n_group} groups"
            )));
        }
        let head_dim = d_inner / n_head;
        let n_seqs = rs.n_seqs as i64;
        let n_seq_tokens = self.shape.n_tokens as i64 / n_seqs;
        let channels = d_inner + 2 * n_group * d_state;

        let zx = self.ssm_projection(il, "ssm_in", cur)?;
        let zx = self.g.reshape(zx, &[zx.ne()[0], n_seq_tokens, n_seqs])?;
        let nb = zx.nb();
        let z = self.sub(
            zx,
            &[head_dim, n_head, n_seq_tokens, n_seqs],
            &[head_dim as usize * nb[0], nb[1], nb[2]],
            0,
        )?;
        let xbc = self.sub(zx, &[channels, n_seq_tokens, n_seqs], &[nb[1], nb[2]], d_inner)?;
        let dt = self.sub(
            zx,
            &[n_head, n_seq_tokens, n_seqs],
            &[nb[1], nb[2]],
            2 * d_inner + 2 * n_group * d_state,
        )?;
        let k = self.snapshots() + 1;
        let conv_x = self.conv_window(conv_all, xbc, channels, k, false)?;
        let xbc = self.conv_silu(il, conv_x)?;

        let nb = xbc.nb();
        let x = self.sub(
            xbc,
            &[head_dim, n_head, n_seq_tokens, n_seqs],
            &[head_dim as usize * nb[0], nb[1], nb[2]],
            0,
        )?;
        let bc_shape = [d_state, n_group, n_seq_tokens, n_seqs];
        let bc_nb = [d_state as usize * nb[0], nb[1], nb[2]];
        let b = self.sub(xbc, &bc_shape, &bc_nb, d_inner)?;
        let c = self.sub(xbc, &bc_shape, &bc_nb, d_inner + n_group * d_state)?;
        let dt = self.g.cont(dt)?;
        let dt_b = self.layer_weight(il, "ssm_dt.bias")?;
        let dt = self.g.add(dt, dt_b)?;

        let a = self.layer_weight(il, "ssm_a")?;
        let y_ssm = self.scan(a, ssm_all, x, dt, b, c, (head_dim, n_head), k)?;
        let xnb1 = x.nb()[1];
        let y = self.g.view(
            y_ssm,
            &[head_dim, n_head, n_seq_tokens, n_seqs],
            &[xnb1, n_head as usize * xnb1, (n_seq_tokens * n_head) as usize * xnb1],
            0,
        )?;
        let d = self.layer_weight(il, "ssm_d")?;
        let mut y = self.gate_ssm(d, y, x, z)?;
        if let Some(w) = self.layer_weight_opt(il, "ssm_norm.weight") {
            y = self.g.reshape(y, &[d_inner / n_group, n_group, n_seq_tokens, n_seqs])?;
            y = self.rms_norm(y, w)?;
        }
        let y = self.g.reshape(y, &[d_inner, self.shape.n_tokens as i64])?;
        let out = self.ssm_projection(il, "ssm_out", y)?;
        Ok(self.name(out, "mamba_out", Some(il)))
    }

    /// The scan's outputs `y` plus the skip term `d`·x, gated by SiLU(z).
    pub fn gate_ssm(&mut self, d: TensorRef, y: TensorRef, x: TensorRef, z: TensorRef) -> Result<TensorRef> {
        let dx = self.g.mul(x, d)?;
        let y = self.g.add(y, dx)?;
        let z = self.g.cont(z)?;
        self.g.swiglu(z, y).map_err(Error::from)
    }

    /// A short-convolution layer over `cur` ([n_embd, n_tokens]): one projection to the
    /// gates B and C and the input x, a causal depthwise convolution of B·x (its window kept as
    /// the layer's recurrent state, and with rollback snapshots the earlier windows too), gated
    /// by C and projected out.
    pub fn shortconv_layer(&mut self, il: usize, cur: TensorRef) -> Result<TensorRef> {
        let rs = self.recurrent_shape()?;
        let (conv_all, _) = self.rs_layer(il)?;
        let n_embd = i64::from(self.hp.n_embd);
        let n_seqs = rs.n_seqs as i64;
        let n_seq_tokens = self.shape.n_tokens as i64 / n_seqs;
        let cur = self.g.reshape(cur, &[n_embd, n_seq_tokens, n_seqs])?;
        let bcx = self.layer_matmul(il, "shortconv.in_proj.weight", cur)?;
        let nb = bcx.nb();
        let chunk =
            |bd: &mut Builder, i: i64| bd.sub(bcx, &[n_embd, n_seq_tokens, n_seqs], &[nb[1], nb[2]], i * n_embd);
        let (b, c, x) = (chunk(self, 0)?, chunk(self, 1)?, chunk(self, 2)?);
        let bx = self.g.mul(b, x)?;
        let k = self.snapshots() + 1;
        let bx = self.conv_window(conv_all, bx, n_embd, k, false)?;
        let kernel = self.layer_weight(il, "shortconv.conv.weight")?;
        let conv = self.g.ssm_conv(bx, kernel)?;
        let y = self.g.mul(c, conv)?;
        let y = self.layer_matmul(il, "shortconv.out_proj.weight", y)?;
        self.g.reshape(y, &[n_embd, n_seq_tokens * n_seqs]).map_err(Error::from)
    }

    /// A gated delta net layer (linear attention with the gated delta rule) over `cur` ([n_embd, n_tokens]):
    /// projections to the convolved q, k, v, the output gate z, the write strengths β and the
    /// decays; a causal convolution; L2-normalised q and k; the gated delta rule over each
    /// sequence's [S, S] state per head (with rollback snapshots when kept); a gated RMS norm and
    /// the output projection.
    pub fn gated_delta_layer(&mut self, il: usize, cur: TensorRef, style: DeltaNet) -> Result<TensorRef> {
        let hp = self.hp;
        let rs = self.recurrent_shape()?;
        let (conv_all, ssm_all) = self.rs_layer(il)?;
        let (d_inner, head_k, n_k_heads, n_v_heads) = (
            i64::from(hp.ssm_d_inner),
            i64::from(hp.ssm_d_state),
            i64::from(hp.ssm_n_group),
            i64::from(hp.ssm_dt_rank),
        );
        if n_k_heads == 0 || n_v_heads == 0 || d_inner % n_v_heads != 0 || n_v_heads % n_k_heads != 0 {
            return Err(Error::model(format!(
                "gated delta net: inner size {d_inner} must split into {n_v_heads} value heads, a multiple of                  {n_k_heads} key heads"
            )));
        }
        let head_v = d_inner / n_v_heads;
        if head_v != head_k {
            return Err(Error::model(format!(
                "gated delta net: value heads of {head_v} and key heads of {head_k} must be equal"
            )));
        }
        let n_seqs = rs.n_seqs as i64;
        let n_seq_tokens = self.shape.n_tokens as i64 / n_seqs;
        let l = Some(il);

        let project = |bd: &mut Builder, name: &str| match style.fused_beta_alpha {
            true => bd.layer_matmul(il, &format!("{name}.weight"), cur),
            false => bd.ssm_projection(il, name, cur),
        };
        let qkv = project(self, "attn_qkv")?;
        let qkv = self.g.reshape(qkv, &[qkv.ne()[0], n_seq_tokens, n_seqs])?;
        let z = project(self, "attn_gate")?;
        let (beta, alpha) = match style.fused_beta_alpha {
            false => {
                let beta = self.ssm_projection(il, "ssm_beta", cur)?;
                let beta = self.g.reshape(beta, &[1, n_v_heads, n_seq_tokens, n_seqs])?;
                let beta = self.g.sigmoid(beta)?;
                let alpha = self.ssm_projection(il, "ssm_alpha", cur)?;
                let alpha = self.g.reshape(alpha, &[n_v_heads, n_seq_tokens, n_seqs])?;
                (beta, alpha)
            }
            true => {
                // One projection: per key head, its value heads' β, then their α.
                let ba = self.layer_matmul(il, "ssm_ba.weight", cur)?;
                let per = n_v_heads / n_k_heads;
                let ba = self.g.reshape(ba, &[2 * per, n_k_heads, n_seq_tokens, n_seqs])?;
                let nb = ba.nb();
                let shape = [per, n_k_heads, n_seq_tokens, n_seqs];
                let b = self.sub(ba, &shape, &[nb[1], nb[2], nb[3]], 0)?;
                let a = self.sub(ba, &shape, &[nb[1], nb[2], nb[3]], per)?;
                let b = self.g.cont(b)?;
                let beta = self.g.sigmoid(b)?;
                let a = self.g.cont(a)?;
                let alpha = self.g.reshape(a, &[n_v_heads, n_seq_tokens, n_seqs])?;
                let beta = self.g.reshape(beta, &[1, n_v_heads, n_seq_tokens, n_seqs])?;
                (beta, alpha)
            }
        };
        let dt_b = self.layer_weight(il, "ssm_dt.bias")?;
        let alpha = self.g.add(alpha, dt_b)?;
        let alpha = self.g.softplus(alpha)?;
        let a = self.layer_weight(il, "ssm_a")?;
        let gate = self.g.mul(alpha, a)?;
        let gate = self.g.reshape(gate, &[1, n_v_heads, n_seq_tokens, n_seqs])?;

        let channels = d_inner + 2 * n_k_heads * head_k;
        let k = self.snapshots() + 1;
        let conv_x = self.conv_window(conv_all, qkv, channels, k, true)?;
        let kernel = self.layer_weight(il, "ssm_conv1d.weight")?;
        let conv = self.g.ssm_conv(conv_x, kernel)?;
        let conv = self.g.silu(conv)?;

        let nb1 = conv.nb()[1];
        let heads = |bd: &mut Builder, dim: i64, n: i64, at: i64| {
            bd.sub(
                conv,
                &[dim, n, n_seq_tokens, n_seqs],
                &[row_size(conv.ggml_type(), dim), nb1, nb1 * n_seq_tokens as usize],
                at,
            )
        };
        let q = heads(self, head_k, n_k_heads, 0)?;
        let kk = heads(self, head_k, n_k_heads, head_k * n_k_heads)?;
        let v = heads(self, head_v, n_v_heads, 2 * head_k * n_k_heads)?;
        let mut q = self.l2_norm(q)?;
        let mut kk = self.l2_norm(kk)?;
        if style.fused_beta_alpha && n_k_heads != n_v_heads {
            // Each key head repeated for its value heads, interleaved, as llama.cpp does here.
            let rep = n_v_heads / n_k_heads;
            let repeat = |bd: &mut Builder, t: TensorRef| -> Result<TensorRef> {
                let t = bd.g.reshape(t, &[head_k, 1, n_k_heads, n_seq_tokens * n_seqs])?;
                let t = bd.g.repeat(t, [head_k, rep, n_k_heads, n_seq_tokens * n_seqs])?;
                bd.g.reshape(t, &[head_k, n_v_heads, n_seq_tokens, n_seqs])
                    .map_err(Error::from)
            };
            q = repeat(self, q)?;
            kk = repeat(self, kk)?;
        }
        let output = self.delta_rule(ssm_all, [q, kk, v], gate, beta, k)?;

        // Gated norm: RMS norm times the layer's weight, times SiLU (or sigmoid) of z.
        let z = self.g.reshape(z, &[head_v, n_v_heads, n_seq_tokens, n_seqs])?;
        let norm_w = self.layer_weight(il, "ssm_norm.weight")?;
        let normed = self.rms_norm(output, norm_w)?;
        let z = match style.sigmoid_gate {
            true => self.g.sigmoid(z)?,
            false => self.g.silu(z)?,
        };
        let y = self.g.mul(normed, z)?;
        let y = self.g.reshape(y, &[head_v * n_v_heads, n_seq_tokens, n_seqs])?;
        let y = match style.fused_beta_alpha {
            true => self.layer_matmul(il, "ssm_out.weight", y)?,
            false => self.ssm_projection(il, "ssm_out", y)?,
        };
        let y = self.name(y, "linear_attn_out", l);
        self.g
            .reshape(y, &[i64::from(hp.n_embd), n_seq_tokens * n_seqs])
            .map_err(Error::from)
    }

    /// The gated delta rule (`ggml_gated_delta_net`) over queries, keys and values `qkv`
    /// ([S, heads, n_seq_tokens, n_seqs]) from each sequence's gathered state in `ssm_all`, with
    /// decays `gate` and write strengths `beta`; the last state (and with `k` > 1 the snapshots
    /// before it, the latest first) goes back to the state rows. Returns the outputs,
    /// [S, H_v, n_seq_tokens, n_seqs].
    fn delta_rule(
        &mut self,
        ssm_all: TensorRef,
        qkv: [TensorRef; 3],
        gate: TensorRef,
        beta: TensorRef,
        k: usize,
    ) -> Result<TensorRef> {
        let rs = self.recurrent_shape()?;
        let [q, kk, v] = qkv;
        let [head_v, n_v_heads, n_seq_tokens, n_seqs] = v.ne();
        let n_state = i64::from(self.hp.n_embd_s());
        let state = self.gather_states(ssm_all, n_state, None)?;
        let state = self.g.reshape(state, &[head_v, head_v, n_v_heads, n_seqs])?;
        let out = self.g.gated_delta_net(q, kk, v, gate, beta, state, k as i64)?;
        let f = |n: i64| row_size(out.ggml_type(), n);
        let output = self.g.view(
            out,
            &[head_v, n_v_heads, n_seq_tokens, n_seqs],
            &[f(head_v), f(head_v * n_v_heads), f(head_v * n_v_heads * n_seq_tokens)],
            0,
        )?;
        // The last states (the latest first) go to the state rows and their snapshot planes.
        let n_written = n_seq_tokens.min(k as i64);
        let row = row_size(ssm_all.ggml_type(), n_state);
        let cells = self.rs.map_or(0, |r| r.size());
        let src = self.g.view(
            out,
            &[n_state, n_seqs, n_written],
            &[f(n_state), f(n_state * n_seqs)],
            f(head_v * n_v_heads * n_seq_tokens * n_seqs),
        )?;
        let dst = self.g.view(
            ssm_all,
            &[n_state, n_seqs, n_written],
            &[ssm_all.nb()[1], cells * row],
            rs.window.head * row,
        )?;
        let saved = self.g.copy_into(src, dst)?;
        self.g.expand(saved);
        Ok(output)
    }

    /// A Kimi delta attention layer (KDA: linear attention with per-channel decays) over `cur`
    /// ([n_embd, n_tokens]): queries, keys and values each projected and
    /// convolved with its own kernel (their windows side by side in the layer's convolution
    /// state, so one window serves the three; `fill`: every rollback plane written, else only
    /// those the ubatch reaches), L2-normalised queries and keys, a decay per key dimension
    /// (`HParams::kda_decay`, from f_a or f_b after f_a), a sigmoid write strength per head, the
    /// gated delta rule (with rollback snapshots when kept), then an RMS norm gated by a sigmoid
    /// and the output projection. No projection here is scaled or biased, as in llama.cpp's
    /// graphs.
    pub fn kda_layer(&mut self, il: usize, cur: TensorRef, fill: bool) -> Result<TensorRef> {
        let hp = self.hp;
        let rs = self.recurrent_shape()?;
        let (conv_all, ssm_all) = self.rs_layer(il)?;
        let (head, n_head) = (i64::from(hp.ssm_d_state), i64::from(hp.ssm_n_group));
        let d_inner = head * n_head;
        let n_seqs = rs.n_seqs as i64;
        let n_tokens = self.shape.n_tokens as i64;
        let n_seq_tokens = n_tokens / n_seqs;

        let qkv = match self.layer_weight_opt(il, "attn_qkv.weight") {
            Some(w) => self.g.mul_mat(w, cur)?,
            None => {
                let q = self.layer_matmul(il, "attn_q.weight", cur)?;
                let k = self.layer_matmul(il, "attn_k.weight", cur)?;
                let v = self.layer_matmul(il, "attn_v.weight", cur)?;
                let qk = self.g.concat(q, k, 0)?;
                self.g.concat(qk, v, 0)?
            }
        };
        let qkv = self.g.reshape(qkv, &[3 * d_inner, n_seq_tokens, n_seqs])?;
        let k = self.snapshots() + 1;
        let conv_x = self.conv_window(conv_all, qkv, 3 * d_inner, k, fill)?;
        let nb = conv_x.nb();
        let d_conv = i64::from(hp.ssm_d_conv);
        let mut convolved = Vec::with_capacity(3);
        for (i, part) in ["q", "k", "v"].into_iter().enumerate() {
            let window = self.g.view(
                conv_x,
                &[conv_x.ne()[0], d_inner, n_seqs],
                &[nb[1], nb[2]],
                i * d_inner as usize * nb[1],
            )?;
            let kernel = self.layer_weight(il, &format!("ssm_conv1d_{part}.weight"))?;
            let kernel = self.g.reshape(kernel, &[d_conv, d_inner])?;
            let y = self.g.ssm_conv(window, kernel)?;
            let y = self.g.silu(y)?;
            convolved.push(self.g.reshape(y, &[head, n_head, n_seq_tokens, n_seqs])?);
        }
        let q = self.l2_norm(convolved[0])?;
        let kk = self.l2_norm(convolved[1])?;

        // The decay's projection: low rank (f_b after f_a), or f_a alone at full rank.
        let decay = self.layer_matmul(il, "ssm_f_a.weight", cur)?;
        let decay = match self.layer_weight_opt(il, "ssm_f_b.weight") {
            Some(w) => self.g.mul_mat(w, decay)?,
            None => decay,
        };
        let dt_b = self.layer_weight(il, "ssm_dt.bias")?;
        let decay = self.g.add(decay, dt_b)?;
        let a = self.layer_weight(il, "ssm_a")?;
        let a = self.g.reshape(a, &[1, n_head, 1])?;
        let gate = match hp.kda_decay {
            KdaDecay::Softplus => {
                let x = self.g.softplus(decay)?;
                let x = self.g.reshape(x, &[head, n_head, n_tokens])?;
                self.g.mul(x, a)?
            }
            KdaDecay::LowerBound(bound) | KdaDecay::SafeGate(bound) => {
                let x = self.g.reshape(decay, &[head, n_head, n_tokens])?;
                let mut x = self.g.mul(x, a)?;
                if matches!(hp.kda_decay, KdaDecay::LowerBound(_)) {
                    x = self.g.scale(x, -1.0)?;
                }
                let x = self.g.sigmoid(x)?;
                self.g.scale(x, bound)?
            }
        };
        let gate = self.g.reshape(gate, &[head, n_head, n_seq_tokens, n_seqs])?;
        let beta = self.layer_matmul(il, "ssm_beta.weight", cur)?;
        let beta = self.g.reshape(beta, &[1, n_head, n_seq_tokens, n_seqs])?;
        let beta = self.g.sigmoid(beta)?;

        let output = self.delta_rule(ssm_all, [q, kk, convolved[2]], gate, beta, k)?;
        let output = self.g.reshape(output, &[head, n_head, n_tokens])?;
        // The output gate: one full-rank projection (`ssm_g`, or `ssm_g_a` alone),
        // or low rank (g_b after g_a).
        let g = match self.layer_weight_opt(il, "ssm_g.weight") {
            Some(w) => self.g.mul_mat(w, cur)?,
            None => {
                let g = self.layer_matmul(il, "ssm_g_a.weight", cur)?;
                match self.layer_weight_opt(il, "ssm_g_b.weight") {
                    Some(w) => self.g.mul_mat(w, g)?,
                    None => g,
                }
            }
        };
        let g = self.g.reshape(g, &[head, n_head, n_tokens])?;
        let norm_w = self.layer_weight(il, "ssm_norm.weight")?;
        let normed = self.rms_norm(output, norm_w)?;
        let g = self.g.sigmoid(g)?;
        let y = self.g.mul(normed, g)?;
        let y = self.g.reshape(y, &[d_inner, n_tokens])?;
        let y = self.layer_matmul(il, "attn_output.weight", y)?;
        Ok(self.name(y, "kda_out", Some(il)))
    }

    /// `x / ‖x‖` per row, as llama.cpp's delta-net layers compute it: an RMS norm with the
    /// epsilon divided by the row length, scaled by 1/√n.
    fn l2_norm(&mut self, x: TensorRef) -> Result<TensorRef> {
        let n = x.ne()[0] as f32;
        let eps = if self.hp.delta_l2_eps > 0.0 {
            self.hp.delta_l2_eps
        } else {
            self.hp.rms_eps
        };
        let y = self.g.rms_norm(x, eps / n)?;
        self.g.scale(y, 1.0 / n.sqrt()).map_err(Error::from)
    }

    pub fn rs_layer(&self, il: usize) -> Result<(TensorRef, TensorRef)> {
        self.rs
            .ok_or_else(|| Error::Internal("a recurrent layer without recurrent memory".into()))?
            .layer(il)
    }
}
