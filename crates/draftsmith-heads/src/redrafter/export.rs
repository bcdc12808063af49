//! `drafter.safetensors` with the reference key names (`rnn_w.weight`, `rnn_u.{weight,bias}`,
//! `lm_head.{i}.linear.{weight,bias}`, `lm_head.{N}.weight`; PyTorch `[out, in]` layout) and a
//! `config.json` with the reference fields plus the head kind and the target's identity.

use std::path::Path;

use burn::tensor::backend::Backend;
use serde::{Deserialize, Serialize};

use super::config::{HeadKind, ReDrafterConfig};
use super::model::{ReDrafter, ResBlock};
use crate::error::HeadsError;
use crate::identity::{DrafterKind, TargetIdentity};
use crate::tensors::{push_linear, read_config, write, write_config, Named, Reader};

pub const WEIGHTS_FILE: &str = "drafter.safetensors";
pub const CONFIG_FILE: &str = "config.json";

/// `config.json` of an exported ReDrafter drafter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrafterFile {
    /// Always `"redrafter"`.
    pub drafter: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub exit_dim: usize,
    pub num_draft_layers: usize,
    pub rnn: bool,
    /// Absent in reference checkpoints, which always have a full head.
    #[serde(default = "full_head")]
    pub head: HeadKind,
    /// The target this drafter was trained for (absent in reference checkpoints).
    #[serde(default)]
    pub target: Option<TargetIdentity>,
    /// The tokens the drafter may propose (ascending ids; the most frequent labels of its
    /// training data), when it was trained on a draft vocabulary; absent: the whole vocabulary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_vocab: Option<Vec<u32>>,
    /// Free-form provenance: data, steps, budget.
    #[serde(default)]
    pub training: serde_json::Value,
}

fn full_head() -> HeadKind {
    HeadKind::Full
}

impl DrafterFile {
    pub fn config(&self) -> ReDrafterConfig {
        ReDrafterConfig::new(self.vocab_size, self.hidden_size, self.exit_dim)
            .with_num_draft_layers(self.num_draft_layers)
            .with_rnn(self.rnn)
            .with_head(self.head)
    }
}

/// Writes `dir/drafter.safetensors` and `dir/config.json` (each via a temporary file and rename);
/// `draft_vocab`: the ids the drafter was trained to propose (see [`DrafterFile::draft_vocab`]).
pub fn save_redrafter<B: Backend>(
    dir: &Path,
    drafter: &ReDrafter<B>,
    config: &ReDrafterConfig,
    target: &TargetIdentity,
    draft_vocab: Option<&[u32]>,
    training: serde_json::Value,
) -> Result<(), HeadsError> {
    draftsmith_core::fsio::create_dir(dir).map_err(HeadsError::io(dir))?;
    let mut named = body_tensors(drafter);
    push_linear(&mut named, &format!("lm_head.{}", drafter.blocks.len()), &drafter.out);
    write(&dir.join(WEIGHTS_FILE), &named, None)?;
    let file = DrafterFile {
        drafter: DrafterKind::ReDrafter.to_string(),
        vocab_size: config.vocab_size,
        hidden_size: config.hidden_size,
        exit_dim: config.exit_dim,
        num_draft_layers: config.num_draft_layers,
        rnn: config.rnn,
        head: config.head,
        target: Some(target.clone()),
        draft_vocab: draft_vocab.map(<[u32]>::to_vec),
        training,
    };
    write_config(dir, &file)
}

/// The RNN and ResBlock tensors under their reference names (everything but the output layer).
pub(crate) fn body_tensors<B: Backend>(drafter: &ReDrafter<B>) -> Named {
    let mut named: Named = Vec::new();
    if let (Some(w), Some(u)) = (&drafter.rnn_w, &drafter.rnn_u) {
        push_linear(&mut named, "rnn_w", w);
        push_linear(&mut named, "rnn_u", u);
    }
    for (i, block) in drafter.blocks.iter().enumerate() {
        push_linear(&mut named, &format!("lm_head.{i}.linear"), &block.linear);
    }
    named
}

