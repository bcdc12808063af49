//! One runtime configuration for every supported architecture, built from either a Hugging Face
//! `config.json` (through the serde mirror [`HfConfig`]) or GGUF metadata.

use std::path::Path;

use serde::Deserialize;

use crate::error::ModelError;

/// Model families the engine implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// Llama 2/3, SmolLM2 and other `LlamaForCausalLM` models.
    Llama,
    /// Qwen2 / Qwen2.5: Llama with biases on q, k and v.
    Qwen2,
}

impl Architecture {
    /// The architectures the engine runs, by their GGUF names, for messages.
    pub const SUPPORTED: &'static str = "llama, qwen2";

    /// Parses the GGUF `general.architecture` or HF `model_type` value.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "llama" | "mistral" => Some(Self::Llama),
            "qwen2" => Some(Self::Qwen2),
            _ => None,
        }
    }

    /// Name as it appears in GGUF metadata keys.
    pub fn gguf_name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
        }
    }

    /// Whether q, k and v projections carry a bias.
    pub fn qkv_bias(self) -> bool {
        matches!(self, Self::Qwen2)
    }
}

/// How rotary position frequencies are rescaled for longer contexts.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    /// Plain RoPE.
    None,
    /// Position interpolation: every frequency divided by `factor`.
    Linear { factor: f32 },
    /// Llama 3.1 frequency-dependent scaling.
    Llama3 { factor: f32, low_freq_factor: f32, high_freq_factor: f32, original_max_position: usize },
    /// YaRN (NTK-by-parts interpolation plus attention temperature).
    Yarn { factor: f32, original_max_position: usize, beta_fast: f32, beta_slow: f32 },
    /// Per-frequency divisors, as llama.cpp stores Llama 3.1 scaling (`rope_freqs.weight`).
    PerFrequency { factors: Vec<f32> },
}

/// The runtime configuration every loader resolves to.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub architecture: Architecture,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f32,
    pub rope_theta: f32,
    pub rope_scaling: RopeScaling,
    pub max_position_embeddings: usize,
    pub tie_word_embeddings: bool,
}

impl ModelConfig {
    /// A tiny Llama/Qwen2-shaped config for tests and examples with [`crate::MemorySource::random`]
    /// weights: vocab 48, hidden 32 (rows wide enough for the quantized kernels), 2 layers,
    /// GQA 4:2, head_dim 8, context 512, embeddings tied for Llama.
    pub fn tiny(architecture: Architecture) -> Self {
        Self {
            architecture,
            vocab_size: 48,
            hidden_size: 32,
            intermediate_size: 64,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 8,
            rms_norm_eps: 1e-5,
            rope_theta: 10_000.0,
            rope_scaling: RopeScaling::None,
            max_position_embeddings: 512,
            tie_word_embeddings: architecture == Architecture::Llama,
        }
    }

    /// Number of query heads sharing one key/value head.
    pub fn gqa_group(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }

    /// Checks the invariants the forward pass relies on; errors name the [`ModelConfig`] field.
    pub fn validate(&self, source: &Path) -> Result<(), ModelError> {
        self.validate_keys(source, &|field| field.to_string())
    }

