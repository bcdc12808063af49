//! `drafter.safetensors` with the reference's state-dict names
//! (`model.medusa_layers.{i}.linear.weight` `[out, in]`, `…input_layernorm.weight`,
//! `…post_layernorm.weight`) and a `config.json` with the heads' shape and the target's identity.

use std::path::Path;

use burn::module::Param;
use burn::nn::RmsNorm;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

use super::config::TokenSwiftConfig;
use super::model::{TokenSwiftHead, TokenSwiftHeads};
use crate::error::HeadsError;
use crate::identity::{DrafterKind, TargetIdentity};
use crate::redrafter::{CONFIG_FILE, WEIGHTS_FILE};
use crate::tensors::{push_linear, read_config, write, write_config, Named, Reader};

/// The `drafter` field of a TokenSwift `config.json`.
pub const KIND: DrafterKind = DrafterKind::TokenSwift;

/// `config.json` of exported TokenSwift heads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenSwiftFile {
    /// Always `"tokenswift"`.
    pub drafter: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_heads: usize,
    pub rms_norm_eps: f64,
    /// The target the heads were trained for.
    pub target: Option<TargetIdentity>,
    /// Free-form provenance: data, book split, steps.
    #[serde(default)]
    pub training: serde_json::Value,
}

impl TokenSwiftFile {
    pub fn config(&self) -> TokenSwiftConfig {
        TokenSwiftConfig::new(self.vocab_size, self.hidden_size)
            .with_num_heads(self.num_heads)
            .with_rms_norm_eps(self.rms_norm_eps)
    }
}

fn prefix(i: usize) -> String {
    format!("model.medusa_layers.{i}")
}

fn push_norm<B: Backend>(out: &mut Named, name: String, norm: &RmsNorm<B>) {
    let w = norm.gamma.val();
    let n = w.dims()[0];
    out.push((name, vec![n], w.into_data().convert::<f32>().to_vec::<f32>().expect("f32 norm weight")));
}

/// Writes `dir/drafter.safetensors` and `dir/config.json` (each via a temporary file and rename).
pub fn save_tokenswift<B: Backend>(
    dir: &Path,
    heads: &TokenSwiftHeads<B>,
    config: &TokenSwiftConfig,
    target: &TargetIdentity,
    training: serde_json::Value,
) -> Result<(), HeadsError> {
    draftsmith_core::fsio::create_dir(dir).map_err(HeadsError::io(dir))?;
    let mut named: Named = Vec::new();
    for (i, head) in heads.heads.iter().enumerate() {
        push_linear(&mut named, &format!("{}.linear", prefix(i)), &head.linear);
        push_norm(&mut named, format!("{}.input_layernorm.weight", prefix(i)), &head.input_norm);
        push_norm(&mut named, format!("{}.post_layernorm.weight", prefix(i)), &head.post_norm);
    }
    write(&dir.join(WEIGHTS_FILE), &named, None)?;
    let file = TokenSwiftFile {
        drafter: KIND.to_string(),
        vocab_size: config.vocab_size,
        hidden_size: config.hidden_size,
        num_heads: config.num_heads,
        rms_norm_eps: config.rms_norm_eps,
        target: Some(target.clone()),
        training,
    };
    write_config(dir, &file)
}

/// Reads `dir/config.json` alone and checks it describes TokenSwift heads.
pub fn read_tokenswift_file(dir: &Path) -> Result<TokenSwiftFile, HeadsError> {
    let (path, file): (_, TokenSwiftFile) = read_config(dir, KIND)?;
    file.config().validate().map_err(|problem| HeadsError::Config { path, problem })?;
    Ok(file)
}

/// Loads exported heads. With `target`, refuses heads trained for another target.
pub fn load_tokenswift<B: Backend>(
    dir: &Path,
    target: Option<&TargetIdentity>,
    device: &B::Device,
) -> Result<(TokenSwiftHeads<B>, TokenSwiftFile), HeadsError> {
    let file = read_tokenswift_file(dir)?;
    let config_path = dir.join(CONFIG_FILE);
    if let Some(given) = target {
        crate::identity::check_target(&config_path, file.vocab_size, file.hidden_size, file.target.as_ref(), given)?;
    }
    let config = file.config();
    let path = dir.join(WEIGHTS_FILE);
    let mut reader = Reader::open(&path)?;
    let h = config.hidden_size;
    let mut heads = Vec::with_capacity(config.num_heads);
    for i in 0..config.num_heads {
        let linear = reader.linear::<B>(&format!("{}.linear", prefix(i)), h, h, false, device)?;
        let mut norm = |name: &str| -> Result<RmsNorm<B>, HeadsError> {
            let w = reader.take(&format!("{}.{name}.weight", prefix(i)), &[h])?;
            let mut norm = burn::nn::RmsNormConfig::new(h).with_epsilon(config.rms_norm_eps).init::<B>(device);
            norm.gamma = Param::from_tensor(Tensor::from_data(TensorData::new(w, [h]), device));
            Ok(norm)
        };
        let input_norm = norm("input_layernorm")?;
        let post_norm = norm("post_layernorm")?;
        heads.push(TokenSwiftHead { input_norm, linear, post_norm });
    }
    reader.finish("TokenSwift")?;
    Ok((TokenSwiftHeads { heads }, file))
}
