//! `--model` resolution: a catalog name, a `.gguf` file, a Hugging Face directory, or
//! `hf:org/name[@revision]` through hf-hub; the default model when none is given.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use draftsmith_model::{load_model, Activations, KvKeys, LoadOptions, LoadedModel, MatmulWeights};

use crate::backend::DeviceKind;
use crate::progress::fetch_with_progress;

/// The model every command uses when `--model` is not given.
pub const DEFAULT_MODEL: &str = "smollm2-135m";

/// Model selection flags shared by every command that runs a target.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// A `.gguf` file, a Hugging Face model directory, `hf:org/name[@revision]`, or a name from
    /// `draftsmith fetch --list` (fetched on first use). Default: SmolLM2-135M-Instruct.
    #[arg(long, short = 'm', default_value = DEFAULT_MODEL)]
    pub model: String,
    /// Device to run on.
    #[arg(long, value_enum, default_value_t = DeviceKind::Cpu)]
    pub device: DeviceKind,
    /// Matrix weights: `quantized` multiplies GGUF blocks with draftsmith's CPU kernels (Q8_0/Q4_1 kept,
    /// Q4_0/Q5_0/Q4_K/Q5_K/Q6_K kept with int8 activations, else Q4_0/Q5_0 as Q8_0 and Q4_K as Q4_1 block by
    /// block, other types re-quantized to Q8_0); `dense` keeps f32 burn tensors. Default: quantized
    /// for GGUF on the CPU, dense otherwise.
    #[arg(long, value_enum)]
    pub weights: Option<WeightsArg>,
    /// Activations of the quantized CPU path: `int8` quantizes each activation row per 32 values
    /// (integer dot products, VNNI where present), `f32` multiplies exact f32 activations. Both
    /// are batch-invariant (a token's logits never depend on the batch or draft tree around it).
    #[arg(long, value_enum, default_value_t = ActivationsArg::Int8)]
    pub activations: ActivationsArg,
    /// Attention keys of the quantized CPU path's cache: `float` (f16 with int8 activations, f32
    /// with f32), or `q8_0`: 8-bit blocks whose scores are int8 dot products (values f16) —
    /// faster over long contexts, further from the reference's logits (SmolLM2: 1.6 against 1.3;
    /// Qwen2.5, whose keys have outlier channels: 2.7 against 0.4). Lossless either way: `ar` and
    /// every method run on the same cache.
    #[arg(long, value_enum, default_value_t = KvKeysArg::Float)]
    pub kv_keys: KvKeysArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KvKeysArg {
    Float,
    #[value(name = "q8_0")]
    Q8_0,
}

