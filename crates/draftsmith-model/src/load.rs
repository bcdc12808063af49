//! Loading a target model from a GGUF file or a Hugging Face directory into one runtime config,
//! one tokenizer and one [`Model`]. Reports missing and unused tensors as errors.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::tensor::{backend::Backend, Tensor, TensorData};
use draftsmith_gguf::{GgufError, GgufFile};
use draftsmith_kernels::{Activations, QFormat, QMatrix};
use rayon::prelude::*;

use crate::chat::ChatTemplate;
use crate::config::{Architecture, HfConfig, ModelConfig, RopeScaling};
use crate::embed::Embeddings;
use crate::error::ModelError;
use crate::fused::{Dims, HostLayer, HostStack, Proj};
use crate::layers::{Linear, LinearWeight, RmsNorm, Rope};
use crate::model::{Attention, Block, Mlp, Model};
use crate::names;
use crate::source::{check_finite, stack_runs, GgufSource, QuantWeight, SafetensorsSource, WeightSource};
use crate::tokenizer::TextTokenizer;

/// How matrix weights are held in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatmulWeights {
    /// f32 burn tensors (any backend; exact for f32/f16/bf16 checkpoints).
    Dense,
    /// Quantized blocks with the CPU kernels (GGUF Q8_0/Q4_1 kept as stored, Q4_0, Q5_0, Q4_K,
    /// Q5_K and Q6_K too with int8 activations; otherwise Q4_0/Q5_0 rewritten as Q8_0 exactly,
    /// Q4_K as Q4_1 with f16-rounded sub-block scales; other types re-quantized to Q8_0). CPU
    /// backends only.
    Quantized,
}

/// The activation mode of the quantized CPU path unless one is asked for: int8. Side by side on
/// SmolLM2-135M Q4_1 it decodes about twice as fast as f32 activations and verifies multi-token
/// passes about twice as fast, its logits stay within 1.3 of the float64 reference (llama.cpp's
/// own: 1.8), and it is batch-invariant like the f32 mode, so speculative decoding stays exactly
/// lossless (README, "Speed").
pub const DEFAULT_ACTIVATIONS: Activations = Activations::Int8;

/// How the quantized CPU path caches attention keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvKeys {
    /// Floats: f16 with int8 activations, f32 with f32 activations (values likewise).
    #[default]
    Float,
    /// Q8_0 (ggml's 8-bit blocks of 32), values f16: the attention scores become int8 dot
    /// products on the matrix kernels. Faster over long contexts, and a further rounding of
    /// keys and queries: SmolLM2's logits move up to 1.6 from the reference instead of 1.3,
    /// Qwen2.5-Coder-0.5B's 2.7 instead of 0.4 (its keys have a few channels far larger than
    /// the rest, which set their blocks' scales).
    Q8_0,
}

/// Options for [`load_model`].
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    pub matmul: MatmulWeights,
    /// How the quantized CPU path treats activations (ignored by dense weights).
    pub activations: Activations,
    /// Quantized weights stored in more bytes per value than this format (Q8_0, Q4_1 or Q4_0)
    /// are re-quantized to it at load, a lossy conversion meant for draft models, whose calls
    /// read every weight and whose output the target checks (`None`: kept as loaded). Q4_0
    /// with f32 activations, which have no fast Q4_0 kernel, means Q4_1.
    pub requantize: Option<QFormat>,
    /// The quantized CPU path's key cache (ignored by dense weights).
    pub kv_keys: KvKeys,
}

impl LoadOptions {
    /// `matmul` weights with the engine's default activation mode, [`DEFAULT_ACTIVATIONS`].
    pub fn new(matmul: MatmulWeights) -> Self {
        Self { matmul, activations: DEFAULT_ACTIVATIONS, requantize: None, kv_keys: KvKeys::Float }
    }

    /// The same options with activation mode `activations`.
    pub fn with_activations(self, activations: Activations) -> Self {
        Self { activations, ..self }
    }