    /// [`ModelConfig::validate`] with errors naming each field by `key(field)`: the key or
    /// field of the file the value was read from (e.g. `llama.context_length` for
    /// `max_position_embeddings`). Sizes must be positive, `num_heads × head_dim` must not
    /// overflow, floats must be finite and positive, and RoPE scaling must be well-formed.
    pub fn validate_keys(&self, source: &Path, key: &dyn Fn(&str) -> String) -> Result<(), ModelError> {
        let bad = |problem: String| ModelError::Config { path: source.to_path_buf(), problem };
        let sizes = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_layers", self.num_layers),
            ("num_heads", self.num_heads),
            ("num_kv_heads", self.num_kv_heads),
            ("head_dim", self.head_dim),
            ("max_position_embeddings", self.max_position_embeddings),
        ];
        if let Some((field, _)) = sizes.iter().find(|(_, value)| *value == 0) {
            return Err(bad(format!("{} is 0; it must be positive", key(field))));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(bad(format!(
                "{} ({}) must be a positive multiple of {} ({})",
                key("num_heads"),
                self.num_heads,
                key("num_kv_heads"),
                self.num_kv_heads
            )));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(bad(format!("{} ({}) must be even and positive", key("head_dim"), self.head_dim)));
        }
        if self.num_heads.checked_mul(self.head_dim).is_none() {
            return Err(bad(format!(
                "{} ({}) × {} ({}) overflows",
                key("num_heads"),
                self.num_heads,
                key("head_dim"),
                self.head_dim
            )));
        }
        positive_float(self.rms_norm_eps, &key("rms_norm_eps")).map_err(bad)?;
        positive_float(self.rope_theta, &key("rope_theta")).map_err(bad)?;
        if self.rope_theta <= 1.0 {
            return Err(bad(format!("{} is {}; it must be greater than 1", key("rope_theta"), self.rope_theta)));
        }
        self.validate_rope_scaling(key).map_err(bad)
    }

    /// The parameters of [`ModelConfig::rope_scaling`]: finite positive factors, a positive
    /// original context, one per-frequency divisor per rotary pair.
    fn validate_rope_scaling(&self, key: &dyn Fn(&str) -> String) -> Result<(), String> {
        let original = |value: usize| match value {
            0 => Err(format!("{} is 0; it must be positive", key("rope_scaling.original_max_position"))),
            _ => Ok(()),
        };
        match &self.rope_scaling {
            RopeScaling::None => Ok(()),
            RopeScaling::Linear { factor } => positive_float(*factor, &key("rope_scaling.factor")),
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position } => {
                positive_float(*factor, &key("rope_scaling.factor"))?;
                positive_float(*low_freq_factor, &key("rope_scaling.low_freq_factor"))?;
                positive_float(*high_freq_factor, &key("rope_scaling.high_freq_factor"))?;
                if high_freq_factor <= low_freq_factor {
                    return Err(format!(
                        "{} ({high_freq_factor}) must be greater than {} ({low_freq_factor})",
                        key("rope_scaling.high_freq_factor"),
                        key("rope_scaling.low_freq_factor")
                    ));
                }
                original(*original_max_position)
            }
            RopeScaling::Yarn { factor, original_max_position, beta_fast, beta_slow } => {
                positive_float(*factor, &key("rope_scaling.factor"))?;
                positive_float(*beta_fast, &key("rope_scaling.beta_fast"))?;
                positive_float(*beta_slow, &key("rope_scaling.beta_slow"))?;
                original(*original_max_position)
            }
            RopeScaling::PerFrequency { factors } => {
                let name = key("rope_scaling.factors");
                if factors.len() != self.head_dim / 2 {
                    return Err(format!(
                        "{name} has {} values, expected {} (head_dim / 2)",
                        factors.len(),
                        self.head_dim / 2
                    ));
                }
                factors.iter().enumerate().try_for_each(|(i, &f)| positive_float(f, &format!("{name}[{i}]")))
            }
        }
    }

    /// Rotary inverse frequencies (length `head_dim / 2`) after scaling, and the attention
    /// scale multiplier YaRN applies to cos/sin (1.0 otherwise).
    pub fn rope_inv_freq(&self) -> (Vec<f32>, f32) {
        let d = self.head_dim as f64;
        let base: Vec<f64> =
            (0..self.head_dim / 2).map(|i| 1.0 / (self.rope_theta as f64).powf(2.0 * i as f64 / d)).collect();
        match &self.rope_scaling {
            RopeScaling::None => (base.iter().map(|&f| f as f32).collect(), 1.0),
            RopeScaling::Linear { factor } => (base.iter().map(|&f| (f / *factor as f64) as f32).collect(), 1.0),
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position } => {
                let inv = llama3_scale(
                    &base,
                    *factor as f64,
                    *low_freq_factor as f64,
                    *high_freq_factor as f64,
                    *original_max_position as f64,
                );
                (inv, 1.0)
            }
            RopeScaling::PerFrequency { factors } => {
                (base.iter().zip(factors).map(|(&f, &k)| (f / k as f64) as f32).collect(), 1.0)
            }
            RopeScaling::Yarn { factor, original_max_position, beta_fast, beta_slow } => yarn_scale(
                &base,
                d,
                self.rope_theta as f64,
                *factor as f64,
                *original_max_position as f64,
                *beta_fast as f64,
                *beta_slow as f64,
            ),
        }
    }
}

/// `Err` naming `key` unless `value` is finite and greater than 0 (NaN, infinities, zero and
/// negative values make the forward pass produce garbage without failing).
fn positive_float(value: f32, key: &str) -> Result<(), String> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(format!("{key} is {value}; it must be finite and positive"))
    }
}

