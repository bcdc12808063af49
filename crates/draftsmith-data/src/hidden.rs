//! Cached target hidden states (`draftsmith hidden`): the frozen target's hidden state at every
//! position of every training sequence, written once so that training and its resumes skip the
//! target's forward passes.
//!
//! A cache is a directory (by default `hidden-states/` inside the dataset directory) holding
//! `hidden-manifest.json` and `hidden-00000.safetensors`, `hidden-00001…`. Each shard covers
//! consecutive sequences and holds two tensors: `hidden`, f16 `[tokens, hidden_size]` (the
//! sequences' rows one after another) and `lengths`, i32 `[sequences]`. Shards are written like
//! distilled shards (the manifest first, then each shard as a temporary file, fsync, rename, then
//! listed in the manifest), so a killed run resumes after the last listed shard, and a listed
//! shard whose file is missing (deleted after a checksum mismatch, say) is recomputed on the
//! next run — just that shard. What a resumed run deletes, and what it refuses to touch, is the
//! rule of the crate's `leftovers` module. The manifest ties the cache to the target's SHA-256 and
//! to the dataset it was computed from (its shards' hashes and the reading settings).
//!
//! This module knows nothing of models: rows come in as f32 and go out as f32.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use draftsmith_core::digest::sha256_hex;
use draftsmith_core::fsio::{sync_dir, write_atomic, DirLock};
use half::f16;
use memmap2::Mmap;
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use serde::{Deserialize, Serialize};

use crate::error::DataError;
use crate::leftovers::{refuse_unmanifested_shards, remove_leftovers, todo_ranges, warn_missing, Layout};
use crate::manifest::TargetId;

/// How a cache names its files (see the crate's `leftovers` module).
const LAYOUT: Layout = Layout {
    prefix: "hidden-",
    suffix: ".safetensors",
    manifest: HIDDEN_MANIFEST_FILE,
    command: "`draftsmith hidden`",
    redone: "sequences",
};

/// What to do about a damaged shard.
const REDO_DAMAGED: &str = "delete it and rerun `draftsmith hidden` to redo just that shard";
/// What to do about a missing shard.
const REDO_MISSING: &str = "rerun `draftsmith hidden` with the same arguments to redo just that shard";

/// A dataset identity's shard hashes, in order.
fn shard_hashes(v: &serde_json::Value) -> Vec<String> {
    v.get("shards")
        .and_then(|s| s.as_array())
        .map(|a| a.iter().map(|h| h.as_str().map_or_else(|| h.to_string(), str::to_string)).collect())
        .unwrap_or_default()
}

/// The fields of identity `v` other than its shards that `w` lacks or holds another value for,
/// as `key = value`.
fn other_fields(v: &serde_json::Value, w: &serde_json::Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (a, b) = (v.as_object().unwrap_or(&empty), w.as_object().unwrap_or(&empty));
    a.iter().filter(|(k, x)| *k != "shards" && b.get(*k) != Some(*x)).map(|(k, x)| format!("{k} = {x}")).collect()
}

/// How many leading shards dataset identities `cached` and `run` share (the same hashes in the
/// same places), when every field but the shards is the same on both sides; 0 otherwise. The
/// sequences of those shards are the same in both, first and in order.
pub fn shared_shards(cached: &serde_json::Value, run: &serde_json::Value) -> usize {
    if !other_fields(cached, run).is_empty() || !other_fields(run, cached).is_empty() {
        return 0;
    }
    let (old, new) = (shard_hashes(cached), shard_hashes(run));
    draftsmith_core::common_prefix(&old, &new)
}

/// Whether dataset identity `run` is `cached` grown: the cache's shards a strict prefix of the
/// run's and every other field the same on both sides (what a later `distill --limit` makes of
/// a dataset whose last shard was full; one that ended on a partial shard completes it, a new
/// hash, and shares one shard less).
pub fn dataset_grew(cached: &serde_json::Value, run: &serde_json::Value) -> bool {
    let (old, new) = (shard_hashes(cached), shard_hashes(run));
    old.len() < new.len() && shared_shards(cached, run) == old.len()
}

/// Two dataset identities (a cache's and a run's) in a few words each: their shard counts
/// with the first and last hashes, and the other fields that differ. When the cache's shards
/// are a prefix of the run's ([`dataset_grew`]), the first says the dataset grew since.
pub fn describe_datasets(cached: &serde_json::Value, run: &serde_json::Value) -> (String, String) {
    let (old, new) = (shard_hashes(cached), shard_hashes(run));
    let short = |h: &str| h.chars().take(8).collect::<String>();
    let span = |s: &[String]| match (s.first(), s.last()) {
        (Some(a), Some(b)) => {
            format!("{} shard{} ({}…{})", s.len(), if s.len() == 1 { "" } else { "s" }, short(a), short(b))
        }
        _ => "no shards".to_string(),
    };
    let (was_fields, now_fields) = (other_fields(cached, run), other_fields(run, cached));
    let grown = dataset_grew(cached, run);
    let describe =
        |s: &[String], fields: Vec<String>| std::iter::once(span(s)).chain(fields).collect::<Vec<_>>().join(", ");
    let mut was = describe(&old, was_fields);
    if grown {
        was.push_str(" — the dataset has grown since (a later `distill --limit` extends it in place)");
    }
    (was, describe(&new, now_fields))
}

/// Where a dataset's hidden-state cache goes unless told otherwise: `<dataset>/hidden-states`.
pub const HIDDEN_DIR: &str = "hidden-states";

/// The manifest's file name inside a cache directory.
pub const HIDDEN_MANIFEST_FILE: &str = "hidden-manifest.json";