/// Reads `dir/config.json` alone.
pub fn read_drafter_file(dir: &Path) -> Result<DrafterFile, HeadsError> {
    let (path, file): (_, DrafterFile) = read_config(dir, DrafterKind::ReDrafter)?;
    file.config().validate().map_err(|problem| HeadsError::Config { path: path.clone(), problem })?;
    if let Some(ids) = &file.draft_vocab {
        if ids.is_empty()
            || ids.windows(2).any(|w| w[0] >= w[1])
            || ids.last().is_some_and(|&last| last as usize >= file.vocab_size)
        {
            let problem = format!(
                "draft_vocab must be a non-empty list of strictly increasing token ids below vocab_size {}",
                file.vocab_size
            );
            return Err(HeadsError::Config { path, problem });
        }
    }
    if let Some(problem) = draft_vocab_against_training(&file) {
        return Err(HeadsError::Config { path, problem });
    }
    Ok(file)
}

/// Where `draft_vocab` contradicts the draft vocabulary training recorded
/// (`training.config.draft_vocab` and `.head`, written by `train redrafter`): a tied head trained
/// on fewer tokens than the vocabulary must list at most that many (fewer when its data had
/// fewer distinct labels). A drafter without the record (the reference layout, older exports) is
/// taken as it is.
fn draft_vocab_against_training(file: &DrafterFile) -> Option<String> {
    let trained = file.training.get("config")?;
    let asked = trained.get("draft_vocab")?.as_u64()? as usize;
    let tied = trained.get("head").and_then(|h| h.as_str()).map_or(file.head == HeadKind::Tied, |h| h == "tied");
    if !tied || asked == 0 || asked >= file.vocab_size {
        return None;
    }
    match &file.draft_vocab {
        None => Some(format!(
            "no `draft_vocab` list, but training.config.draft_vocab records {asked} tokens: the list was removed or \
             its key misspelt (re-export the drafter from its run directory)"
        )),
        Some(ids) if ids.len() > asked => Some(format!(
            "`draft_vocab` lists {} tokens, more than the {asked} training.config.draft_vocab records",
            ids.len()
        )),
        Some(_) => None,
    }
}

/// The weights of the drafter in `dir`: draftsmith's `drafter.safetensors`, or the reference
/// layout's `model.safetensors` when only that exists.
pub fn weights_path(dir: &Path) -> std::path::PathBuf {
    let own = dir.join(WEIGHTS_FILE);
    let reference = dir.join(super::reference::REFERENCE_WEIGHTS_FILE);
    if !own.exists() && reference.exists() {
        reference
    } else {
        own
    }
}

/// Loads an exported drafter, in draftsmith's layout or the reference one. With `target`, refuses a drafter trained for another target
/// (and one whose vocabulary or hidden size does not fit it).
pub fn load_redrafter<B: Backend>(
    dir: &Path,
    target: Option<&TargetIdentity>,
    device: &B::Device,
) -> Result<(ReDrafter<B>, DrafterFile), HeadsError> {
    let file = read_drafter_file(dir)?;
    let config_path = dir.join(CONFIG_FILE);
    if let Some(given) = target {
        crate::identity::check_target(&config_path, file.vocab_size, file.hidden_size, file.target.as_ref(), given)?;
    }
    let config = file.config();
    let path = weights_path(dir);
    let mut reader = Reader::open(&path)?;
    let h = config.hidden_size;
    let (rnn_w, rnn_u) = if config.rnn {
        (
            Some(reader.linear::<B>("rnn_w", h, h, false, device)?),
            Some(reader.linear::<B>("rnn_u", h, h, true, device)?),
        )
    } else {
        (None, None)
    };
    let blocks = (0..config.num_draft_layers)
        .map(|i| {
            Ok(ResBlock {
                linear: reader.linear::<B>(
                    &format!("lm_head.{i}.linear"),
                    config.exit_dim,
                    config.exit_dim,
                    true,
                    device,
                )?,
            })
        })
        .collect::<Result<Vec<_>, HeadsError>>()?;
    let out = reader.linear::<B>(
        &format!("lm_head.{}", config.num_draft_layers),
        config.exit_dim,
        config.out_dim(),
        false,
        device,
    )?;
    reader.finish("ReDrafter")?;
    Ok((ReDrafter { rnn_w, rnn_u, blocks, out }, file))
}