fn llama3_scale(base: &[f64], factor: f64, low: f64, high: f64, original: f64) -> Vec<f32> {
    let low_wavelen = original / low;
    let high_wavelen = original / high;
    base.iter()
        .map(|&f| {
            let wavelen = 2.0 * std::f64::consts::PI / f;
            let scaled = if wavelen < high_wavelen {
                f
            } else if wavelen > low_wavelen {
                f / factor
            } else {
                let smooth = (original / wavelen - low) / (high - low);
                (1.0 - smooth) * f / factor + smooth * f
            };
            scaled as f32
        })
        .collect()
}

fn yarn_scale(
    base: &[f64],
    d: f64,
    theta: f64,
    factor: f64,
    original: f64,
    beta_fast: f64,
    beta_slow: f64,
) -> (Vec<f32>, f32) {
    // Dimension index at which a frequency completes `rotations` turns over the original context.
    let dim_for = |rotations: f64| d * (original / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * theta.ln());
    let low = dim_for(beta_fast).floor().max(0.0);
    let high = dim_for(beta_slow).ceil().min(d - 1.0);
    let inv = base
        .iter()
        .enumerate()
        .map(|(i, &f)| {
            let ramp = if high == low { 0.0 } else { ((i as f64 - low) / (high - low)).clamp(0.0, 1.0) };
            let extrapolation = 1.0 - ramp;
            (f / factor * (1.0 - extrapolation) + f * extrapolation) as f32
        })
        .collect();
    let mscale = if factor <= 1.0 { 1.0 } else { 0.1 * factor.ln() + 1.0 };
    (inv, mscale as f32)
}

/// Serde mirror of a Hugging Face `config.json` (the fields the engine reads).
#[derive(Debug, Clone, Deserialize)]
pub struct HfConfig {
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: Option<usize>,
    pub head_dim: Option<usize>,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f32,
    #[serde(default = "default_theta")]
    pub rope_theta: f32,
    pub rope_scaling: Option<HfRopeScaling>,
    #[serde(default = "default_max_pos")]
    pub max_position_embeddings: usize,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    pub bos_token_id: Option<serde_json::Value>,
    pub eos_token_id: Option<serde_json::Value>,
    /// The MLP's activation: the layers compute SiLU (`silu`, also spelt `swish`) only.
    pub hidden_act: Option<String>,
    /// Mistral's (and Qwen2's, with `use_sliding_window`) attention window.
    pub sliding_window: Option<usize>,
    pub use_sliding_window: Option<bool>,
}

fn default_eps() -> f32 {
    1e-6
}
fn default_theta() -> f32 {
    10_000.0
}
fn default_max_pos() -> usize {
    2048
}

/// `rope_scaling` object of a Hugging Face config.
#[derive(Debug, Clone, Deserialize)]
pub struct HfRopeScaling {
    #[serde(alias = "type")]
    pub rope_type: String,
    pub factor: Option<f32>,
    pub low_freq_factor: Option<f32>,
    pub high_freq_factor: Option<f32>,
    pub original_max_position_embeddings: Option<usize>,
    pub beta_fast: Option<f32>,
    pub beta_slow: Option<f32>,
}

