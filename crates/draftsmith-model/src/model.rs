//! The Llama / Qwen2 decoder. Modules hold tensors only; loading lives in `load.rs` and decode
//! loops live in other crates.

use burn::tensor::{activation, backend::Backend, Int, Tensor, TensorData};

use crate::cache::KvCache;
use crate::config::ModelConfig;
use crate::embed::Embeddings;
use crate::error::ModelError;
use crate::fused::{HostStack, PassInput, Phase, PROFILE};
use crate::host;
use crate::layers::{Linear, LinearWeight, RmsNorm, Rope, RopeTables};

/// Which key positions each new token may attend to.
#[derive(Debug, Clone, PartialEq)]
pub enum AttentionMask {
    /// New token `i` sees the whole cache and new tokens `0..=i`.
    Causal,
    /// Row-major `[n_new, cache_len + n_new]`, `true` = visible. Lets a flattened draft tree
    /// (siblings at the same position) be verified in one pass.
    Visible(Vec<bool>),
}

/// Which positions get logits ([`Model::forward`]; [`Model::forward_hidden`] computes none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsSelect {
    All,
    Last,
}

/// What [`Model::forward`] returns; rows follow the input tokens.
#[derive(Debug, Clone)]
pub struct ForwardOutput<B: Backend> {
    /// `[n, vocab]` (`[1, vocab]` with [`LogitsSelect::Last`]).
    pub logits: Tensor<B, 2>,
    /// Last decoder layer output before the final norm, `[n, hidden]` (TokenSwift heads).
    pub hidden_prenorm: Tensor<B, 2>,
    /// After the final norm, `[n, hidden]` (ReDrafter).
    pub hidden_final: Tensor<B, 2>,
}

/// What [`Model::forward_hidden`] returns: hidden states only, rows following the input tokens.
#[derive(Debug, Clone)]
pub struct HiddenOutput<B: Backend> {
    /// Last decoder layer output before the final norm, `[n, hidden]`.
    pub hidden_prenorm: Tensor<B, 2>,
    /// After the final norm, `[n, hidden]`.
    pub hidden_final: Tensor<B, 2>,
}

/// A tensor's values on the host as f32, on any backend: the one device → host copy of logits
/// and hidden states that decoding, distillation and the eval read.
pub fn host_f32<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    // `into_vec`: the tensor's own buffer where the backend can give it up (no copy of a
    // verify pass's logits, 1.5 MB for 8 rows of SmolLM2).
    t.into_data().convert::<f32>().into_vec::<f32>().expect("a float tensor")
}

/// See [`Model::matrix_footprint`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MatrixFootprint {
    /// Bytes of matrix weights read by one pass.
    pub bytes: usize,
    /// Multiply-adds per token in the matrix products.
    pub macs_per_token: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct Attention<B: Backend> {
    pub q: Linear<B>,
    pub k: Linear<B>,
    pub v: Linear<B>,
    pub o: Linear<B>,
}

#[derive(Debug, Clone)]
pub(crate) struct Mlp<B: Backend> {
    pub gate: Linear<B>,
    pub up: Linear<B>,
    pub down: Linear<B>,
}

#[derive(Debug, Clone)]
pub(crate) struct Block<B: Backend> {
    pub attn_norm: RmsNorm<B>,
    pub attn: Attention<B>,
    pub mlp_norm: RmsNorm<B>,
    pub mlp: Mlp<B>,
}

impl<B: Backend> Block<B> {
    /// The block's seven projections: q, k, v, o, gate, up, down.
    pub(crate) fn linears(&self) -> [&Linear<B>; 7] {
        let (a, m) = (&self.attn, &self.mlp);
        [&a.q, &a.k, &a.v, &a.o, &m.gate, &m.up, &m.down]
    }
}

/// A decoder-only transformer of the Llama family.
#[derive(Debug, Clone)]
pub struct Model<B: Backend> {
    pub(crate) config: ModelConfig,
    /// `[vocab, hidden]` token embeddings (shared, frozen, with drafters).
    pub(crate) embed: Embeddings<B>,
    pub(crate) blocks: Vec<Block<B>>,
    pub(crate) norm: RmsNorm<B>,
    pub(crate) lm_head: Linear<B>,
    pub(crate) rope: Rope,
    pub(crate) device: B::Device,
    /// The quantized CPU path ([`crate::fused`]): set when every projection and the LM head use
    /// the quantized CPU kernels; `blocks` is then empty and the stack runs on host buffers.
    pub(crate) host: Option<HostStack>,
}