/// The cache format this crate writes and reads.
pub const HIDDEN_FORMAT_VERSION: u32 = 1;

/// One finished shard of a cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HiddenShardInfo {
    /// File name inside the cache directory.
    pub file: String,
    /// Index of its first sequence.
    pub first_sequence: usize,
    pub sequences: usize,
    pub tokens: usize,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
}

/// The contents of `hidden-manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HiddenManifest {
    /// Always [`HIDDEN_FORMAT_VERSION`].
    pub format_version: u32,
    /// The target whose hidden states these are.
    pub target: TargetId,
    /// What identifies the sequences (the dataset's shard hashes and reading settings), compared
    /// as a whole on resume and by the trainer.
    pub dataset: serde_json::Value,
    pub hidden_size: usize,
    /// Always `f16`.
    pub dtype: String,
    /// Sequences and tokens of the whole cache once complete.
    pub sequences: usize,
    pub tokens: usize,
    /// Finished shards, in sequence order.
    pub shards: Vec<HiddenShardInfo>,
    /// `true` once every sequence is written.
    pub complete: bool,
}

impl HiddenManifest {
    /// Sequences covered by the listed shards.
    pub fn sequences_done(&self) -> usize {
        self.shards.last().map_or(0, |s| s.first_sequence + s.sequences)
    }

    /// Bytes the finished cache takes on disk (f16 rows; lengths and headers not counted).
    pub fn bytes(&self) -> u64 {
        hidden_bytes(self.tokens, self.hidden_size)
    }
}

/// Bytes a cache of `tokens` rows of `hidden_size` takes on disk (f16 rows; lengths and headers
/// not counted).
pub fn hidden_bytes(tokens: usize, hidden_size: usize) -> u64 {
    (tokens * hidden_size * 2) as u64
}

/// Reads and checks `dir/hidden-manifest.json`.
pub fn read_hidden_manifest(dir: &Path) -> Result<HiddenManifest, DataError> {
    let path = dir.join(HIDDEN_MANIFEST_FILE);
    let text = std::fs::read(&path).map_err(DataError::io(&path))?;
    let bad = |problem: String| DataError::BadManifest { path: path.clone(), problem };
    let manifest: HiddenManifest = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
    if manifest.format_version != HIDDEN_FORMAT_VERSION {
        return Err(bad(format!(
            "format_version is {}, this build reads {HIDDEN_FORMAT_VERSION}",
            manifest.format_version
        )));
    }
    if manifest.dtype != "f16" {
        return Err(bad(format!("dtype is {:?}, this build reads f16", manifest.dtype)));
    }
    let mut next = 0;
    for shard in &manifest.shards {
        if shard.first_sequence != next || shard.file.contains(['/', '\\']) {
            return Err(bad(format!("{} does not continue at sequence {next}", shard.file)));
        }
        next += shard.sequences;
    }
    if next > manifest.sequences {
        return Err(bad(format!("its shards hold {next} sequences, more than the {} it lists", manifest.sequences)));
    }
    Ok(manifest)
}

fn write_manifest(dir: &Path, manifest: &HiddenManifest) -> Result<(), DataError> {
    let text = serde_json::to_vec_pretty(manifest).expect("a manifest always serializes");
    write_atomic(&dir.join(HIDDEN_MANIFEST_FILE), &text).map_err(|(path, source)| DataError::Io { path, source })
}

/// Writes a hidden-state cache sequence by sequence, resuming a previous run in the same
/// directory. Sequences are held in memory until their shard is full.
///
/// The caller pushes the sequences [`HiddenWriter::todo`] lists, in that order: first those of
/// the listed shards whose files are missing (each rewritten under its own name), then from the
/// end of the listed shards on.
pub struct HiddenWriter {
    dir: PathBuf,
    manifest: HiddenManifest,
    lengths: Vec<usize>,
    per_shard: usize,
    pending: Vec<u16>,
    pending_lengths: Vec<usize>,
    kept: Option<Kept>,
    /// Listed shards (indices into the manifest's) whose files are missing, in sequence order:
    /// the pushed sequences fill these first.
    redo: Vec<usize>,
    /// Held while the writer lives: a second run into this directory is refused.
    _lock: DirLock,
}

/// What [`HiddenWriter::open`] kept of a cache computed for another state of the dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    /// Sequences kept (the cache's shards within the dataset shards both share).
    pub sequences: usize,
    /// Sequences the cache held.
    pub of: usize,
    /// Dataset shards both share.
    pub shards: usize,
}

