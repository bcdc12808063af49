//! The quantized CPU engine: each decoder layer is one pass over host buffers — RMSNorm, the
//! q/k/v projections as one matrix product, RoPE, the host KV cache and attention, the output
//! projection, the gate and up projections as one product, SwiGLU, the down projection and both
//! residuals — with no burn op and no tensor round trip inside the stack. Matrix products,
//! attention and SwiGLU split their rows over the kernels' persistent worker pool; scratch
//! buffers are kept per thread and reused.
//!
//! Every step treats each token's row on its own, in an order that depends only on the row (see
//! `draftsmith_kernels` and [`crate::host`]), so a token's outputs are bit-identical whatever
//! batch or draft tree it is computed in, in either activation mode.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use draftsmith_kernels::{rowops, Activations, Pool, QMatrix};

use crate::host::{self, HostKv, Visibility};

/// Several projections of the same input as few matrices as their formats allow
/// ([`WeightSource::load_quant_parts`](crate::source::WeightSource::load_quant_parts)); outputs
/// are the projections' rows side by side, biases added.
#[derive(Debug, Clone)]
pub(crate) struct Proj {
    parts: Vec<Arc<QMatrix>>,
    rows: usize,
    bias: Option<Vec<f32>>,
}

impl Proj {
    /// `parts`: the matrices, rows one after another; `bias`: one value per row of all of them.
    pub(crate) fn new(parts: Vec<QMatrix>, bias: Option<Vec<f32>>) -> Self {
        let rows = parts.iter().map(|m| m.rows()).sum();
        debug_assert!(bias.as_ref().is_none_or(|b| b.len() == rows), "one bias per row");
        Self { parts: parts.into_iter().map(Arc::new).collect(), rows, bias }
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Weight bytes and multiply-adds per token.
    fn footprint(&self) -> (usize, usize) {
        self.parts.iter().fold((0, 0), |(b, m), p| (b + p.n_bytes(), m + p.rows() * p.cols()))
    }

    /// `out[n, rows] = x[n, cols] · Wᵀ + b`.
    fn forward(&self, mode: Activations, x: &[f32], n: usize, out: &mut Vec<f32>) {
        out.resize(n * self.rows, 0.0);
        let timer = Phase::start();
        if let [m] = self.parts.as_slice() {
            m.matmul_mode(mode, x, n, out);
        } else {
            let mut part = Vec::new();
            let mut at = 0;
            for m in &self.parts {
                part.resize(n * m.rows(), 0.0);
                m.matmul_mode(mode, x, n, &mut part);
                for (dst, src) in out.chunks_mut(self.rows).zip(part.chunks(m.rows())) {
                    dst[at..at + m.rows()].copy_from_slice(src);
                }
                at += m.rows();
            }
        }
        timer.stop(&PROFILE.matrices);
        if let Some(b) = &self.bias {
            for row in out.chunks_mut(self.rows) {
                row.iter_mut().zip(b).for_each(|(y, b)| *y += b);
            }
        }
    }
}

/// One decoder layer's weights on the host.
#[derive(Debug, Clone)]
pub(crate) struct HostLayer {
    pub attn_norm: Vec<f32>,
    /// q, k and v rows, in that order.
    pub qkv: Proj,
    pub o: Proj,
    pub mlp_norm: Vec<f32>,
    /// gate rows, then up rows.
    pub gate_up: Proj,
    pub down: Proj,
}

/// Shapes the host stack needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dims {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub eps: f32,
}

/// The decoder stack of the quantized CPU path.
#[derive(Debug, Clone)]
pub(crate) struct HostStack {
    pub layers: Vec<HostLayer>,
    /// The final norm's weight.
    pub final_norm: Vec<f32>,
    pub dims: Dims,
    pub activations: Activations,
    pub kv_keys: crate::load::KvKeys,
}

impl HostStack {
    /// Weight bytes and multiply-adds per token of every layer's projections.
    pub(crate) fn footprint(&self) -> (usize, usize) {
        let mut total = (0, 0);
        for l in &self.layers {
            for p in [&l.qkv, &l.o, &l.gate_up, &l.down] {
                let (b, m) = p.footprint();
                total = (total.0 + b, total.1 + m);
            }
        }
        total
    }
}

/// Per-thread scratch buffers, reused between passes.
#[derive(Default)]
struct Scratch {
    h: Vec<f32>,
    qkv: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    proj: Vec<f32>,
    gate_up: Vec<f32>,
    act: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// What one pass needs besides the weights and the residual stream.
pub(crate) struct PassInput<'a> {
    pub cos: &'a [f32],
    pub sin: &'a [f32],
    pub visibility: Visibility<'a>,
    pub cached: usize,
}