impl HfConfig {
    /// Reads and parses `config.json`.
    pub fn read(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        serde_json::from_str(&text).map_err(|e| {
            // A trained drafter's directory given where a model goes (`--model`, `--draft-model`).
            let drafter = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("drafter").and_then(|d| d.as_str()).map(str::to_owned));
            let problem = match drafter {
                Some(kind) => format!(
                    "a trained drafter (`{kind}`), not a model: it goes to --drafter (with --method {kind}); \
                     --model and --draft-model take a GGUF file or a Hugging Face model directory"
                ),
                None => e.to_string(),
            };
            ModelError::Config { path: path.to_path_buf(), problem }
        })
    }

    /// Resolves into the runtime configuration.
    pub fn into_config(self, path: &Path) -> Result<ModelConfig, ModelError> {
        let architecture = Architecture::parse(&self.model_type).ok_or_else(|| ModelError::UnknownArchitecture {
            path: path.to_path_buf(),
            name: self.model_type.clone(),
        })?;
        let refuse = |problem: String| ModelError::Config { path: path.to_path_buf(), problem };
        match self.hidden_act.as_deref() {
            None | Some("silu" | "swish") => {}
            Some(other) => {
                return Err(refuse(format!(
                    "hidden_act `{other}`: the {} layers compute SiLU (SwiGLU) only",
                    architecture.gguf_name()
                )))
            }
        }
        // Attention over the last `window` tokens equals full attention while the context is no
        // longer than the window: the context is limited to it.
        let window = match (self.model_type.as_str(), self.sliding_window) {
            ("mistral", Some(w)) => Some(w),
            (_, Some(w)) if self.use_sliding_window == Some(true) => Some(w),
            _ => None,
        };
        let max_position_embeddings = match window {
            Some(0) => return Err(refuse("sliding_window is 0".into())),
            Some(w) if w < self.max_position_embeddings => {
                tracing::warn!(
                    "{}: attention is limited to a sliding window of {w} tokens: the context is limited to it (max_position_embeddings {})",
                    path.display(),
                    self.max_position_embeddings
                );
                w
            }
            _ => self.max_position_embeddings,
        };
        let head_dim = self.head_dim.unwrap_or(self.hidden_size / self.num_attention_heads.max(1));
        let rope_scaling = match self.rope_scaling {
            None => RopeScaling::None,
            Some(s) => hf_rope_scaling(s, self.max_position_embeddings, path)?,
        };
        let config = ModelConfig {
            architecture,
            vocab_size: self.vocab_size,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            num_layers: self.num_hidden_layers,
            num_heads: self.num_attention_heads,
            num_kv_heads: self.num_key_value_heads.unwrap_or(self.num_attention_heads),
            head_dim,
            rms_norm_eps: self.rms_norm_eps,
            rope_theta: self.rope_theta,
            rope_scaling,
            max_position_embeddings,
            tie_word_embeddings: self.tie_word_embeddings,
        };
        config.validate_keys(path, &hf_key)?;
        Ok(config)
    }
}

/// The `config.json` field a [`ModelConfig`] field is read from, for error messages.
fn hf_key(field: &str) -> String {
    match field {
        "num_layers" => "num_hidden_layers",
        "num_heads" => "num_attention_heads",
        "num_kv_heads" => "num_key_value_heads",
        "rope_scaling.original_max_position" => "rope_scaling.original_max_position_embeddings",
        other => other,
    }
    .to_string()
}

