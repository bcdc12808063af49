//! The frozen target's final hidden states (after the final norm) for every training sequence:
//! computed at the start of a run (online mode), or written once by `draftsmith hidden`
//! ([`write_hidden`]) and read back from that cache ([`open_cached`]).
//!
//! Both modes keep the rows as f16 (the cache's format), so a drafter trained from the cache
//! and one trained online with the same seed see the same inputs and get the same metrics.

use std::path::Path;

use burn::tensor::backend::Backend;
use draftsmith_data::hidden::{
    read_hidden_manifest, HiddenCache, HiddenManifest, HiddenWriter, Kept, HIDDEN_MANIFEST_FILE,
};
use draftsmith_data::TargetId;
use draftsmith_model::{AttentionMask, Model};
use half::f16;

use crate::distilled::DistilledSequences;
use crate::error::TrainError;
use crate::examples::Sequence;

/// Hidden states of all sequences.
pub struct HiddenStore {
    hidden: usize,
    rows: Rows,
}

enum Rows {
    /// Computed in this process: f16 rows of every sequence, one after another, and where each
    /// sequence starts (in rows).
    Memory { data: Vec<f16>, offsets: Vec<usize> },
    /// Read from a `draftsmith hidden` cache.
    Cached(HiddenCache),
}

impl HiddenStore {
    /// Appends the hidden state at `pos` of sequence `seq` to `out`, as f32.
    pub fn extend_row(&self, seq: usize, pos: usize, out: &mut Vec<f32>) {
        match &self.rows {
            Rows::Memory { data, offsets } => {
                let start = (offsets[seq] + pos) * self.hidden;
                out.extend(data[start..start + self.hidden].iter().map(|x| x.to_f32()));
            }
            Rows::Cached(cache) => cache.extend_row(seq, pos, out),
        }
    }

    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// Where the rows come from, for logs and summaries: `online` or the cache directory.
    pub fn source(&self) -> String {
        match &self.rows {
            Rows::Memory { .. } => "online".into(),
            Rows::Cached(cache) => cache.dir().display().to_string(),
        }
    }
}

/// One sequence's final hidden states, `[len × hidden]` row-major (one causal pass).
fn sequence_hidden<B: Backend>(model: &Model<B>, seq: &Sequence) -> Result<Vec<f32>, TrainError> {
    let mut cache = model.new_cache(seq.tokens.len());
    let positions: Vec<usize> = (0..seq.tokens.len()).collect();
    let out = model.forward_hidden(&seq.tokens, &positions, &AttentionMask::Causal, &mut cache)?;
    Ok(out.hidden_final.into_data().convert::<f32>().to_vec::<f32>().expect("f32 hidden states"))
}

/// Runs the target over each sequence (one causal pass each); `progress(done_tokens)` is called
/// after each sequence.
pub fn compute_hidden<B: Backend>(
    model: &Model<B>,
    seqs: &[Sequence],
    progress: &mut dyn FnMut(usize),
) -> Result<HiddenStore, TrainError> {
    let hidden = model.config().hidden_size;
    let total: usize = seqs.iter().map(|s| s.tokens.len()).sum();
    let mut data = Vec::with_capacity(total * hidden);
    let mut offsets = Vec::with_capacity(seqs.len());
    let mut done = 0;
    for seq in seqs {
        offsets.push(done);
        data.extend(sequence_hidden(model, seq)?.into_iter().map(f16::from_f32));
        done += seq.tokens.len();
        progress(done);
    }
    Ok(HiddenStore { hidden, rows: Rows::Memory { data, offsets } })
}

/// What ties a cache to its sequences and the engine that computed them: the dataset's
/// fingerprint without the `limit` it was read with (a cache of the whole dataset serves any
/// `--limit`; the sequences' lengths are checked one by one), plus `engine` (`cpu/quantized/int8`:
/// activation modes give other hidden states). A cache written before the engine was recorded
/// (`recorded` without one) is compared without it.
fn dataset_key(data: &DistilledSequences, engine: &str, recorded: Option<&serde_json::Value>) -> serde_json::Value {
    let mut key = data.fingerprint.clone();
    if let Some(map) = key.as_object_mut() {
        map.remove("limit");
        if recorded.is_none_or(|r| r.get(ENGINE).is_some()) {
            map.insert(ENGINE.into(), engine.into());
        }
    }
    key
}

/// The cache's dataset key naming the engine that computed the hidden states.
const ENGINE: &str = "engine";

fn lengths(seqs: &[Sequence]) -> Vec<usize> {
    seqs.iter().map(|s| s.tokens.len()).collect()
}

/// Bytes a cache of `data` takes for a target of `hidden_size` (f16 rows).
pub fn cache_bytes(data: &DistilledSequences, hidden_size: usize) -> u64 {
    draftsmith_data::hidden::hidden_bytes(data.tokens(), hidden_size)
}

/// What [`write_hidden`] reports as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HiddenEvent {
    /// The cache is open: `done` of `total` tokens are already written (a resumed run);
    /// `kept` says what was kept of a cache computed for an earlier state of the dataset (before
    /// a later `distill --limit`, say).
    Opened { done: usize, total: usize, kept: Option<Kept> },
    /// One more sequence written (pending its shard): `done` of `total` tokens.
    Progress { done: usize, total: usize },
}