    /// The same options with the key cache `kv_keys`.
    pub fn with_kv_keys(self, kv_keys: KvKeys) -> Self {
        Self { kv_keys, ..self }
    }

    /// The same options with quantized weights re-quantized to `format` where it is smaller
    /// ([`LoadOptions::requantize`]).
    pub fn with_requantize(self, format: Option<QFormat>) -> Self {
        Self { requantize: format, ..self }
    }
}

/// Whether `from` stores more bytes per weight value than `to`.
fn larger_format(from: QFormat, to: QFormat) -> bool {
    let per_value = |f: QFormat| f.block_bytes() as f64 / f.block_elems() as f64;
    per_value(from) > per_value(to)
}

/// What a model was loaded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Gguf,
    HfDirectory,
}

/// A model, its tokenizer and where they came from.
pub struct LoadedModel<B: Backend> {
    pub model: Model<B>,
    pub tokenizer: TextTokenizer,
    pub path: PathBuf,
    pub kind: SourceKind,
}

/// Loads a `.gguf` file or a Hugging Face model directory.
pub fn load_model<B: Backend>(
    path: &Path,
    options: LoadOptions,
    device: &B::Device,
) -> Result<LoadedModel<B>, ModelError> {
    if path.is_dir() {
        load_hf_dir(path, options, device)
    } else if path.is_file() {
        load_gguf(path, options, device)
    } else if !path.exists() {
        Err(ModelError::io(path, std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory")))
    } else {
        Err(ModelError::NotAModel { path: path.to_path_buf() })
    }
}

fn load_gguf<B: Backend>(path: &Path, options: LoadOptions, device: &B::Device) -> Result<LoadedModel<B>, ModelError> {
    let file = GgufFile::open(path)?;
    check_vector_types(&file)?;
    let config = gguf_config(&file)?;
    let tokenizer = TextTokenizer::from_gguf(&file)?;
    let source = GgufSource::new(file, config.architecture, config.num_heads, config.num_kv_heads);
    check_vocab(&tokenizer, &config)?;
    let layers_key = format!("{}.block_count", config.architecture.gguf_name());
    let model = build(&config, &source, options, device, &[names::GGUF_ROPE_FREQS], &layers_key)?;
    Ok(LoadedModel { model, tokenizer, path: path.to_path_buf(), kind: SourceKind::Gguf })
}

fn load_hf_dir<B: Backend>(dir: &Path, options: LoadOptions, device: &B::Device) -> Result<LoadedModel<B>, ModelError> {
    let config_path = dir.join("config.json");
    if !config_path.exists() {
        return Err(ModelError::NotAModel { path: dir.to_path_buf() });
    }
    let hf = HfConfig::read(&config_path)?;
    let eos_ids = hf.eos_token_id.clone();
    let bos_ids = hf.bos_token_id.clone();
    let config = hf.into_config(&config_path)?;
    let eos = json_ids(&config_path, "eos_token_id", eos_ids.as_ref())?;
    let bos = json_ids(&config_path, "bos_token_id", bos_ids.as_ref())?;
    let tokenizer = hf_tokenizer(dir, bos.first().copied(), eos.clone())?;
    check_vocab(&tokenizer, &config)?;
    check_ids(&config_path, "eos_token_id", &eos, config.vocab_size)?;
    check_ids(&config_path, "bos_token_id", &bos, config.vocab_size)?;
    let source = SafetensorsSource::open(dir)?;
    let model = build(&config, &source, options, device, &[], "num_hidden_layers (config.json)")?;
    Ok(LoadedModel { model, tokenizer, path: dir.to_path_buf(), kind: SourceKind::HfDirectory })
}

/// The token id(s) of `config.json`'s `key`: a number or an array of numbers (null or absent:
/// none), each an unsigned 32-bit integer.
fn json_ids(path: &Path, key: &str, v: Option<&serde_json::Value>) -> Result<Vec<u32>, ModelError> {
    let values: Vec<&serde_json::Value> = match v {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(a)) => a.iter().collect(),
        Some(other) => vec![other],
    };
    values
        .into_iter()
        .map(|value| {
            value.as_u64().and_then(|id| u32::try_from(id).ok()).ok_or_else(|| ModelError::Config {
                path: path.to_path_buf(),
                problem: format!("{key} {value} is not a token id (an unsigned 32-bit integer)"),
            })
        })
        .collect()
}

/// Fails unless every id of `config.json`'s `key` lies inside the model's `vocab` rows: an id
/// past the vocabulary would never be sampled (generation would not stop at it).
fn check_ids(path: &Path, key: &str, ids: &[u32], vocab: usize) -> Result<(), ModelError> {
    match ids.iter().find(|&&id| id as usize >= vocab) {
        None => Ok(()),
        Some(id) => Err(ModelError::Config {
            path: path.to_path_buf(),
            problem: format!("{key} {id} is outside the vocabulary of {vocab} tokens"),
        }),
    }
}

/// `tokenizer.json` plus `tokenizer_config.json` (chat template, BOS policy, EOS token).
fn hf_tokenizer(dir: &Path, bos: Option<u32>, mut eos: Vec<u32>) -> Result<TextTokenizer, ModelError> {
    let tok_path = dir.join("tokenizer.json");
    let cfg_path = dir.join("tokenizer_config.json");
    let cfg: serde_json::Value = match std::fs::read_to_string(&cfg_path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| ModelError::Tokenizer { path: cfg_path.clone(), problem: e.to_string() })?,
        // Optional; but one that is there and cannot be read (a directory, no permission) is named.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::Value::Null,
        Err(e) => return Err(ModelError::io(&cfg_path, e)),
    };
    let token_text = |key: &str| match cfg.get(key) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Object(o)) => o.get("content").and_then(|c| c.as_str()).map(String::from),
        _ => None,
    };
    let template = cfg
        .get("chat_template")
        .and_then(|t| t.as_str())
        .map(|t| ChatTemplate::new(&cfg_path, t, token_text("bos_token"), token_text("eos_token")));
    let add_bos = cfg.get("add_bos_token").and_then(|b| b.as_bool()).unwrap_or(false);
    let inner = TextTokenizer::read_json(&tok_path)?;
    if let Some(id) = token_text("eos_token").and_then(|t| inner.token_to_id(&t)) {
        if !eos.contains(&id) {
            eos.push(id);
        }
    }
    Ok(TextTokenizer::new(inner, &tok_path, bos, eos, add_bos, template))
}