fn hf_rope_scaling(s: HfRopeScaling, max_pos: usize, path: &Path) -> Result<RopeScaling, ModelError> {
    let factor = s.factor.unwrap_or(1.0);
    let original = s.original_max_position_embeddings.unwrap_or(max_pos);
    Ok(match s.rope_type.as_str() {
        "default" => RopeScaling::None,
        "linear" => RopeScaling::Linear { factor },
        "llama3" => RopeScaling::Llama3 {
            factor,
            low_freq_factor: s.low_freq_factor.unwrap_or(1.0),
            high_freq_factor: s.high_freq_factor.unwrap_or(4.0),
            original_max_position: original,
        },
        "yarn" => RopeScaling::Yarn {
            factor,
            original_max_position: original,
            beta_fast: s.beta_fast.unwrap_or(32.0),
            beta_slow: s.beta_slow.unwrap_or(1.0),
        },
        other => {
            return Err(ModelError::Config {
                path: path.to_path_buf(),
                problem: format!("rope_scaling type `{other}` is not supported (default, linear, llama3, yarn)"),
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ModelConfig {
        ModelConfig {
            architecture: Architecture::Llama,
            vocab_size: 10,
            hidden_size: 8,
            intermediate_size: 16,
            num_layers: 1,
            num_heads: 2,
            num_kv_heads: 1,
            head_dim: 4,
            rms_norm_eps: 1e-5,
            rope_theta: 10_000.0,
            rope_scaling: RopeScaling::None,
            max_position_embeddings: 64,
            tie_word_embeddings: true,
        }
    }

    #[test]
    fn linear_scaling_divides_every_frequency() {
        let plain = base().rope_inv_freq().0;
        let cfg = ModelConfig { rope_scaling: RopeScaling::Linear { factor: 4.0 }, ..base() };
        let scaled = cfg.rope_inv_freq().0;
        for (p, s) in plain.iter().zip(&scaled) {
            assert!((p / 4.0 - s).abs() < 1e-7);
        }
    }

    #[test]
    fn llama3_keeps_high_frequencies_and_divides_low_ones() {
        let cfg = ModelConfig {
            head_dim: 64,
            rope_theta: 500_000.0,
            rope_scaling: RopeScaling::Llama3 {
                factor: 8.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position: 8192,
            },
            ..base()
        };
        let plain = ModelConfig { rope_scaling: RopeScaling::None, ..cfg.clone() }.rope_inv_freq().0;
        let scaled = cfg.rope_inv_freq().0;
        assert_eq!(scaled[0], plain[0], "the fastest frequency is kept");
        let last = plain.len() - 1;
        assert!((scaled[last] - plain[last] / 8.0).abs() < 1e-12, "the slowest frequency is divided by the factor");
    }

    fn problem(cfg: &ModelConfig) -> String {
        cfg.validate_keys(Path::new("/x/config.json"), &hf_key).unwrap_err().to_string()
    }

    #[test]
    fn zero_sizes_are_rejected_naming_the_field() {
        let cases = [
            (ModelConfig { max_position_embeddings: 0, ..base() }, "max_position_embeddings is 0"),
            (ModelConfig { num_layers: 0, ..base() }, "num_hidden_layers is 0"),
            (ModelConfig { num_heads: 0, ..base() }, "num_attention_heads is 0"),
            (ModelConfig { num_kv_heads: 0, ..base() }, "num_key_value_heads is 0"),
            (ModelConfig { intermediate_size: 0, ..base() }, "intermediate_size is 0"),
            (ModelConfig { vocab_size: 0, ..base() }, "vocab_size is 0"),
            (ModelConfig { head_dim: 3, ..base() }, "head_dim (3) must be even"),
            (ModelConfig { num_heads: usize::MAX, num_kv_heads: 1, ..base() }, "overflows"),
        ];
        for (cfg, needle) in cases {
            let err = problem(&cfg);
            assert!(err.contains("/x/config.json") && err.contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn bad_floats_are_rejected_naming_the_field() {
        let cases = [
            (ModelConfig { rms_norm_eps: f32::NAN, ..base() }, "rms_norm_eps is NaN"),
            (ModelConfig { rms_norm_eps: 0.0, ..base() }, "rms_norm_eps is 0"),
            (ModelConfig { rope_theta: f32::INFINITY, ..base() }, "rope_theta is inf"),
            (ModelConfig { rope_theta: 0.5, ..base() }, "rope_theta is 0.5; it must be greater than 1"),
            (ModelConfig { rope_scaling: RopeScaling::Linear { factor: 0.0 }, ..base() }, "rope_scaling.factor is 0"),
            (
                ModelConfig {
                    rope_scaling: RopeScaling::Yarn {
                        factor: 4.0,
                        original_max_position: 0,
                        beta_fast: 32.0,
                        beta_slow: 1.0,
                    },
                    ..base()
                },
                "rope_scaling.original_max_position_embeddings is 0",
            ),
            (
                ModelConfig {
                    rope_scaling: RopeScaling::Llama3 {
                        factor: 8.0,
                        low_freq_factor: 4.0,
                        high_freq_factor: 4.0,
                        original_max_position: 8192,
                    },
                    ..base()
                },
                "must be greater than rope_scaling.low_freq_factor",
            ),
            (
                ModelConfig { rope_scaling: RopeScaling::PerFrequency { factors: vec![1.0, f32::NAN] }, ..base() },
                "rope_scaling.factors[1] is NaN",
            ),
        ];
        for (cfg, needle) in cases {
            let err = problem(&cfg);
            assert!(err.contains(needle), "{needle}: {err}");
        }
        assert!(base().validate(Path::new("x")).is_ok());
    }

    #[test]
    fn invalid_gqa_is_rejected_with_the_path() {
        let cfg = ModelConfig { num_heads: 3, num_kv_heads: 2, ..base() };
        let err = cfg.validate(Path::new("/x/config.json")).unwrap_err().to_string();
        assert!(err.contains("/x/config.json") && err.contains("num_kv_heads"), "{err}");
    }

    #[test]
    fn a_drafters_config_read_as_a_models_says_where_it_goes() {
        let dir = std::env::temp_dir().join(format!("draftsmith-drafter-as-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.json");
        std::fs::write(&path, r#"{"drafter": "redrafter", "vocab_size": 40, "hidden_size": 8}"#).unwrap();
        let err = HfConfig::read(&path).unwrap_err().to_string();
        assert!(err.contains("config.json") && err.contains("a trained drafter (`redrafter`)"), "{err}");
        assert!(err.contains("--drafter (with --method redrafter)"), "{err}");
        // Any other unparsable config keeps serde's own message.
        std::fs::write(&path, r#"{"vocab_size": 40}"#).unwrap();
        let err = HfConfig::read(&path).unwrap_err().to_string();
        assert!(err.contains("missing field"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