impl HiddenWriter {
    /// Creates the cache for sequences of `lengths` tokens, or resumes the one already in `dir`
    /// (which must be for the same target, dataset, hidden size and lengths, with every listed
    /// shard intact). A cache computed for another state of the dataset — one sharing its first
    /// shards ([`shared_shards`]), such as before a later `distill --limit` — keeps the rows of
    /// those shards' sequences and goes on after them ([`HiddenWriter::kept`]);
    /// `shard_sequences` are the sequences of each of the dataset's shards, in its identity's
    /// order. A listed shard whose file is missing is recomputed ([`HiddenWriter::todo`]); a
    /// damaged one is refused, naming it ([`DataError::CorruptHidden`]: delete it to have it
    /// recomputed). What a killed run left (temporaries, the next shard renamed but not yet
    /// listed) is removed with a warning; files named like shards that no interrupted run of
    /// this cache can have written — any at all when there is no manifest — are refused with
    /// [`DataError::UnknownFiles`], and nothing is deleted.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        dir: &Path,
        target: TargetId,
        dataset: serde_json::Value,
        hidden_size: usize,
        lengths: Vec<usize>,
        shard_sequences: &[usize],
        per_shard: usize,
    ) -> Result<Self, DataError> {
        if per_shard == 0 || hidden_size == 0 {
            let problem = "sequences per shard and the hidden size must be at least 1".to_string();
            return Err(DataError::InvalidArgument { path: dir.to_path_buf(), problem });
        }
        let lock = DirLock::acquire(dir, "hidden")?;
        let mut kept = None;
        let fresh = HiddenManifest {
            format_version: HIDDEN_FORMAT_VERSION,
            target,
            dataset,
            hidden_size,
            dtype: "f16".into(),
            sequences: lengths.len(),
            tokens: lengths.iter().sum(),
            shards: Vec::new(),
            complete: false,
        };
        let existing = if dir.join(HIDDEN_MANIFEST_FILE).exists() { Some(read_hidden_manifest(dir)?) } else { None };
        let (manifest, redo) = match existing {
            Some(existing) if !existing.shards.is_empty() => {
                let mismatch = |field: &'static str, existing: String, given: String| DataError::ResumeMismatch {
                    dir: dir.to_path_buf(),
                    field,
                    existing,
                    given,
                };
                if existing.target != fresh.target {
                    return Err(mismatch("target", format!("{:?}", existing.target), format!("{:?}", fresh.target)));
                }
                if existing.dataset == fresh.dataset {
                    let shape = |m: &HiddenManifest| {
                        format!("{} sequences, {} tokens, hidden {}", m.sequences, m.tokens, m.hidden_size)
                    };
                    // A cache made with a smaller `--limit` holds the first sequences of this
                    // one (their lengths are checked shard by shard): it grows.
                    let grows = existing.hidden_size == hidden_size && existing.sequences < fresh.sequences;
                    if shape(&existing) != shape(&fresh) && !grows {
                        return Err(mismatch("size", shape(&existing), shape(&fresh)));
                    }
                    let redo = check_shards(dir, &existing.shards, hidden_size, &lengths)?;
                    let listed: Vec<&str> = existing.shards.iter().map(|s| s.file.as_str()).collect();
                    remove_leftovers(dir, &LAYOUT, &listed)?;
                    if grows {
                        let grown = HiddenManifest { shards: existing.shards, ..fresh };
                        write_manifest(dir, &grown)?;
                        (grown, redo)
                    } else {
                        (existing, redo)
                    }
                } else {
                    // Another state of the dataset (a later `distill --limit` appends shards and
                    // completes its last partial one): the sequences of the shards both share are
                    // the same, so the cache's shards that lie within them are kept.
                    let common = shared_shards(&existing.dataset, &fresh.dataset);
                    if common == 0 {
                        let (was, now) = describe_datasets(&existing.dataset, &fresh.dataset);
                        return Err(mismatch("dataset", was, now));
                    }
                    if existing.hidden_size != hidden_size {
                        let hidden = |h: usize| format!("hidden {h}");
                        return Err(mismatch("size", hidden(existing.hidden_size), hidden(hidden_size)));
                    }
                    let same = shard_sequences.iter().take(common).sum::<usize>().min(lengths.len());
                    let shards: Vec<HiddenShardInfo> = existing
                        .shards
                        .iter()
                        .take_while(|s| s.first_sequence + s.sequences <= same)
                        .cloned()
                        .collect();
                    let redo = check_shards(dir, &shards, hidden_size, &lengths)?;
                    // What an interrupted run left is judged against the manifest it ran with;
                    // nothing is changed before every check has passed.
                    let listed: Vec<&str> = existing.shards.iter().map(|s| s.file.as_str()).collect();
                    remove_leftovers(dir, &LAYOUT, &listed)?;
                    let updated = HiddenManifest { shards, ..fresh };
                    kept = Some(Kept {
                        sequences: updated.sequences_done(),
                        of: existing.sequences_done(),
                        shards: common,
                    });
                    // The dropped shards (listed, so this cache's own) go first: killed in between,
                    // the old manifest still lists them and the next run drops them again.
                    for dropped in &existing.shards[updated.shards.len()..] {
                        let path = dir.join(&dropped.file);
                        match std::fs::remove_file(&path) {
                            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(DataError::io(&path)(e)),
                            _ => {}
                        }
                    }
                    write_manifest(dir, &updated)?;
                    (updated, redo)
                }
            }
            empty => {
                if empty.is_some() {
                    // A manifest that lists no shard (a first run stopped before its first
                    // shard, for whatever target or state of the dataset): nothing to keep or to
                    // protect. What that run left half-written is its own.
                    remove_leftovers(dir, &LAYOUT, &[])?;
                } else {
                    refuse_unmanifested_shards(dir, &LAYOUT)?;
                }
                write_manifest(dir, &fresh)?;
                (fresh, Vec::new())
            }
        };
        let mut writer = Self {
            dir: dir.to_path_buf(),
            manifest,
            lengths,
            per_shard,
            pending: Vec::new(),
            pending_lengths: Vec::new(),
            kept,
            redo,
            _lock: lock,
        };
        for &index in &writer.redo {
            let shard = &writer.manifest.shards[index];
            warn_missing(dir, &LAYOUT, &shard.file, shard.first_sequence..shard.first_sequence + shard.sequences);
        }
        // The manifest on disk says so too while a listed shard is missing.
        if !writer.redo.is_empty() && writer.manifest.complete {
            writer.manifest.complete = false;
            write_manifest(dir, &writer.manifest)?;
        }
        Ok(writer)
    }

    /// The sequences still to push, in the order [`HiddenWriter::push`] takes them: those of
    /// each listed shard whose file is missing (adjacent ones merged), then from the end of the
    /// listed shards to the last sequence.
    pub fn todo(&self) -> Vec<Range<usize>> {
        let missing = self.redo.iter().map(|&index| {
            let shard = &self.manifest.shards[index];
            shard.first_sequence..shard.first_sequence + shard.sequences
        });
        todo_ranges(missing, self.manifest.sequences_done()..self.manifest.sequences)
    }

    /// When the cache in the directory was computed for another state of the dataset (one
    /// sharing its first shards): what this run kept of it.
    pub fn kept(&self) -> Option<Kept> {
        self.kept
    }

    /// The next sequence [`HiddenWriter::push`] takes: in the first missing listed shard, or
    /// else after the listed shards (sequences before it there are written or pending).
    pub fn next_sequence(&self) -> usize {
        let first = match self.redo.first() {
            Some(&index) => self.manifest.shards[index].first_sequence,
            None => self.manifest.sequences_done(),
        };
        first + self.pending_lengths.len()
    }

    pub fn manifest(&self) -> &HiddenManifest {
        &self.manifest
    }

    /// Adds the next sequence's rows (`length × hidden_size` f32 values, rounded to f16).
    pub fn push(&mut self, rows: &[f32]) -> Result<(), DataError> {
        let seq = self.next_sequence();
        let expected = self.lengths.get(seq).map(|l| l * self.manifest.hidden_size);
        if expected != Some(rows.len()) {
            let problem = format!("sequence {seq}: got {} values, expected {expected:?}", rows.len());
            return Err(DataError::InvalidArgument { path: self.dir.clone(), problem });
        }
        self.pending.extend(rows.iter().map(|&x| f16::from_f32(x).to_bits()));
        self.pending_lengths.push(self.lengths[seq]);
        let due = match self.redo.first() {
            Some(&index) => self.manifest.shards[index].sequences,
            None => self.per_shard,
        };
        if self.pending_lengths.len() == due {
            self.write_shard()?;
        }
        Ok(())
    }

    /// Writes the last partial shard and marks the cache complete.
    pub fn finish(mut self) -> Result<HiddenManifest, DataError> {
        if let Some(&index) = self.redo.first() {
            let shard = &self.manifest.shards[index];
            let problem = format!(
                "listed in {HIDDEN_MANIFEST_FILE} but missing, and its sequences {}..{} were not all given again",
                shard.first_sequence,
                shard.first_sequence + shard.sequences
            );
            return Err(DataError::CorruptHidden { path: self.dir.join(&shard.file), problem, remedy: REDO_MISSING });
        }
        if !self.pending_lengths.is_empty() {
            self.write_shard()?;
        }
        if self.manifest.sequences_done() != self.manifest.sequences {
            let problem =
                format!("finished after {} of {} sequences", self.manifest.sequences_done(), self.manifest.sequences);
            return Err(DataError::InvalidArgument { path: self.dir.clone(), problem });
        }
        self.manifest.complete = true;
        write_manifest(&self.dir, &self.manifest)?;
        Ok(self.manifest)
    }

    /// Writes the pending sequences as the first missing listed shard (under its own name, its
    /// checksum updated), or else as the next shard, listed in the manifest once it is in place.
    fn write_shard(&mut self) -> Result<(), DataError> {
        let redo = self.redo.first().copied();
        let file = match redo {
            Some(index) => self.manifest.shards[index].file.clone(),
            None => format!("hidden-{:05}.safetensors", self.manifest.shards.len()),
        };
        let path = self.dir.join(&file);
        let tokens: usize = self.pending_lengths.iter().sum();
        let bytes = shard_bytes(&self.pending, &self.pending_lengths, self.manifest.hidden_size)
            .map_err(|problem| DataError::InvalidArgument { path: path.clone(), problem })?;
        write_atomic(&path, &bytes).map_err(|(path, source)| DataError::Io { path, source })?;
        sync_dir(&self.dir);
        let sha256 = sha256_hex(&bytes);
        match redo {
            Some(index) => {
                let shard = &mut self.manifest.shards[index];
                debug_assert_eq!((shard.sequences, shard.tokens), (self.pending_lengths.len(), tokens));
                (shard.tokens, shard.sha256) = (tokens, sha256);
                self.redo.remove(0);
                tracing::info!(shard = %path.display(), "recomputed missing shard");
            }
            None => self.manifest.shards.push(HiddenShardInfo {
                file,
                first_sequence: self.manifest.sequences_done(),
                sequences: self.pending_lengths.len(),
                tokens,
                sha256,
            }),
        }
        write_manifest(&self.dir, &self.manifest)?;
        self.pending.clear();
        self.pending_lengths.clear();
        Ok(())
    }
}