impl HostStack {
    /// Runs every layer over the residual stream `x` (`[n, hidden]`, updated in place), writing
    /// each layer's keys and values at `input.cached..` of `kv`. `query(layer, q)` receives
    /// each layer's rotated queries (`[n, heads·head_dim]`).
    pub(crate) fn run(
        &self,
        x: &mut [f32],
        n: usize,
        input: &PassInput<'_>,
        kv: &mut HostKv,
        query: &mut dyn FnMut(usize, &[f32]),
    ) {
        draftsmith_kernels::pool::with_thread_scratch(&SCRATCH, |s: &mut Scratch| {
            for (i, layer) in self.layers.iter().enumerate() {
                self.layer(i, layer, x, n, input, kv, query, s);
            }
        });
    }

    #[allow(clippy::too_many_arguments)]
    fn layer(
        &self,
        i: usize,
        l: &HostLayer,
        x: &mut [f32],
        n: usize,
        input: &PassInput<'_>,
        kv: &mut HostKv,
        query: &mut dyn FnMut(usize, &[f32]),
        s: &mut Scratch,
    ) {
        let d = self.dims;
        let (qw, kw) = (d.heads * d.head_dim, d.kv_heads * d.head_dim);
        let mode = self.activations;
        // Attention block.
        s.h.resize(x.len(), 0.0);
        rowops::rms_norm(x, &l.attn_norm, d.eps, &mut s.h);
        l.qkv.forward(mode, &s.h, n, &mut s.qkv);
        // Each row's q and k rotated out of the fused product's row (one pass, no copy first), v
        // copied; every value of the three buffers is written.
        s.q.resize(n * qw, 0.0);
        s.k.resize(n * kw, 0.0);
        s.v.resize(n * kw, 0.0);
        let hd = d.head_dim;
        for (r, row) in s.qkv.chunks(l.qkv.rows()).enumerate() {
            let (cos, sin) = (&input.cos[r * hd..][..hd], &input.sin[r * hd..][..hd]);
            host::rope_heads(&row[..qw], cos, sin, &mut s.q[r * qw..][..qw]);
            host::rope_heads(&row[qw..qw + kw], cos, sin, &mut s.k[r * kw..][..kw]);
            s.v[r * kw..][..kw].copy_from_slice(&row[qw + kw..qw + 2 * kw]);
        }
        query(i, &s.q);
        kv.write(i, input.cached, &s.k, &s.v);
        let t = Phase::start();
        kv.attend(i, &s.q, d.heads, &input.visibility, &mut s.attn);
        t.stop(&PROFILE.attention);
        l.o.forward(mode, &s.attn, n, &mut s.proj);
        x.iter_mut().zip(&s.proj).for_each(|(a, b)| *a += b);
        // MLP block.
        rowops::rms_norm(x, &l.mlp_norm, d.eps, &mut s.h);
        l.gate_up.forward(mode, &s.h, n, &mut s.gate_up);
        s.act.resize(n * d.ffn, 0.0);
        let gu = &s.gate_up;
        Pool::global().for_each_chunk(&mut s.act, d.ffn, n > 1, |r, out| {
            let row = &gu[r * 2 * d.ffn..][..2 * d.ffn];
            rowops::silu_mul(&row[..d.ffn], &row[d.ffn..], out);
        });
        l.down.forward(mode, &s.act, n, &mut s.proj);
        x.iter_mut().zip(&s.proj).for_each(|(a, b)| *a += b);
    }
}

/// Where the time of the quantized CPU path goes, when [`set_profiling`] is on: nanoseconds in
/// matrix products (the LM head included) and in attention; the rest of a pass is everything
/// else (norms, RoPE, SwiGLU, residuals, cache writes, tensor copies).
#[derive(Debug, Default)]
pub(crate) struct Profile {
    pub matrices: AtomicU64,
    pub attention: AtomicU64,
}

pub(crate) static PROFILE: Profile = Profile { matrices: AtomicU64::new(0), attention: AtomicU64::new(0) };
static PROFILING: AtomicBool = AtomicBool::new(false);

/// A running phase timer (a no-op unless profiling is on).
pub(crate) struct Phase(Option<Instant>);

impl Phase {
    pub(crate) fn start() -> Self {
        Self(PROFILING.load(Ordering::Relaxed).then(Instant::now))
    }

    pub(crate) fn stop(self, into: &AtomicU64) {
        if let Some(t) = self.0 {
            into.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// Time split of the quantized CPU path since the last [`take_profile`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProfileSplit {
    pub matrices_s: f64,
    pub attention_s: f64,
}

/// Turns the per-phase timing of the quantized CPU path on or off (off by default; it adds a
/// clock read per phase).
pub fn set_profiling(on: bool) {
    PROFILING.store(on, Ordering::Relaxed);
}

/// The time split accumulated since the last call, and resets it.
pub fn take_profile() -> ProfileSplit {
    let take = |a: &AtomicU64| a.swap(0, Ordering::Relaxed) as f64 * 1e-9;
    ProfileSplit { matrices_s: take(&PROFILE.matrices), attention_s: take(&PROFILE.attention) }
}