fn check_vocab(tokenizer: &TextTokenizer, config: &ModelConfig) -> Result<(), ModelError> {
    if tokenizer.vocab_size() > config.vocab_size {
        return Err(ModelError::VocabMismatch {
            path: tokenizer.source().to_path_buf(),
            tokenizer: tokenizer.vocab_size(),
            model: config.vocab_size,
        });
    }
    Ok(())
}

/// Reads the runtime config from GGUF metadata (`{arch}.*` keys). Optional keys that are
/// present must have the right type; every value is checked ([`ModelConfig::validate_keys`],
/// errors name the key), and `{arch}.block_count` must match the `blk.N` tensors in the file
/// before anything is sized by it.
fn gguf_config(file: &GgufFile) -> Result<ModelConfig, ModelError> {
    let arch_name = file.get_str("general.architecture")?;
    let architecture = Architecture::parse(arch_name).ok_or_else(|| ModelError::UnknownArchitecture {
        path: file.path().to_path_buf(),
        name: arch_name.to_string(),
    })?;
    let bad = |problem: String| ModelError::Config { path: file.path().to_path_buf(), problem };
    let key = |k: &str| format!("{}.{k}", architecture.gguf_name());
    let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let usize_key = |k: &str| file.get_u64(&key(k)).map(to_usize);
    let optional_usize = |k: &str| optional(file.get_u64(&key(k))).map(|v| v.map(to_usize));
    let hidden_size = usize_key("embedding_length")?;
    let num_heads = usize_key("attention.head_count")?;
    let num_layers = usize_key("block_count")?;
    check_block_count(file, &key("block_count"), num_layers)?;
    let embd = file.tensor("token_embd.weight").ok_or_else(|| ModelError::MissingTensors {
        path: file.path().to_path_buf(),
        names: "token_embd.weight".into(),
    })?;
    let vocab_size = embd.dims.get(1).copied().map(to_usize).unwrap_or(0);
    if let Some(declared) = optional_usize("vocab_size")? {
        if declared != vocab_size {
            let k = key("vocab_size");
            return Err(bad(format!("{k} is {declared} but token_embd.weight has {vocab_size} rows")));
        }
    }
    let key_length = optional_usize("attention.key_length")?;
    let head_dim = key_length.unwrap_or(hidden_size / num_heads.max(1));
    let max_position_embeddings = usize_key("context_length")?;
    let rope_scaling = gguf_rope_scaling(file, &key, max_position_embeddings)?;
    let config = ModelConfig {
        architecture,
        vocab_size,
        hidden_size,
        intermediate_size: usize_key("feed_forward_length")?,
        num_layers,
        num_heads,
        num_kv_heads: optional_usize("attention.head_count_kv")?.unwrap_or(num_heads),
        head_dim,
        rms_norm_eps: file.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
        rope_theta: optional(file.get_f32(&key("rope.freq_base")))?.unwrap_or(10_000.0),
        rope_scaling,
        max_position_embeddings,
        tie_word_embeddings: file.tensor("output.weight").is_none(),
    };
    let gguf_key = |field: &str| match (field, key_length) {
        ("head_dim", None) => format!("head_dim ({} / {})", key("embedding_length"), key("attention.head_count")),
        _ => gguf_key(architecture.gguf_name(), field),
    };
    config.validate_keys(file.path(), &gguf_key)?;
    // The engine rotates every dimension of a head; partial rotary embeddings are not supported.
    if let Some(rot) = optional_usize("rope.dimension_count")? {
        if rot != head_dim {
            let k = key("rope.dimension_count");
            return Err(bad(format!(
                "{k} is {rot} but heads have {head_dim} dimensions (partial RoPE is not supported)"
            )));
        }
    }
    Ok(config)
}