impl<B: Backend> Model<B> {
    /// The activation mode of the quantized CPU path; `None` on the dense path.
    pub fn activations(&self) -> Option<draftsmith_kernels::Activations> {
        self.host.as_ref().map(|h| h.activations)
    }

    /// The quantized CPU path's key cache (`None` on the dense path).
    pub fn kv_keys(&self) -> Option<crate::load::KvKeys> {
        self.host.as_ref().map(|h| h.kv_keys)
    }

    /// Whether a token's logits are bit-identical whether it is decoded alone or verified
    /// inside a multi-token pass: true on the quantized CPU path (its kernels and attention
    /// reduce in a fixed order), not promised by burn's dense kernels on any backend.
    pub fn batch_invariant(&self) -> bool {
        self.host.is_some()
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn device(&self) -> &B::Device {
        &self.device
    }

    /// The token-embedding matrix `[vocab, hidden]` (from a GGUF file, dequantized on each
    /// call: the model embeds tokens from the stored blocks).
    pub fn embeddings(&self) -> Tensor<B, 2> {
        self.embed.table(&self.device)
    }

    /// The bytes of matrix weights one forward pass reads, and the multiply-adds each token
    /// adds (every projection and the LM head; attention excluded).
    pub fn matrix_footprint(&self) -> MatrixFootprint {
        let mut f = MatrixFootprint::default();
        let mut add_linear = |l: &Linear<B>| match &l.weight {
            LinearWeight::Quant(q) => {
                f.bytes += q.n_bytes();
                f.macs_per_token += q.rows() * q.cols();
            }
            LinearWeight::Dense(w) => {
                let [r, c] = w.dims();
                f.bytes += r * c * std::mem::size_of::<f32>();
                f.macs_per_token += r * c;
            }
        };
        add_linear(&self.lm_head);
        for b in &self.blocks {
            for l in b.linears() {
                add_linear(l);
            }
        }
        if let Some(stack) = &self.host {
            let (bytes, macs) = stack.footprint();
            f.bytes += bytes;
            f.macs_per_token += macs;
        }
        f
    }

    /// A fresh cache for this model.
    pub fn new_cache(&self, capacity: usize) -> KvCache<B> {
        if let Some(host) = &self.host {
            use crate::host::KvFormat;
            let format = match (host.kv_keys, host.activations) {
                (crate::load::KvKeys::Q8_0, _) => KvFormat::Q8Keys,
                (_, draftsmith_kernels::Activations::Int8) => KvFormat::F16,
                (_, draftsmith_kernels::Activations::F32) => KvFormat::F32,
            };
            KvCache::new_host(&self.config, capacity, format, &self.device)
        } else {
            KvCache::new(&self.config, capacity, &self.device)
        }
    }

    /// Embeds token ids: `[n, hidden]`.
    pub fn embed_tokens(&self, tokens: &[u32]) -> Tensor<B, 2> {
        self.embed.rows(tokens, &self.device)
    }

    /// [`Model::embed_tokens`] on the host, `[n, hidden]` row-major.
    pub fn embed_tokens_host(&self, tokens: &[u32]) -> Vec<f32> {
        self.embed.rows_host(tokens, &self.device)
    }

    /// The LM head alone on `[n, hidden]` vectors (drafters with a head tied to the target's
    /// output embeddings use it; on the CPU it runs the quantized kernels).
    pub fn project_to_vocab(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        self.lm_head.forward(x)
    }

    /// [`Model::project_to_vocab`] on host rows `x` (`[n, hidden]`) with the quantized path's
    /// activation mode; `None` when the model does not run the quantized CPU path.
    pub fn project_to_vocab_host(&self, x: &[f32], n: usize) -> Option<Vec<f32>> {
        self.lm_head.forward_host(self.activations()?, x, n)
    }

    /// The block format of a quantized LM head (`None`: dense).
    pub fn lm_head_format(&self) -> Option<draftsmith_kernels::QFormat> {
        match &self.lm_head.weight {
            crate::layers::LinearWeight::Quant(q) => Some(q.format()),
            crate::layers::LinearWeight::Dense(_) => None,
        }
    }

    /// The LM head restricted to the rows `ids`, in that order (a drafter's draft vocabulary):
    /// `[n, hidden]` → `[n, ids.len()]`. A quantized head keeps those rows re-quantized to
    /// `format` (close to the full head's logits, not bit-equal: for drafting, never for the
    /// target's own logits); a dense one is sliced.
    pub fn lm_head_rows(&self, ids: &[u32], format: draftsmith_kernels::QFormat) -> Result<Linear<B>, ModelError> {
        let vocab = self.config.vocab_size;
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::Input(format!("lm_head_rows: token {bad} is outside the vocabulary of {vocab}")));
        }
        let weight = match &self.lm_head.weight {
            crate::layers::LinearWeight::Dense(w) => {
                let idx: Vec<i32> = ids.iter().map(|&t| t as i32).collect();
                let n = idx.len();
                crate::layers::LinearWeight::Dense(
                    w.clone().select(1, Tensor::<B, 1, Int>::from_data(TensorData::new(idx, [n]), &self.device)),
                )
            }
            crate::layers::LinearWeight::Quant(q) => {
                let cols = q.cols();
                let mut data = vec![0.0f32; ids.len() * cols];
                for (&t, row) in ids.iter().zip(data.chunks_mut(cols)) {
                    q.dequantize_row(t as usize, row);
                }
                let sub = draftsmith_kernels::QMatrix::quantize(format, &data, ids.len(), cols)
                    .map_err(|e| ModelError::Input(format!("lm_head_rows: {e}")))?;
                crate::layers::LinearWeight::Quant(std::sync::Arc::new(sub))
            }
        };
        Ok(Linear { weight, bias: None, bias_host: None, out_features: ids.len() })
    }

    /// The LM head as a dense `[hidden, vocab]` matrix (dequantized when its weights are
    /// quantized): for training modules that decode through the target's own frozen head.
    pub fn lm_head_matrix(&self) -> Tensor<B, 2> {
        match &self.lm_head.weight {
            crate::layers::LinearWeight::Dense(w) => w.clone(),
            crate::layers::LinearWeight::Quant(q) => {
                let (rows, cols) = (q.rows(), q.cols());
                let mut data = vec![0.0f32; rows * cols];
                for (r, row) in data.chunks_mut(cols).enumerate() {
                    q.dequantize_row(r, row);
                }
                Tensor::<B, 2>::from_data(TensorData::new(data, [rows, cols]), &self.device).transpose()
            }
        }
    }

    /// The final norm's weight, `[hidden]` (heads that read pre-norm hidden states start
    /// their own output norms from it).
    pub fn final_norm_weight(&self) -> Tensor<B, 1> {
        self.norm.weight.clone()
    }

    /// Applies the final norm and the LM head to hidden states `[n, hidden]`.
    pub fn logits_from_prenorm(&self, hidden_prenorm: Tensor<B, 2>) -> Tensor<B, 2> {
        self.lm_head.forward(self.norm.forward(hidden_prenorm))
    }

    /// Runs `tokens` at `positions` against the cached prefix, appends their keys/values to
    /// `cache`, and returns logits (`select`) and hidden states for the new positions.
    pub fn forward(
        &self,
        tokens: &[u32],
        positions: &[usize],
        mask: &AttentionMask,
        select: LogitsSelect,
        cache: &mut KvCache<B>,
    ) -> Result<ForwardOutput<B>, ModelError> {
        let (logits, hidden) = self.pass(tokens, positions, mask, Some(select), cache)?;
        let logits = logits.expect("logits were selected");
        Ok(ForwardOutput { logits, hidden_prenorm: hidden.hidden_prenorm, hidden_final: hidden.hidden_final })
    }

    /// [`Model::forward`] without the LM head: fills the cache and returns hidden states only.
    pub fn forward_hidden(
        &self,
        tokens: &[u32],
        positions: &[usize],
        mask: &AttentionMask,
        cache: &mut KvCache<B>,
    ) -> Result<HiddenOutput<B>, ModelError> {
        Ok(self.pass(tokens, positions, mask, None, cache)?.1)
    }

    /// One pass: logits for `select` (none without), and the hidden states.
    fn pass(
        &self,
        tokens: &[u32],
        positions: &[usize],
        mask: &AttentionMask,
        select: Option<LogitsSelect>,
        cache: &mut KvCache<B>,
    ) -> Result<(Option<Tensor<B, 2>>, HiddenOutput<B>), ModelError> {
        self.check_input(tokens, positions, mask, cache)?;
        let n = tokens.len();
        cache.reserve(n);
        if let Some(stack) = &self.host {
            return Ok(self.forward_host(stack, tokens, positions, mask, select, cache));
        }
        let (c, g) = (&self.config, self.config.gqa_group());
        let rope = self.rope.tables::<B>(positions, c.num_heads, c.num_kv_heads, &self.device);
        let bias = attention_bias::<B>(mask, n, cache.len(), [c.num_kv_heads, g], &self.device);
        let mut x = self.embed_tokens(tokens);
        for (i, block) in self.blocks.iter().enumerate() {
            let h = block.attn_norm.forward(x.clone());
            let h = self.attention(&block.attn, h, &rope, bias.as_ref(), i, cache);
            x = x + h;
            let h = block.mlp_norm.forward(x.clone());
            x = x + block.mlp.forward(h);
        }
        cache.advance(n);
        let hidden_final = self.norm.forward(x.clone());
        let logits = select.map(|select| match select {
            LogitsSelect::All => self.lm_head.forward(hidden_final.clone()),
            LogitsSelect::Last => self.lm_head.forward(hidden_final.clone().narrow(0, n - 1, 1)),
        });
        Ok((logits, HiddenOutput { hidden_prenorm: x, hidden_final }))
    }

    fn check_input(
        &self,
        tokens: &[u32],
        positions: &[usize],
        mask: &AttentionMask,
        cache: &KvCache<B>,
    ) -> Result<(), ModelError> {
        let n = tokens.len();
        if n == 0 || positions.len() != n {
            return Err(ModelError::Input(format!("{} tokens but {} positions", n, positions.len())));
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.config.vocab_size) {
            return Err(ModelError::Input(format!(
                "token id {t} is outside the vocabulary of {}",
                self.config.vocab_size
            )));
        }
        let needed = positions.iter().max().copied().unwrap_or(0) + 1;
        if needed > self.config.max_position_embeddings {
            return Err(ModelError::ContextOverflow { needed, context: self.config.max_position_embeddings });
        }
        if let AttentionMask::Visible(v) = mask {
            let expected = n * (cache.len() + n);
            if v.len() != expected {
                return Err(ModelError::Input(format!(
                    "mask has {} entries, expected {n} × {} = {expected}",
                    v.len(),
                    cache.len() + n
                )));
            }
        }
        Ok(())
    }

    fn attention(
        &self,
        attn: &Attention<B>,
        x: Tensor<B, 2>,
        rope: &RopeTables<B>,
        bias: Option<&Tensor<B, 4>>,
        layer: usize,
        cache: &mut KvCache<B>,
    ) -> Tensor<B, 2> {
        let c = &self.config;
        let (n, hd, kvh, group) = (x.dims()[0], c.head_dim, c.num_kv_heads, c.gqa_group());
        let q = attn.q.forward(x.clone()).reshape([n, c.num_heads, hd]);
        let k = attn.k.forward(x.clone()).reshape([n, kvh, hd]);
        let v = attn.v.forward(x).reshape([n, kvh, hd]);
        let q = rope.apply_q(q);
        let k = rope.apply_k(k);
        cache.store_query(layer, || {
            q.clone().narrow(0, n - 1, 1).into_data().convert::<f32>().to_vec::<f32>().expect("f32 query")
        });
        let (keys, values) = cache.write(layer, k.swap_dims(0, 1), v.swap_dims(0, 1));
        let total = keys.dims()[1];
        // Queries of one KV group stacked: [kv_heads, group·n, hd]; no repeated keys needed.
        let q = q.swap_dims(0, 1).reshape([kvh, group * n, hd]);
        let scores = q.matmul(keys.swap_dims(1, 2)).mul_scalar(1.0 / (hd as f32).sqrt());
        let scores = scores.reshape([kvh, group, n, total]);
        let scores = match bias {
            Some(b) => scores + b.clone(),
            None => scores,
        };
        let probs = activation::softmax(scores, 3).reshape([kvh, group * n, total]);
        let out = probs.matmul(values).reshape([c.num_heads, n, hd]).swap_dims(0, 1).reshape([n, c.num_heads * hd]);
        attn.o.forward(out)
    }
}