/// Writes (or resumes, or extends) the hidden-state cache of `data` in `dir`, `per_shard`
/// sequences per shard, reporting to `on_event`. A listed shard whose file is missing is
/// recomputed, the others kept ([`HiddenWriter::todo`]).
pub fn write_hidden<B: Backend>(
    model: &Model<B>,
    target: &TargetId,
    engine: &str,
    data: &DistilledSequences,
    dir: &Path,
    per_shard: usize,
    on_event: &mut dyn FnMut(HiddenEvent),
) -> Result<HiddenManifest, TrainError> {
    let hidden = model.config().hidden_size;
    let lengths = lengths(&data.sequences);
    let total: usize = lengths.iter().sum();
    if total == 0 {
        // A cache of nothing would only stand in the way of the dataset's real one later.
        return Err(TrainError::NoExamples(
            "the dataset has no sequences to compute hidden states for (its distillation has written no shard yet, or --limit 0)"
                .into(),
        ));
    }
    // A complete cache of more of the dataset's sequences (a larger --limit) already serves these.
    let manifest = dir.join(HIDDEN_MANIFEST_FILE).is_file().then(|| read_hidden_manifest(dir)).transpose()?;
    let key = dataset_key(data, engine, manifest.as_ref().filter(|m| !m.shards.is_empty()).map(|m| &m.dataset));
    if let Some(m) = manifest.filter(|m| {
        m.complete && m.target == *target && m.dataset == key && m.sequences > lengths.len() && m.hidden_size == hidden
    }) {
        draftsmith_core::fsio::DirLock::check_not_written(dir)?;
        HiddenCache::open(dir, &lengths)?;
        on_event(HiddenEvent::Opened { done: total, total, kept: None });
        return Ok(m);
    }
    let mut writer =
        HiddenWriter::open(dir, target.clone(), key, hidden, lengths.clone(), &data.shard_sequences, per_shard)?;
    // The sequences of listed shards whose files are missing (just those shards are
    // recomputed), then those after the listed shards.
    let todo = writer.todo();
    let mut done: usize = total - todo.iter().map(|r| lengths[r.clone()].iter().sum::<usize>()).sum::<usize>();
    on_event(HiddenEvent::Opened { done, total, kept: writer.kept() });
    for seq in todo.into_iter().flat_map(|r| &data.sequences[r]) {
        writer.push(&sequence_hidden(model, seq)?)?;
        done += seq.tokens.len();
        on_event(HiddenEvent::Progress { done, total });
    }
    Ok(writer.finish()?)
}

/// Opens the cache in `dir` for `data`: refused (naming the file) when it was computed for
/// another target (`target_sha`), by another `engine`, for another dataset or with other
/// reading settings, or does not hold every sequence of `data`.
pub fn open_cached(
    dir: &Path,
    target_sha: &str,
    engine: &str,
    data: &DistilledSequences,
) -> Result<HiddenStore, TrainError> {
    if !dir.is_dir() {
        let problem = "not a directory: a hidden-state cache is the directory `draftsmith hidden` writes".to_string();
        return Err(TrainError::Dir { path: dir.to_path_buf(), problem });
    }
    // A cache `draftsmith hidden` is still writing is named as such, not as one left unfinished.
    draftsmith_core::fsio::DirLock::check_not_written(dir)?;
    if !dir.join(HIDDEN_MANIFEST_FILE).exists() {
        let problem = format!(
            "not a hidden-state cache: it has no {HIDDEN_MANIFEST_FILE} (a cache is the directory `draftsmith hidden` \
             writes)"
        );
        return Err(TrainError::Dir { path: dir.to_path_buf(), problem });
    }
    let manifest = read_hidden_manifest(dir)?;
    let path = dir.join(HIDDEN_MANIFEST_FILE);
    // Each refusal ends with its remedy; training online always works.
    let refuse = |problem: String, fix: &str| TrainError::HiddenMismatch {
        path: path.clone(),
        problem: format!("{problem}; {fix}, or train with --online"),
    };
    const RECOMPUTE: &str = "delete this cache and run `draftsmith hidden` for this dataset and target";
    if manifest.target.sha256 != target_sha {
        return Err(refuse(
            format!(
                "computed with `{}` (sha256 {}), not with the target being trained for (sha256 {target_sha})",
                manifest.target.name, manifest.target.sha256
            ),
            RECOMPUTE,
        ));
    }
    if let Some(theirs) = manifest.dataset.get(ENGINE).and_then(|e| e.as_str()).filter(|e| *e != engine) {
        return Err(refuse(
            format!("computed by the `{theirs}` engine, and this run's is `{engine}` (its hidden states differ)"),
            "train with the options the cache was computed with (--activations, --kv-keys, --device), compute \
             another cache with this run's (`draftsmith hidden --out`)",
        ));
    }
    let key = dataset_key(data, engine, Some(&manifest.dataset));
    if manifest.dataset != key {
        let (cache, run) = draftsmith_data::hidden::describe_datasets(&manifest.dataset, &key);
        let fix = if draftsmith_data::hidden::shared_shards(&manifest.dataset, &key) > 0 {
            "run `draftsmith hidden` for this dataset to update it (the rows of the dataset shards both share are kept)"
        } else {
            RECOMPUTE
        };
        return Err(refuse(
            format!("computed for another dataset or other reading settings (cache: {cache}; this run: {run})"),
            fix,
        ));
    }
    let cache = HiddenCache::open(dir, &lengths(&data.sequences))?;
    Ok(HiddenStore { hidden: cache.hidden_size(), rows: Rows::Cached(cache) })
}