/// `Ok(None)` for a missing key, the value or the error (e.g. a wrong type) otherwise.
fn optional<T>(value: Result<T, GgufError>) -> Result<Option<T>, ModelError> {
    match value {
        Ok(v) => Ok(Some(v)),
        Err(GgufError::MissingKey { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The GGUF metadata key (or tensor) a [`ModelConfig`] field of architecture `arch` is read
/// from, for error messages.
fn gguf_key(arch: &str, field: &str) -> String {
    let k = match field {
        "vocab_size" => return "the row count of token_embd.weight".into(),
        "rope_scaling.factors" => return names::GGUF_ROPE_FREQS.into(),
        "hidden_size" => "embedding_length",
        "intermediate_size" => "feed_forward_length",
        "num_layers" => "block_count",
        "num_heads" => "attention.head_count",
        "num_kv_heads" => "attention.head_count_kv",
        "head_dim" => "attention.key_length",
        "rms_norm_eps" => "attention.layer_norm_rms_epsilon",
        "rope_theta" => "rope.freq_base",
        "max_position_embeddings" => "context_length",
        "rope_scaling.factor" => "rope.scaling.factor",
        "rope_scaling.original_max_position" => "rope.scaling.original_context_length",
        other => other,
    };
    format!("{arch}.{k}")
}

/// One more than the largest layer index `N` among `names` of the form `{prefix}N.…`: the
/// number of layers the names hold tensors for (0 when none has the prefix).
fn layers_present<'a>(names: impl Iterator<Item = &'a str>, prefix: &str) -> usize {
    names
        .filter_map(|n| n.strip_prefix(prefix)?.split_once('.')?.0.parse::<usize>().ok())
        .map(|i| i.saturating_add(1))
        .max()
        .unwrap_or(0)
}

/// Fails unless `num_layers` (read from `what`) equals the number of layers `source` holds
/// tensors for. Checked before the list of expected tensor names is built from it: a corrupt
/// count (say 4294967295) would otherwise allocate billions of names.
fn check_layer_count(
    path: &Path,
    what: &str,
    num_layers: usize,
    present: usize,
    prefix: &str,
) -> Result<(), ModelError> {
    if num_layers == present {
        return Ok(());
    }
    let held = match present {
        0 => format!("no `{prefix}N.*` tensors"),
        1 => format!("tensors for 1 layer ({prefix}0)"),
        n => format!("tensors for {n} layers ({prefix}0 … {prefix}{})", n - 1),
    };
    Err(ModelError::Config {
        path: path.to_path_buf(),
        problem: format!(
            "{what} is {num_layers} but the file holds {held}; the metadata or the tensor table is corrupt"
        ),
    })
}

/// [`check_layer_count`] for a GGUF file's `blk.N.*` tensors.
fn check_block_count(file: &GgufFile, key: &str, num_layers: usize) -> Result<(), ModelError> {
    let present = layers_present(file.tensors().iter().map(|t| t.name.as_str()), "blk.");
    check_layer_count(file.path(), key, num_layers, present, "blk.")
}

/// Every 1-D tensor (norm weights, biases, RoPE factors) must be stored as floats: llama.cpp
/// never quantizes them, so a quantized type means a corrupt tensor table, whose values would
/// be read as garbage.
fn check_vector_types(file: &GgufFile) -> Result<(), ModelError> {
    match file.tensors().iter().find(|t| t.dims.len() == 1 && !t.dtype.is_float()) {
        None => Ok(()),
        Some(t) => Err(ModelError::Tensor {
            path: file.path().to_path_buf(),
            name: t.name.clone(),
            problem: format!(
                "a 1-D tensor (norm weight or bias) must be F32, F16 or BF16, but it is declared {}; \
                 the tensor table is corrupt",
                t.dtype
            ),
        }),
    }
}

fn gguf_rope_scaling(
    file: &GgufFile,
    key: &dyn Fn(&str) -> String,
    context_length: usize,
) -> Result<RopeScaling, ModelError> {
    if file.tensor(names::GGUF_ROPE_FREQS).is_some() {
        return Ok(RopeScaling::PerFrequency { factors: file.dequantize(names::GGUF_ROPE_FREQS)? });
    }
    let kind = optional(file.get_str(&key("rope.scaling.type")))?.unwrap_or("none");
    let factor = optional(file.get_f32(&key("rope.scaling.factor")))?.unwrap_or(1.0);
    // llama.cpp's default for YaRN's original context is the training context.
    let original = optional(file.get_u64(&key("rope.scaling.original_context_length")))?
        .map_or(context_length, |v| usize::try_from(v).unwrap_or(usize::MAX));
    Ok(match kind {
        "none" => RopeScaling::None,
        "linear" => RopeScaling::Linear { factor },
        "yarn" => RopeScaling::Yarn { factor, original_max_position: original, beta_fast: 32.0, beta_slow: 1.0 },
        other => {
            return Err(ModelError::Config {
                path: file.path().to_path_buf(),
                problem: format!("rope scaling `{other}` is not supported"),
            })
        }
    })
}

/// Builds a model from any weight source (checks tensor names and shapes first).
pub fn build_model<B: Backend>(
    config: &ModelConfig,
    source: &dyn WeightSource,
    options: LoadOptions,
    device: &B::Device,
) -> Result<Model<B>, ModelError> {
    config.validate(source.path())?;
    build(config, source, options, device, &[], "num_layers")
}

/// Checks the source holds exactly the tensors the config needs (`extra_used` = tensors read
/// elsewhere, e.g. into the config; `layers_key` = where `num_layers` came from, for errors),
/// then builds the model. Errors name tensors as the source does ([`WeightSource::display_name`]).
fn build<B: Backend>(
    config: &ModelConfig,
    source: &dyn WeightSource,
    options: LoadOptions,
    device: &B::Device,
    extra_used: &[&str],
    layers_key: &str,
) -> Result<Model<B>, ModelError> {
    let present: BTreeSet<String> = source.names().into_iter().collect();
    let layers = layers_present(present.iter().map(String::as_str), "model.layers.");
    check_layer_count(source.path(), layers_key, config.num_layers, layers, "model.layers.")?;
    let expected = names::expected_tensors(config);
    let shown = |names: &[&String]| join(&names.iter().map(|n| source.display_name(n)).collect::<Vec<_>>());
    let missing: Vec<&String> = expected.iter().filter(|n| !present.contains(*n)).collect();
    if !missing.is_empty() {
        return Err(ModelError::MissingTensors { path: source.path().to_path_buf(), names: shown(&missing) });
    }
    let expected_set: BTreeSet<&String> = expected.iter().collect();
    let unused: Vec<&String> = present
        .iter()
        .filter(|n| !expected_set.contains(n) && !names::is_derived_buffer(n) && !extra_used.contains(&n.as_str()))
        .collect();
    if !unused.is_empty() {
        return Err(ModelError::UnusedTensors {
            path: source.path().to_path_buf(),
            arch: config.architecture.gguf_name().into(),
            names: shown(&unused),
        });
    }
    for name in &expected {
        let found = source.shape(name).unwrap_or_default();
        let want = names::expected_shape(config, name).unwrap_or_default();
        if found != want {
            return Err(ModelError::TensorShape {
                path: source.path().to_path_buf(),
                name: source.display_name(name),
                found: source.display_shape(found),
                expected: source.display_shape(want),
            });
        }
    }
    Builder { config, source, options, device }.model()
}

fn join(names: &[String]) -> String {
    const SHOWN: usize = 12;
    let mut s = names.iter().take(SHOWN).map(|n| n.as_str()).collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(" … ({} in all)", names.len()));
    }
    s
}

/// A decoder layer's projections as the fused host path multiplies them: each group's weights
/// (under `model.layers.{i}.`) share an input; `true` where Qwen2-style biases apply.
const HOST_PROJECTIONS: [(&[&str], bool); 4] = [
    (&["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], true),
    (&["self_attn.o_proj"], false),
    (&["mlp.gate_proj", "mlp.up_proj"], false),
    (&["mlp.down_proj"], false),
];

struct Builder<'a, B: Backend> {
    config: &'a ModelConfig,
    source: &'a dyn WeightSource,
    options: LoadOptions,
    device: &'a B::Device,
}

impl<B: Backend> Builder<'_, B> {
    fn model(&self) -> Result<Model<B>, ModelError> {
        let c = self.config;
        let embed = self.embeddings("model.embed_tokens.weight")?;
        let head_name = if c.tie_word_embeddings { "model.embed_tokens.weight" } else { "lm_head.weight" };
        let lm_head = self.linear(head_name, None)?;
        // Every projection quantized: the layers are built for the fused host path alone (no
        // burn blocks), each layer's q/k/v and gate/up packed as stacked matrices.
        let host_path =
            lm_head.is_quantized() && (0..c.num_layers).all(|i| self.host_layer_names(i).all(|n| self.quantizes(&n)));
        let (host, blocks) = match host_path {
            true => {
                // In parallel: packing the blocks into the kernels' layout, and the first touch
                // of the memory it fills, were most of a large model's load on one thread
                // (Qwen2.5-Coder-1.5B on 2 cores: 2.3–5.1 s, now 1.3–1.6 s). Collected first, so
                // that a bad file's error is the first layer's, whichever thread saw it.
                let layers: Vec<_> = (0..c.num_layers).into_par_iter().map(|i| self.host_layer(i)).collect();
                let layers = layers.into_iter().collect::<Result<Vec<_>, _>>()?;
                let dims = Dims {
                    heads: c.num_heads,
                    kv_heads: c.num_kv_heads,
                    head_dim: c.head_dim,
                    ffn: c.intermediate_size,
                    eps: c.rms_norm_eps,
                };
                let final_norm = self.load_vector("model.norm.weight")?;
                let (activations, kv_keys) = (self.options.activations, self.options.kv_keys);
                (Some(HostStack { layers, final_norm, dims, activations, kv_keys }), Vec::new())
            }
            false => (None, (0..c.num_layers).map(|i| self.block(i)).collect::<Result<Vec<_>, _>>()?),
        };
        let (inv_freq, mscale) = c.rope_inv_freq();
        let norm = self.norm("model.norm.weight")?;
        Ok(Model {
            host,
            config: c.clone(),
            embed,
            blocks,
            norm,
            lm_head,
            rope: Rope::new(inv_freq, mscale),
            device: self.device.clone(),
        })
    }

    fn block(&self, i: usize) -> Result<Block<B>, ModelError> {
        let p = |s: &str| format!("model.layers.{i}.{s}");
        let bias = |s: &str| if self.config.architecture.qkv_bias() { Some(p(s)) } else { None };
        Ok(Block {
            attn_norm: self.norm(&p("input_layernorm.weight"))?,
            attn: Attention {
                q: self.linear(&p("self_attn.q_proj.weight"), bias("self_attn.q_proj.bias"))?,
                k: self.linear(&p("self_attn.k_proj.weight"), bias("self_attn.k_proj.bias"))?,
                v: self.linear(&p("self_attn.v_proj.weight"), bias("self_attn.v_proj.bias"))?,
                o: self.linear(&p("self_attn.o_proj.weight"), None)?,
            },
            mlp_norm: self.norm(&p("post_attention_layernorm.weight"))?,
            mlp: Mlp {
                gate: self.linear(&p("mlp.gate_proj.weight"), None)?,
                up: self.linear(&p("mlp.up_proj.weight"), None)?,
                down: self.linear(&p("mlp.down_proj.weight"), None)?,
            },
        })
    }

    /// Layer `i`'s seven projection weights.
    fn host_layer_names(&self, i: usize) -> impl Iterator<Item = String> {
        HOST_PROJECTIONS.iter().flat_map(|(names, _)| names.iter()).map(move |n| format!("model.layers.{i}.{n}.weight"))
    }

    /// Whether `name` is multiplied by the quantized kernels ([`Builder::linear`]'s rule).
    fn quantizes(&self, name: &str) -> bool {
        let cols = self.source.shape(name).and_then(|s| s.get(1).copied());
        matches!(self.options.matmul, MatmulWeights::Quantized) && cols.is_some_and(|c| c.is_multiple_of(32))
    }

    /// Layer `i` of the fused host path, straight from the source.
    fn host_layer(&self, i: usize) -> Result<HostLayer, ModelError> {
        let p = |s: &str| format!("model.layers.{i}.{s}");
        let proj = |(names, biased): &(&[&str], bool)| -> Result<Proj, ModelError> {
            let weights: Vec<String> = names.iter().map(|n| p(&format!("{n}.weight"))).collect();
            let weights: Vec<&str> = weights.iter().map(String::as_str).collect();
            let matrices = self.quant_matrices(&weights)?;
            let bias = match *biased && self.config.architecture.qkv_bias() {
                true => Some(
                    names
                        .iter()
                        .map(|n| self.load_vector(&p(&format!("{n}.bias"))))
                        .collect::<Result<Vec<_>, _>>()?
                        .concat(),
                ),
                false => None,
            };
            Ok(Proj::new(matrices, bias))
        };
        let [qkv, o, gate_up, down] = &HOST_PROJECTIONS;
        Ok(HostLayer {
            attn_norm: self.load_vector(&p("input_layernorm.weight"))?,
            qkv: proj(qkv)?,
            o: proj(o)?,
            mlp_norm: self.load_vector(&p("post_attention_layernorm.weight"))?,
            gate_up: proj(gate_up)?,
            down: proj(down)?,
        })
    }

    /// The weights `names` as quantized matrices ([`WeightSource::load_quant_parts`]), each
    /// re-quantized where the options ask for a smaller format.
    fn quant_matrices(&self, names: &[&str]) -> Result<Vec<QMatrix>, ModelError> {
        let parts = self.source.load_quant_parts(names, self.options.activations)?;
        // A format without fast kernels in this activation mode (Q4_0 with f32 activations)
        // becomes the smallest one that has them, Q4_1.
        let fast = |to: QFormat| if to.fast_in(self.options.activations) { to } else { QFormat::Q4_1 };
        let Some(to) = self.options.requantize.map(fast) else { return Ok(parts) };
        let requantized = parts
            .into_iter()
            .map(|m| match larger_format(m.format(), to) {
                true => m.requantize(to).map(QuantWeight::Matrix).map_err(|e| ModelError::Tensor {
                    path: self.source.path().to_path_buf(),
                    name: names.join(", "),
                    problem: format!("re-quantizing to {to:?}: {e}"),
                }),
                false => Ok(QuantWeight::Matrix(m)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Parts of different stored formats may share one after re-quantizing (Q4_K_M's Q4_K
        // q and k beside its Q6_K v): stacked again, one product for the group.
        stack_runs(self.source.path(), &names.join(", "), requantized)
    }

    fn vector(&self, name: &str) -> Result<Tensor<B, 1>, ModelError> {
        let v = self.load_vector(name)?;
        let n = v.len();
        Ok(Tensor::from_data(TensorData::new(v, [n]), self.device))
    }

    /// A 1-D weight (a norm's scale, a bias), refused when a value is NaN or infinite
    /// ([`check_finite`]).
    fn load_vector(&self, name: &str) -> Result<Vec<f32>, ModelError> {
        let values = self.source.load_f32(name)?;
        check_finite(self.source.path(), &self.source.display_name(name), &values)?;
        Ok(values)
    }

    fn norm(&self, name: &str) -> Result<RmsNorm<B>, ModelError> {
        Ok(RmsNorm { weight: self.vector(name)?, eps: self.config.rms_norm_eps })
    }

    /// The token embeddings: the source's own blocks where it has them ([`Embeddings::Blocks`]),
    /// else an f32 matrix.
    fn embeddings(&self, name: &str) -> Result<Embeddings<B>, ModelError> {
        let shape = self.source.shape(name).unwrap_or_default();
        let blocks = self.source.load_blocks(name)?;
        match blocks.and_then(|(dtype, bytes)| Embeddings::blocks(dtype, bytes, shape[0], shape[1])) {
            Some(table) => Ok(table),
            None => Ok(Embeddings::Dense(self.matrix(name, false)?)),
        }
    }

    /// A `[rows, cols]` matrix as stored, or transposed to `[cols, rows]`.
    fn matrix(&self, name: &str, transpose: bool) -> Result<Tensor<B, 2>, ModelError> {
        let shape = self.source.shape(name).unwrap_or_default();
        let (rows, cols) = (shape[0], shape[1]);
        let values = self.source.load_f32(name)?;
        let t = Tensor::<B, 2>::from_data(TensorData::new(values, [rows, cols]), self.device);
        // Materialize the transpose so forward multiplies a contiguous [in, out] matrix.
        Ok(if transpose { Tensor::from_data(t.transpose().into_data(), self.device) } else { t })
    }

    fn linear(&self, name: &str, bias: Option<String>) -> Result<Linear<B>, ModelError> {
        let out_features = self.source.shape(name).unwrap_or_default()[0];
        let cols = self.source.shape(name).unwrap_or_default()[1];
        // The kernels work on 32-wide blocks; narrower matrices (tiny test models) stay dense.
        let weight = match self.options.matmul {
            MatmulWeights::Quantized if cols.is_multiple_of(32) => {
                let m = self.quant_matrices(&[name])?.pop().expect("one matrix for one weight");
                LinearWeight::Quant(Arc::new(m))
            }
            _ => LinearWeight::Dense(self.matrix(name, true)?),
        };
        let bias_host = bias.map(|b| self.load_vector(&b)).transpose()?;
        let bias = bias_host.as_ref().map(|b| Tensor::from_data(TensorData::new(b.clone(), [b.len()]), self.device));
        Ok(Linear { weight, bias, bias_host, out_features })
    }
}