impl<B: Backend> Model<B> {
    /// The forward pass of the quantized CPU path: the decoder stack on host buffers
    /// ([`crate::fused`]), then the final norm and the LM head in one kernel call for all rows.
    fn forward_host(
        &self,
        stack: &HostStack,
        tokens: &[u32],
        positions: &[usize],
        mask: &AttentionMask,
        select: Option<LogitsSelect>,
        cache: &mut KvCache<B>,
    ) -> (Option<Tensor<B, 2>>, HiddenOutput<B>) {
        let (n, d) = (tokens.len(), self.config.hidden_size);
        let (cos, sin) = self.rope.host_tables(positions);
        let mut x = self.embed_tokens_host(tokens);
        let cached = cache.len();
        let rows = match mask {
            AttentionMask::Causal => None,
            AttentionMask::Visible(m) => Some(host::MaskRows::new(m, cached + n)),
        };
        let visibility = match &rows {
            None => host::Visibility::Causal { cached },
            Some(rows) => host::Visibility::Mask(rows),
        };
        let input = PassInput { cos: &cos, sin: &sin, visibility, cached };
        let (kv, queries) = cache.host_split().expect("host cache for the host path");
        let width = self.config.num_heads * self.config.head_dim;
        stack.run(&mut x, n, &input, kv, &mut |layer, q| {
            if let Some(store) = queries.as_mut() {
                store[layer] = q[(n - 1) * width..n * width].to_vec();
            }
        });
        cache.advance(n);
        let mut normed = vec![0.0f32; x.len()];
        draftsmith_kernels::rowops::rms_norm(&x, &stack.final_norm, stack.dims.eps, &mut normed);
        let rows = select.map(|select| match select {
            LogitsSelect::All => 0..n,
            LogitsSelect::Last => n - 1..n,
        });
        let logits = rows.map(|rows| {
            let LinearWeight::Quant(head) = &self.lm_head.weight else {
                unreachable!("the host path has a quantized LM head")
            };
            let count = rows.len();
            let mut out = vec![0.0f32; count * head.rows()];
            let timer = Phase::start();
            head.matmul_mode(stack.activations, &normed[rows.start * d..rows.end * d], count, &mut out);
            timer.stop(&PROFILE.matrices);
            Tensor::from_data(TensorData::new(out, [count, head.rows()]), &self.device)
        });
        let tensor = |v: Vec<f32>| Tensor::from_data(TensorData::new(v, [n, d]), &self.device);
        (logits, HiddenOutput { hidden_prenorm: tensor(x), hidden_final: tensor(normed) })
    }
}