/// A shard's safetensors bytes.
fn shard_bytes(values: &[u16], lengths: &[usize], hidden_size: usize) -> Result<Vec<u8>, String> {
    let hidden: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let lens: Vec<u8> = lengths.iter().flat_map(|&l| (l as i32).to_le_bytes()).collect();
    let tokens = values.len() / hidden_size;
    let views = [
        ("hidden", TensorView::new(Dtype::F16, vec![tokens, hidden_size], &hidden).map_err(|e| e.to_string())?),
        ("lengths", TensorView::new(Dtype::I32, vec![lengths.len()], &lens).map_err(|e| e.to_string())?),
    ];
    safetensors::serialize(views, &None::<HashMap<String, String>>).map_err(|e| e.to_string())
}

/// Checks a shard's bytes against its manifest entry: checksum, tensors, and its sequence
/// lengths against `lengths` (the dataset's, indexed from sequence 0) where both have them.
/// Returns the byte offset of its `hidden` rows.
fn check_shard(
    path: &Path,
    bytes: &[u8],
    info: &HiddenShardInfo,
    hidden_size: usize,
    lengths: &[usize],
) -> Result<usize, DataError> {
    let corrupt =
        |problem: String| DataError::CorruptHidden { path: path.to_path_buf(), problem, remedy: REDO_DAMAGED };
    let found = sha256_hex(bytes);
    if found != info.sha256 {
        return Err(corrupt(format!("sha256 is {found} but {HIDDEN_MANIFEST_FILE} records {}", info.sha256)));
    }
    let st = SafeTensors::deserialize(bytes).map_err(|e| corrupt(format!("not a safetensors file ({e})")))?;
    let hidden = st.tensor("hidden").map_err(|e| corrupt(format!("no `hidden` tensor ({e})")))?;
    let lens = st.tensor("lengths").map_err(|e| corrupt(format!("no `lengths` tensor ({e})")))?;
    if hidden.dtype() != Dtype::F16 || hidden.shape() != [info.tokens, hidden_size] {
        return Err(corrupt(format!(
            "`hidden` is {:?} {:?}, expected F16 [{}, {hidden_size}]",
            hidden.dtype(),
            hidden.shape(),
            info.tokens
        )));
    }
    // The dataset may ask for fewer sequences than the cache holds (a training `--limit`):
    // compare the lengths both have.
    let stored: Vec<usize> =
        lens.data().chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize).collect();
    let asked = lengths.get(info.first_sequence..).unwrap_or_default();
    let both = stored.len().min(asked.len());
    if lens.dtype() != Dtype::I32
        || stored.len() != info.sequences
        || stored.iter().sum::<usize>() != info.tokens
        || stored[..both] != asked[..both]
    {
        return Err(corrupt(format!(
            "sequence lengths differ from the dataset's for sequences {}..{}",
            info.first_sequence,
            info.first_sequence + info.sequences
        )));
    }
    Ok(hidden.data().as_ptr() as usize - bytes.as_ptr() as usize)
}