impl From<KvKeysArg> for KvKeys {
    fn from(a: KvKeysArg) -> Self {
        match a {
            KvKeysArg::Float => KvKeys::Float,
            KvKeysArg::Q8_0 => KvKeys::Q8_0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ActivationsArg {
    Int8,
    F32,
}

impl From<ActivationsArg> for Activations {
    fn from(a: ActivationsArg) -> Self {
        match a {
            ActivationsArg::Int8 => Activations::Int8,
            ActivationsArg::F32 => Activations::F32,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WeightsArg {
    Quantized,
    Dense,
}

impl ModelArgs {
    /// Resolves the model to a local path (fetching or downloading as needed).
    pub fn resolve_path(&self) -> Result<PathBuf> {
        resolve_model_path(&self.model)
    }

    /// The weight representation for a resolved model path.
    pub fn matmul(&self, path: &Path) -> Result<MatmulWeights> {
        Ok(match (self.weights, self.device) {
            (Some(WeightsArg::Dense), _) => MatmulWeights::Dense,
            (Some(WeightsArg::Quantized), DeviceKind::Cpu) => MatmulWeights::Quantized,
            (Some(WeightsArg::Quantized), _) => {
                bail!("--weights quantized needs --device cpu (the quantized kernels are CPU kernels)")
            }
            (None, DeviceKind::Cpu) if path.is_file() => MatmulWeights::Quantized,
            (None, _) => MatmulWeights::Dense,
        })
    }

    /// What the engine's numerics depend on, for manifests: `cpu/quantized/int8`, `cpu/dense`.
    pub fn engine_label(&self, path: &Path) -> Result<String> {
        let matmul = self.matmul(path)?;
        let mut label = format!("{:?}/{:?}", self.device, matmul).to_lowercase();
        if matmul == MatmulWeights::Quantized {
            label.push_str(&format!("/{:?}", self.activations).to_lowercase());
            if self.kv_keys == KvKeysArg::Q8_0 {
                label.push_str("/q8_0-keys");
            }
        }
        Ok(label)
    }

    /// Load options (weights and activation mode) for a resolved model path.
    pub fn load_options(&self, path: &Path) -> Result<LoadOptions> {
        Ok(LoadOptions::new(self.matmul(path)?)
            .with_activations(self.activations.into())
            .with_kv_keys(self.kv_keys.into()))
    }

    /// Resolves and loads the model on backend `B`.
    pub fn load<B: burn::tensor::backend::Backend>(&self, device: &B::Device) -> Result<LoadedModel<B>> {
        self.load_requantized(device, None)
    }

    /// [`ModelArgs::load`] with quantized weights re-quantized to `format` where they are stored
    /// wider (a draft model's `--draft-weights`).
    pub fn load_requantized<B: burn::tensor::backend::Backend>(
        &self,
        device: &B::Device,
        format: Option<draftsmith_model::QFormat>,
    ) -> Result<LoadedModel<B>> {
        let path = self.resolve_path()?;
        let start = std::time::Instant::now();
        let loaded = load_model::<B>(&path, self.load_options(&path)?.with_requantize(format), device)?;
        let requantized = format.map_or_else(|| "no".to_string(), |f| format!("{f:?} where stored wider"));
        tracing::info!(path = %path.display(), seconds = start.elapsed().as_secs_f64(), requantized, "model loaded");
        Ok(loaded)
    }
}

/// Maps a `--model` value to a local file or directory.
pub fn resolve_model_path(spec: &str) -> Result<PathBuf> {
    if let Some(id) = spec.strip_prefix("hf:") {
        return hf_download(id);
    }
    let path = Path::new(spec);
    match (path.metadata(), path.symlink_metadata()) {
        (Ok(_), _) => return Ok(path.to_path_buf()),
        // A link that leads nowhere (a loop, a removed target) is named as what it is.
        (Err(e), Ok(_)) => bail!("{spec}: a symbolic link that does not lead to a file: {e}"),
        (Err(_), Err(_)) => {}
    }
    match draftsmith_fetch::find(spec) {
        // Refused before a download it could not use.
        Ok(draftsmith_fetch::Artifact { arch: Some(arch), .. })
            if draftsmith_model::Architecture::parse(arch).is_none() =>
        {
            let supported = draftsmith_model::Architecture::SUPPORTED;
            bail!("`{spec}` is a {arch} model, which the engine does not run (it runs {supported})")
        }
        Ok(artifact) if artifact.kind == draftsmith_fetch::ArtifactKind::Model => fetch_with_progress(artifact),
        Ok(_) => bail!("`{spec}` is a dataset, not a model"),
        Err(_) if spec.contains('/') || spec.ends_with(".gguf") => bail!("{spec}: no such file or directory"),
        Err(e) => Err(e.into()),
    }
}

/// Files of a Hugging Face model repository the engine reads.
const HF_FILES: &[&str] = &["config.json", "tokenizer.json", "tokenizer_config.json"];

/// Downloads (or finds in the local HF cache) the files of `org/name[@revision]` and returns
/// the snapshot directory.
fn hf_download(id: &str) -> Result<PathBuf> {
    use hf_hub::{api::sync::ApiBuilder, Cache, Repo, RepoType};
    let (name, revision) = id.split_once('@').unwrap_or((id, "main"));
    let parts: Vec<&str> = name.split('/').collect();
    if parts.len() != 2 || parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") || revision.is_empty() {
        bail!("hf:{id}: expected hf:org/name[@revision]");
    }
    let repo = Repo::with_revision(name.to_string(), RepoType::Model, revision.to_string());
    let cache = Cache::from_env().repo(repo.clone());
    let cached = |f: &str| cache.get(f);
    let weights_cached = cached("model.safetensors").or_else(|| cached("model.safetensors.index.json"));
    if let (Some(config), Some(_)) = (cached("config.json"), weights_cached) {
        if HF_FILES.iter().all(|f| *f == "tokenizer_config.json" || cached(f).is_some()) {
            if let Some(index) = cached("model.safetensors.index.json") {
                for shard in shard_names(&index)? {
                    cached(&shard).with_context(|| {
                        format!("hf:{id}: shard {shard} is missing from the local Hugging Face cache")
                    })?;
                }
            }
            return Ok(config.parent().expect("cached file has a parent").to_path_buf());
        }
    }
    if std::env::var("HF_HUB_OFFLINE").map(|v| v == "1").unwrap_or(false) {
        bail!(
            "hf:{id}: not in the local Hugging Face cache ({}) and HF_HUB_OFFLINE=1",
            Cache::from_env().path().display()
        );
    }
    let api = ApiBuilder::from_env()
        .with_progress(true)
        .with_retries(0)
        .build()
        .with_context(|| format!("hf:{id}: cannot set up the Hugging Face client"))?;
    let repo = api.repo(repo);
    let fail = |file: &str| {
        format!("hf:{id}: could not download {file} from the Hugging Face Hub (offline? set HF_HUB_OFFLINE=1 to use only the local cache at {})", Cache::from_env().path().display())
    };
    let config = repo.get("config.json").with_context(|| fail("config.json"))?;
    repo.get("tokenizer.json").with_context(|| fail("tokenizer.json"))?;
    let _ = repo.get("tokenizer_config.json");
    match repo.get("model.safetensors.index.json") {
        Ok(index) => {
            for shard in shard_names(&index)? {
                repo.get(&shard).with_context(|| fail(&shard))?;
            }
        }
        Err(_) => {
            repo.get("model.safetensors").with_context(|| fail("model.safetensors"))?;
        }
    }
    Ok(config.parent().expect("downloaded file has a parent").to_path_buf())
}

fn shard_names(index: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(index).with_context(|| format!("{}: cannot read", index.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: invalid JSON", index.display()))?;
    let map = json
        .get("weight_map")
        .and_then(|m| m.as_object())
        .with_context(|| format!("{}: no weight_map", index.display()))?;
    let mut shards: Vec<String> = map.values().filter_map(|v| v.as_str().map(String::from)).collect();
    shards.sort();
    shards.dedup();
    Ok(shards)
}