impl<B: Backend> Mlp<B> {
    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let gate = activation::silu(self.gate.forward(x.clone()));
        self.down.forward(gate * self.up.forward(x))
    }
}

/// Additive attention bias `[kv_heads, group, n, cached + n]` (0 or −∞), or `None` when nothing
/// is masked. Materialized at the scores' full shape: a broadcast add walks strided indices
/// and cost more than the rest of a 64-token tree verification.
fn attention_bias<B: Backend>(
    mask: &AttentionMask,
    n: usize,
    cached: usize,
    heads: [usize; 2],
    device: &B::Device,
) -> Option<Tensor<B, 4>> {
    let total = cached + n;
    let one: Vec<f32> = match mask {
        AttentionMask::Causal if n == 1 => return None,
        AttentionMask::Causal => (0..n)
            .flat_map(|i| (0..total).map(move |j| if j <= cached + i { 0.0 } else { f32::NEG_INFINITY }))
            .collect(),
        AttentionMask::Visible(v) => v.iter().map(|&ok| if ok { 0.0 } else { f32::NEG_INFINITY }).collect(),
    };
    let copies = heads[0] * heads[1];
    let mut values = Vec::with_capacity(one.len() * copies);
    for _ in 0..copies {
        values.extend_from_slice(&one);
    }
    Some(Tensor::from_data(TensorData::new(values, [heads[0], heads[1], n, total]), device))
}