/// Checks each of `shards` that exists (intact, lengths as in `lengths`); returns the indices
/// of those whose files are missing, to be recomputed.
fn check_shards(
    dir: &Path,
    shards: &[HiddenShardInfo],
    hidden_size: usize,
    lengths: &[usize],
) -> Result<Vec<usize>, DataError> {
    let mut missing = Vec::new();
    for (index, shard) in shards.iter().enumerate() {
        let path = dir.join(&shard.file);
        match std::fs::read(&path) {
            Ok(bytes) => {
                check_shard(&path, &bytes, shard, hidden_size, lengths)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(index),
            Err(e) => return Err(DataError::io(&path)(e)),
        }
    }
    Ok(missing)
}

/// A cache opened for reading: shards memory-mapped (the rows stay in the page cache, not in
/// the process's own memory), each checked against the manifest.
pub struct HiddenCache {
    dir: PathBuf,
    manifest: HiddenManifest,
    maps: Vec<Mmap>,
    /// Per sequence: (shard, byte offset of its first row).
    starts: Vec<(usize, usize)>,
}

impl HiddenCache {
    /// Opens the cache in `dir` for sequences of `lengths` tokens (the first `lengths.len()` of
    /// the cache must match them). Every shard needed is checked (checksum, tensors, lengths); a
    /// cache that does not yet hold `lengths.len()` sequences is refused.
    pub fn open(dir: &Path, lengths: &[usize]) -> Result<Self, DataError> {
        let manifest = read_hidden_manifest(dir)?;
        if manifest.sequences_done() < lengths.len() {
            return Err(DataError::CorruptHidden {
                path: dir.join(HIDDEN_MANIFEST_FILE),
                problem: format!(
                    "holds {} of the {} sequences needed{}",
                    manifest.sequences_done(),
                    lengths.len(),
                    if manifest.complete { "" } else { " (an interrupted `draftsmith hidden`)" }
                ),
                remedy: if manifest.complete {
                    "rerun `draftsmith hidden` for these sequences (a larger --limit, or none): it extends the cache"
                } else {
                    "rerun `draftsmith hidden` with the same arguments to finish it"
                },
            });
        }
        let hidden_bytes = manifest.hidden_size * 2;
        let (mut maps, mut starts) = (Vec::new(), Vec::with_capacity(lengths.len()));
        for info in manifest.shards.iter().take_while(|s| s.first_sequence < lengths.len()) {
            let path = dir.join(&info.file);
            let file = std::fs::File::open(&path).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => DataError::CorruptHidden {
                    path: path.clone(),
                    problem: "listed in the manifest but missing".into(),
                    remedy: REDO_MISSING,
                },
                _ => DataError::io(&path)(e),
            })?;
            // SAFETY: the file is only read; a cache rewritten while training reads it is a
            // user error the checksum below catches at open time.
            let map = unsafe { Mmap::map(&file) }.map_err(DataError::io(&path))?;
            let offset = check_shard(&path, &map, info, manifest.hidden_size, lengths)?;
            let end = (info.first_sequence + info.sequences).min(lengths.len());
            let mut at = offset;
            for &len in &lengths[info.first_sequence..end] {
                starts.push((maps.len(), at));
                at += len * hidden_bytes;
            }
            maps.push(map);
        }
        Ok(Self { dir: dir.to_path_buf(), manifest, maps, starts })
    }

    pub fn manifest(&self) -> &HiddenManifest {
        &self.manifest
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn hidden_size(&self) -> usize {
        self.manifest.hidden_size
    }

    /// Appends the hidden state at `pos` of sequence `seq` to `out`, as f32.
    pub fn extend_row(&self, seq: usize, pos: usize, out: &mut Vec<f32>) {
        let (shard, start) = self.starts[seq];
        let h = self.manifest.hidden_size;
        let at = start + pos * h * 2;
        let bytes = &self.maps[shard][at..at + h * 2];
        out.extend(bytes.chunks_exact(2).map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()));
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // lists of sequence ranges, one range long at times
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("draftsmith-hidden-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn target(sha: &str) -> TargetId {
        TargetId { name: "tiny".into(), sha256: sha.into() }
    }

    /// Rows of sequence `s`: value `s + pos / 8 + j / 64` (exact in f16).
    fn rows(s: usize, len: usize, h: usize) -> Vec<f32> {
        (0..len * h).map(|i| s as f32 + (i / h) as f32 / 8.0 + (i % h) as f32 / 64.0).collect()
    }

    #[test]
    fn written_rows_read_back_and_a_killed_run_resumes() {
        let dir = tmpdir("roundtrip");
        let (h, lengths) = (4, vec![3, 5, 2, 4, 1]);
        let data = serde_json::json!({"shards": ["aa"]});
        let mut w = HiddenWriter::open(&dir, target("t"), data.clone(), h, lengths.clone(), &[5], 2).unwrap();
        for (s, &len) in lengths.iter().enumerate().take(3) {
            w.push(&rows(s, len, h)).unwrap();
        }
        let second = HiddenWriter::open(&dir, target("t"), data.clone(), h, lengths.clone(), &[5], 2);
        assert!(matches!(second, Err(DataError::Locked(_))), "a second writer is refused while the first runs");
        drop(w); // killed: sequence 2 was pending, one shard written
        std::fs::write(dir.join("hidden-00009.safetensors.tmp"), b"torn").unwrap();
        let mut w = HiddenWriter::open(&dir, target("t"), data.clone(), h, lengths.clone(), &[5], 2).unwrap();
        assert_eq!(w.next_sequence(), 2, "resumes after the finished shard");
        assert!(!dir.join("hidden-00009.safetensors.tmp").exists(), "leftovers removed");
        for (s, &len) in lengths.iter().enumerate().skip(2) {
            w.push(&rows(s, len, h)).unwrap();
        }
        let manifest = w.finish().unwrap();
        assert!(manifest.complete && manifest.shards.len() == 3 && manifest.tokens == 15);
        let cache = HiddenCache::open(&dir, &lengths).unwrap();
        for (s, &len) in lengths.iter().enumerate() {
            let want = rows(s, len, h);
            for pos in 0..len {
                let mut got = Vec::new();
                cache.extend_row(s, pos, &mut got);
                assert_eq!(got, want[pos * h..(pos + 1) * h], "sequence {s} position {pos}");
            }
        }
        // A prefix of the sequences (a training --limit) opens too.
        assert!(HiddenCache::open(&dir, &lengths[..3]).is_ok());
    }

    #[test]
    fn a_cache_of_the_first_sequences_grows_to_more_of_them() {
        // `hidden --limit 3`, then `hidden` for all 5 sequences of the same dataset.
        let dir = tmpdir("limit");
        let (h, lengths) = (4, vec![3, 5, 2, 4, 1]);
        let data = serde_json::json!({"shards": ["aa"]});
        let mut w = HiddenWriter::open(&dir, target("t"), data.clone(), h, lengths[..3].to_vec(), &[5], 2).unwrap();
        for (s, &len) in lengths.iter().enumerate().take(3) {
            w.push(&rows(s, len, h)).unwrap();
        }
        w.finish().unwrap();
        let first = std::fs::read(dir.join("hidden-00000.safetensors")).unwrap();
        let mut w = HiddenWriter::open(&dir, target("t"), data.clone(), h, lengths.clone(), &[5], 2).unwrap();
        assert_eq!(w.next_sequence(), 3, "the three sequences computed are kept");
        assert!(!w.manifest().complete && w.manifest().sequences == 5);
        for (s, &len) in lengths.iter().enumerate().skip(3) {
            w.push(&rows(s, len, h)).unwrap();
        }
        assert!(w.finish().unwrap().complete);
        assert_eq!(std::fs::read(dir.join("hidden-00000.safetensors")).unwrap(), first);
        let cache = HiddenCache::open(&dir, &lengths).unwrap();
        let mut got = Vec::new();
        cache.extend_row(4, 0, &mut got);
        assert_eq!(got, rows(4, 1, h));
        // Other lengths for the sequences kept are refused, not mixed in.
        let mut other = lengths.clone();
        other[0] = 2;
        other.push(3);
        assert!(HiddenWriter::open(&dir, target("t"), data, h, other, &[6], 2).is_err());
    }

    #[test]
    fn a_grown_dataset_keeps_the_rows_of_its_unchanged_shards() {
        let dir = tmpdir("grown");
        let (h, lengths) = (4, vec![3, 5, 2, 4, 1, 2]);
        let write = |w: &mut HiddenWriter, upto: usize| {
            for (s, &len) in lengths.iter().enumerate().take(upto).skip(w.next_sequence()) {
                w.push(&rows(s, len, h)).unwrap();
            }
        };
        // Dataset shards `aa` (sequences 0-1) and `bb` (sequence 2, a partial shard).
        let small = serde_json::json!({"shards": ["aa", "bb"], "max_seq_len": 64});
        let mut w = HiddenWriter::open(&dir, target("t"), small.clone(), h, lengths[..3].to_vec(), &[2, 1], 2).unwrap();
        write(&mut w, 3);
        assert_eq!(w.finish().unwrap().shards.len(), 2, "cache shards: sequences 0-1 and 2");
        let first = std::fs::read(dir.join("hidden-00000.safetensors")).unwrap();

        // Appended to: `bb` holds one sequence more now (another hash), `cc` is new. Only `aa`'s
        // sequences are known to be the same: cache shard 0 is kept, shard 1 recomputed.
        let grown = serde_json::json!({"shards": ["aa", "b2", "cc"], "max_seq_len": 64});
        let mut w =
            HiddenWriter::open(&dir, target("t"), grown.clone(), h, lengths[..5].to_vec(), &[2, 2, 1], 2).unwrap();
        assert_eq!(w.kept(), Some(Kept { sequences: 2, of: 3, shards: 1 }));
        assert_eq!(w.next_sequence(), 2);
        assert!(!w.manifest().complete && w.manifest().dataset == grown && w.manifest().sequences == 5);
        write(&mut w, 5);
        let manifest = w.finish().unwrap();
        assert!(manifest.complete && manifest.tokens == 15 && manifest.shards.len() == 3, "{manifest:?}");
        assert_eq!(std::fs::read(dir.join("hidden-00000.safetensors")).unwrap(), first, "kept as it was");

        // Appended to again, every earlier shard unchanged: everything kept, a plain extension.
        let again = serde_json::json!({"shards": ["aa", "b2", "cc", "dd"], "max_seq_len": 64});
        let mut w = HiddenWriter::open(&dir, target("t"), again.clone(), h, lengths.clone(), &[2, 2, 1, 1], 2).unwrap();
        assert_eq!((w.kept(), w.next_sequence()), (Some(Kept { sequences: 5, of: 5, shards: 3 }), 5));
        write(&mut w, 6);
        w.finish().unwrap();
        let cache = HiddenCache::open(&dir, &lengths).unwrap();
        for (s, &len) in lengths.iter().enumerate() {
            let mut got = Vec::new();
            cache.extend_row(s, len - 1, &mut got);
            assert_eq!(got, rows(s, len, h)[(len - 1) * h..], "sequence {s}");
        }
        // The same dataset again: a plain resume of a complete cache.
        let w = HiddenWriter::open(&dir, target("t"), again, h, lengths.clone(), &[2, 2, 1, 1], 2).unwrap();
        assert_eq!((w.kept(), w.next_sequence()), (None, 6));
        drop(w);
        // Other reading settings, or no shard in common: refused, nothing removed.
        let cut = serde_json::json!({"shards": ["aa", "b2", "cc", "dd"], "max_seq_len": 32});
        let err = HiddenWriter::open(&dir, target("t"), cut, h, lengths.clone(), &[2, 2, 1, 1], 2).err().unwrap();
        assert!(err.to_string().contains("max_seq_len = 32"), "{err}");
        let other = serde_json::json!({"shards": ["zz"], "max_seq_len": 64});
        assert!(HiddenWriter::open(&dir, target("t"), other, h, lengths.clone(), &[6], 2).is_err());
        assert!(HiddenCache::open(&dir, &lengths).is_ok(), "the cache is untouched");
    }

    #[test]
    fn another_target_dataset_or_damaged_shard_is_refused() {
        let dir = tmpdir("refused");
        let (h, lengths) = (2, vec![2, 2]);
        let data = serde_json::json!({"shards": ["aa"]});
        let mut w = HiddenWriter::open(&dir, target("t"), data.clone(), h, lengths.clone(), &[2], 1).unwrap();
        w.push(&rows(0, 2, h)).unwrap();
        w.push(&rows(1, 2, h)).unwrap();
        w.finish().unwrap();
        let err =
            HiddenWriter::open(&dir, target("u"), data.clone(), h, lengths.clone(), &[2], 1).err().unwrap().to_string();
        assert!(err.contains("cannot resume") && err.contains("target"), "{err}");
        let other = serde_json::json!({"shards": ["bb"]});
        let err = HiddenWriter::open(&dir, target("t"), other, h, lengths.clone(), &[2], 1).err().unwrap().to_string();
        assert!(err.contains("dataset") && err.contains("1 shard (aa…aa)"), "{err}");
        // A dataset grown and changed in another field: refused, the growth said.
        let grown = serde_json::json!({"shards": ["aa", "cc"], "max_seq_len": 64});
        let err =
            HiddenWriter::open(&dir, target("t"), grown, h, lengths.clone(), &[1, 1], 1).err().unwrap().to_string();
        assert!(err.contains("2 shards (aa…cc), max_seq_len = 64"), "{err}");
        let (was, _) = describe_datasets(&data, &serde_json::json!({"shards": ["aa", "cc"]}));
        assert!(was.contains("has grown since") && was.contains("1 shard (aa…aa)"), "{was}");
        let err = HiddenCache::open(&dir, &[2, 3]).err().unwrap().to_string();
        assert!(err.contains("hidden-00001.safetensors") && err.contains("lengths differ"), "{err}");
        let err = HiddenCache::open(&dir, &[2, 2, 2]).err().unwrap().to_string();
        assert!(err.contains("holds 2 of the 3 sequences"), "{err}");
        let shard = dir.join("hidden-00001.safetensors");
        let mut bytes = std::fs::read(&shard).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&shard, &bytes).unwrap();
        let err = HiddenCache::open(&dir, &lengths).err().unwrap().to_string();
        assert!(err.contains("hidden-00001.safetensors") && err.contains("sha256"), "{err}");
        assert!(err.contains("delete it and rerun `draftsmith hidden` to redo just that shard"), "{err}");
        // Resuming refuses it the same way and touches nothing.
        let err = HiddenWriter::open(&dir, target("t"), data, h, lengths, &[2], 1).err().unwrap().to_string();
        assert!(err.contains("hidden-00001.safetensors") && err.contains("redo just that shard"), "{err}");
        assert_eq!(std::fs::read(&shard).unwrap(), bytes);
    }

    #[test]
    fn an_empty_cache_starts_afresh_for_any_target_or_dataset() {
        let dir = tmpdir("empty");
        let (h, lengths) = (2, vec![2, 2]);
        let data = serde_json::json!({"shards": ["aa"]});
        // Stopped before its first shard: the manifest lists none.
        drop(HiddenWriter::open(&dir, target("t"), data, h, lengths.clone(), &[2], 1).unwrap());
        std::fs::write(dir.join("hidden-00000.safetensors.tmp"), b"torn").unwrap();
        let other = serde_json::json!({"shards": ["bb"]});
        let mut w = HiddenWriter::open(&dir, target("u"), other.clone(), h, lengths.clone(), &[2], 1).unwrap();
        assert_eq!((w.kept(), w.next_sequence()), (None, 0));
        assert!(!dir.join("hidden-00000.safetensors.tmp").exists(), "its leftovers removed");
        w.push(&rows(0, 2, h)).unwrap();
        w.push(&rows(1, 2, h)).unwrap();
        let manifest = w.finish().unwrap();
        assert!(manifest.complete && manifest.dataset == other && manifest.target == target("u"));
    }

    #[test]
    fn a_missing_shard_is_recomputed_alone() {
        let dir = tmpdir("missing");
        let (h, lengths) = (4, vec![3, 5, 2, 4, 1]);
        let data = serde_json::json!({"shards": ["aa"]});
        let open = || HiddenWriter::open(&dir, target("t"), data.clone(), h, lengths.clone(), &[5], 2).unwrap();
        let mut w = open();
        assert_eq!(w.todo(), [0..5]);
        for (s, &len) in lengths.iter().enumerate() {
            w.push(&rows(s, len, h)).unwrap();
        }
        let complete = w.finish().unwrap();
        let shard = |i: usize| dir.join(format!("hidden-{i:05}.safetensors"));
        let (first, last) = (std::fs::read(shard(0)).unwrap(), std::fs::read(shard(2)).unwrap());
        std::fs::remove_file(shard(1)).unwrap();
        let err = HiddenCache::open(&dir, &lengths).err().unwrap().to_string();
        assert!(err.contains("hidden-00001.safetensors") && err.contains("missing"), "{err}");
        assert!(err.contains("rerun `draftsmith hidden` with the same arguments to redo just that shard"), "{err}");

        let w = open();
        assert_eq!((w.todo(), w.next_sequence()), (vec![2..4], 2), "only shard 1's sequences");
        assert!(!read_hidden_manifest(&dir).unwrap().complete, "incomplete on disk while a shard is missing");
        std::fs::write(shard(1).with_extension("safetensors.tmp"), b"torn").unwrap();
        drop(w); // killed while recomputing it: its temporary is removed on the next open
        let mut w = open();
        assert!(!shard(1).with_extension("safetensors.tmp").exists());
        for s in w.todo().into_iter().flatten() {
            w.push(&rows(s, lengths[s], h)).unwrap();
        }
        assert_eq!(w.finish().unwrap(), complete, "the same cache again");
        assert_eq!((std::fs::read(shard(0)).unwrap(), std::fs::read(shard(2)).unwrap()), (first, last));
        HiddenCache::open(&dir, &lengths).unwrap();

        // Not pushed again: finishing is refused, naming the shard.
        std::fs::remove_file(shard(0)).unwrap();
        let err = open().finish().err().unwrap().to_string();
        assert!(err.contains("hidden-00000.safetensors") && err.contains("sequences 0..2"), "{err}");
    }

    #[test]
    fn shard_files_the_cache_cannot_have_written_are_refused_and_kept() {
        let dir = tmpdir("foreign");
        let (h, lengths) = (2, vec![2, 2, 2]);
        let data = serde_json::json!({"shards": ["aa"]});
        let open = || HiddenWriter::open(&dir, target("t"), data.clone(), h, lengths.clone(), &[3], 1);
        let mut w = open().unwrap();
        w.push(&rows(0, 2, h)).unwrap();
        drop(w);
        // Shard 1 renamed into place before a kill (an interrupted run's); shard 4 from elsewhere.
        std::fs::write(dir.join("hidden-00001.safetensors"), b"whole but unlisted").unwrap();
        std::fs::write(dir.join("hidden-00004.safetensors"), b"not ours").unwrap();
        let err = open().err().unwrap();
        assert!(matches!(err, DataError::UnknownFiles { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("hidden-00004.safetensors") && text.contains("nothing was deleted"), "{text}");
        assert!(dir.join("hidden-00001.safetensors").exists());
        std::fs::remove_file(dir.join("hidden-00004.safetensors")).unwrap();
        assert_eq!(open().unwrap().todo(), [1..3]);
        assert!(!dir.join("hidden-00001.safetensors").exists(), "the interrupted run's shard is redone");

        // No manifest: every shard-named file is refused, none deleted, no manifest written.
        std::fs::remove_file(dir.join(HIDDEN_MANIFEST_FILE)).unwrap();
        let text = open().err().unwrap().to_string();
        assert!(text.contains("hidden-00000.safetensors") && text.contains("no hidden-manifest.json"), "{text}");
        assert!(dir.join("hidden-00000.safetensors").exists() && !dir.join(HIDDEN_MANIFEST_FILE).exists());
    }
}
