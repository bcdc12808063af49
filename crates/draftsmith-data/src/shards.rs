//! Writing a distilled dataset shard by shard, resumably, and reading it back.
//!
//! A dataset is a directory holding `manifest.json` and `shard-00000.parquet`, `shard-00001…`.
//! Each shard covers a fixed number of consecutive input items. A shard is first written as
//! `shard-XXXXX.parquet.tmp`, synced and renamed; only then is the manifest (itself written to a
//! temporary file and renamed) updated to list it. A run killed at any point therefore leaves a
//! manifest that lists only complete, checksummed shards, and reopening the directory resumes
//! after the last of them. The parts of a sharded distillation are datasets of this layout in
//! `part-…-of-…` subdirectories ([`crate::Part`]).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use draftsmith_core::digest::{hex, sha256_file, Digest, Sha256};
use draftsmith_core::fsio::sync_dir;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::DataError;
use crate::manifest::{
    check_resume, manifest_path, read_manifest, write_manifest, DistillManifest, DistillParams, ShardInfo, TargetId,
    FORMAT_VERSION,
};
use crate::parts::{check_kind, part_dirs, read_parts, Part, PartInfo};
use crate::record::DistillRecord;
use crate::schema::{from_batch, to_batch};

/// Writes a distilled dataset, resuming a previous run in the same directory.
///
/// Records are held in memory until their shard is full. Dropping the writer without
/// [`ShardWriter::finish`] loses those pending inputs (fewer than one shard); a later
/// [`ShardWriter::open`] reports them as not done, so they are redone.
pub struct ShardWriter {
    dir: PathBuf,
    manifest: DistillManifest,
    inputs_per_shard: usize,
    pending: Vec<DistillRecord>,
    pending_inputs: usize,
}

impl ShardWriter {
    /// Creates the dataset directory, or resumes the dataset already in it.
    ///
    /// Resuming requires the manifest's target and params to equal `target` and `params`
    /// ([`DataError::ResumeMismatch`] names the first differing field) and every listed shard to
    /// exist with its recorded SHA-256. Leftover `*.tmp` files and unlisted shard files (from a
    /// killed run) are removed with a warning; their inputs are redone.
    pub fn open(
        dir: &Path,
        target: TargetId,
        params: DistillParams,
        inputs_per_shard: usize,
    ) -> Result<Self, DataError> {
        check_kind(dir, false)?;
        Self::open_dir(dir, target, params, inputs_per_shard, None)
    }

    /// Creates or resumes part `part` of a sharded distillation over `total_inputs` inputs, in
    /// `dir/part-…-of-…/` (see [`Part`]). As [`ShardWriter::open`] otherwise; resuming also
    /// requires the same part of the same number of inputs.
    pub fn open_part(
        dir: &Path,
        part: Part,
        total_inputs: usize,
        target: TargetId,
        params: DistillParams,
        inputs_per_shard: usize,
    ) -> Result<Self, DataError> {
        check_kind(dir, true)?;
        let info = PartInfo { part, total_inputs };
        Self::open_dir(&dir.join(part.dir_name()), target, params, inputs_per_shard, Some(info))
    }

    fn open_dir(
        dir: &Path,
        target: TargetId,
        params: DistillParams,
        inputs_per_shard: usize,
        part: Option<PartInfo>,
    ) -> Result<Self, DataError> {
        if inputs_per_shard == 0 {
            let problem = "inputs_per_shard must be at least 1".to_string();
            return Err(DataError::InvalidArgument { path: dir.to_path_buf(), problem });
        }
        std::fs::create_dir_all(dir).map_err(DataError::io(dir))?;
        let resuming = manifest_path(dir).exists();
        let manifest = if resuming {
            let manifest = read_manifest(dir)?;
            check_resume(dir, &manifest, &target, &params)?;
            if manifest.part != part {
                return Err(DataError::ResumeMismatch {
                    dir: dir.to_path_buf(),
                    field: "part",
                    existing: format!("{:?}", manifest.part),
                    given: format!("{part:?}"),
                });
            }
            for shard in &manifest.shards {
                verify_checksum(&dir.join(&shard.file), &shard.sha256)?;
            }
            manifest
        } else {
            DistillManifest {
                format_version: FORMAT_VERSION,
                target,
                params,
                shards: Vec::new(),
                complete: false,
                part,
            }
        };
        remove_leftovers(dir, &manifest)?;
        if !resuming {
            write_manifest(dir, &manifest)?;
        }
        Ok(ShardWriter { dir: dir.to_path_buf(), manifest, inputs_per_shard, pending: Vec::new(), pending_inputs: 0 })
    }

    /// The input items covered by finished shards end here: the caller goes on from this index
    /// (for a part, an index into the whole input list).
    pub fn inputs_done(&self) -> usize {
        self.manifest.inputs_done()
    }

    /// The inputs this writer is for, out of `total`: all of them, or its part's range.
    pub fn input_range(&self, total: usize) -> Result<std::ops::Range<usize>, DataError> {
        match self.manifest.part {
            None => Ok(0..total),
            Some(info) if info.total_inputs == total => Ok(info.range()),
            Some(info) => Err(DataError::InvalidArgument {
                path: self.dir.clone(),
                problem: format!(
                    "part {} was opened for {} inputs but is given {total}: every part must read the same input list",
                    info.part, info.total_inputs
                ),
            }),
        }
    }

    /// The manifest as it is on disk.
    pub fn manifest(&self) -> &DistillManifest {
        &self.manifest
    }

    /// Adds the records produced from the next input item (possibly none). Every
    /// `inputs_per_shard` items, a shard is written and the manifest updated.
    pub fn push_input(&mut self, records: Vec<DistillRecord>) -> Result<(), DataError> {
        let params = &self.manifest.params;
        for r in &records {
            r.check(params.teacher_len, params.topk).map_err(|problem| DataError::InvalidRecord {
                path: self.dir.clone(),
                id: r.id.clone(),
                problem,
            })?;
        }
        self.pending.extend(records);
        self.pending_inputs += 1;
        if self.pending_inputs == self.inputs_per_shard {
            self.write_shard()?;
        }
        Ok(())
    }

    /// Writes the last partial shard, marks the manifest complete and returns it.
    pub fn finish(mut self) -> Result<DistillManifest, DataError> {
        if self.pending_inputs > 0 {
            self.write_shard()?;
        }
        self.manifest.complete = true;
        write_manifest(&self.dir, &self.manifest)?;
        Ok(self.manifest)
    }

    /// Writes the pending records as the next shard, then lists it in the manifest.
    fn write_shard(&mut self) -> Result<(), DataError> {
        let file = shard_file_name(self.manifest.shards.len());
        let path = self.dir.join(&file);
        let tmp = self.dir.join(format!("{file}.tmp"));
        let sha256 = write_parquet(&tmp, &self.pending)?;
        std::fs::rename(&tmp, &path).map_err(DataError::io(&path))?;
        sync_dir(&self.dir);
        self.manifest.shards.push(ShardInfo {
            file,
            first_input: self.manifest.inputs_done(),
            inputs: self.pending_inputs,
            records: self.pending.len(),
            tokens: self.pending.iter().map(|r| r.tokens.len()).sum(),
            sha256,
        });
        self.manifest.complete = false;
        write_manifest(&self.dir, &self.manifest)?;
        tracing::debug!(shard = %path.display(), records = self.pending.len(), "wrote shard");
        self.pending.clear();
        self.pending_inputs = 0;
        Ok(())
    }
}

/// The file name of shard `index`.
fn shard_file_name(index: usize) -> String {
    format!("shard-{index:05}.parquet")
}

/// Writes `records` to `path` as Parquet, fsyncs it and returns its SHA-256 (lowercase hex).
fn write_parquet(path: &Path, records: &[DistillRecord]) -> Result<String, DataError> {
    let batch = to_batch(records).map_err(|e| DataError::Parquet { path: path.to_path_buf(), source: e.into() })?;
    let file = File::create(path).map_err(DataError::io(path))?;
    let sink = HashingWriter { inner: file, hasher: Sha256::new() };
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut writer = ArrowWriter::try_new(sink, batch.schema(), Some(props)).map_err(DataError::parquet(path))?;
    writer.write(&batch).map_err(DataError::parquet(path))?;
    let sink = writer.into_inner().map_err(DataError::parquet(path))?;
    sink.inner.sync_all().map_err(DataError::io(path))?;
    Ok(hex(&sink.hasher.finalize()))
}

/// Passes writes through to a file while hashing them.
struct HashingWriter {
    inner: File,
    hasher: Sha256,
}

impl Write for HashingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// SHA-256 of a file, lowercase hex.
fn file_sha256(path: &Path) -> Result<String, DataError> {
    sha256_file(path).map_err(DataError::io(path))
}

/// Checks that a listed shard exists and has the recorded checksum.
fn verify_checksum(path: &Path, expected: &str) -> Result<(), DataError> {
    if !path.exists() {
        return Err(DataError::MissingShard { path: path.to_path_buf() });
    }
    let found = file_sha256(path)?;
    if found != expected {
        let problem = format!("sha256 is {found} but manifest.json records {expected}");
        return Err(DataError::CorruptShard { path: path.to_path_buf(), problem });
    }
    Ok(())
}

/// Removes `*.tmp` files and shard files the manifest does not list, warning about each.
fn remove_leftovers(dir: &Path, manifest: &DistillManifest) -> Result<(), DataError> {
    remove_unlisted(dir, ("shard-", ".parquet"), |name| manifest.shards.iter().any(|s| s.file == name), "inputs")
}

/// Removes what an interrupted run left in `dir`: every `*.tmp` file, and every file named like a
/// shard (`prefix` … `suffix`) that `listed` does not know (written but not yet in the manifest).
/// `redone` names what a rerun redoes, for the warning.
pub(crate) fn remove_unlisted(
    dir: &Path,
    (prefix, suffix): (&str, &str),
    listed: impl Fn(&str) -> bool,
    redone: &str,
) -> Result<(), DataError> {
    for entry in std::fs::read_dir(dir).map_err(DataError::io(dir))? {
        let path = entry.map_err(DataError::io(dir))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let unlisted = name.starts_with(prefix) && name.ends_with(suffix) && !listed(name);
        if name.ends_with(".tmp") || unlisted {
            tracing::warn!(file = %path.display(), "removing leftover from an interrupted run; its {redone} will be redone");
            std::fs::remove_file(&path).map_err(DataError::io(&path))?;
        }
    }
    Ok(())
}

/// Reads every shard listed in `dir/manifest.json`, in order, and checks each record.
///
/// The manifest is returned too; it may be incomplete (`complete == false`) if the run that
/// made it was interrupted. A truncated, corrupt or modified shard is a
/// [`DataError::CorruptShard`] naming the file.
///
/// A directory holding the parts of a sharded distillation (`part-…-of-…/`, no `manifest.json`
/// of its own) is read as one dataset: the parts' records in input order, under a merged
/// manifest (see [`Part`]).
pub fn read_records(dir: &Path) -> Result<(DistillManifest, Vec<DistillRecord>), DataError> {
    if !manifest_path(dir).exists() {
        let parts = part_dirs(dir)?;
        if !parts.is_empty() {
            return read_parts(dir, parts, read_dataset);
        }
    }
    read_dataset(dir)
}

/// [`read_records`] of one dataset directory (with its own `manifest.json`).
fn read_dataset(dir: &Path) -> Result<(DistillManifest, Vec<DistillRecord>), DataError> {
    let manifest = read_manifest(dir)?;
    let mut records = Vec::with_capacity(manifest.records());
    for shard in &manifest.shards {
        let path = dir.join(&shard.file);
        let start = records.len();
        read_shard(&path, &mut records)?;
        let corrupt = |problem: String| DataError::CorruptShard { path: path.clone(), problem };
        if records.len() - start != shard.records {
            let found = records.len() - start;
            return Err(corrupt(format!("holds {found} records, manifest.json says {}", shard.records)));
        }
        for r in &records[start..] {
            r.check(manifest.params.teacher_len, manifest.params.topk).map_err(|problem| DataError::InvalidRecord {
                path: path.clone(),
                id: r.id.clone(),
                problem,
            })?;
        }
        verify_checksum(&path, &shard.sha256)?;
    }
    Ok((manifest, records))
}

/// Appends the records of one shard file to `out`.
fn read_shard(path: &Path, out: &mut Vec<DistillRecord>) -> Result<(), DataError> {
    if !path.exists() {
        return Err(DataError::MissingShard { path: path.to_path_buf() });
    }
    let file = File::open(path).map_err(DataError::io(path))?;
    let corrupt = |problem: String| DataError::CorruptShard { path: path.to_path_buf(), problem };
    let incomplete = |e: &dyn std::fmt::Display| corrupt(format!("not a complete parquet file ({e})"));
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).and_then(|b| b.build()).map_err(|e| incomplete(&e))?;
    for batch in reader {
        let batch = batch.map_err(|e| incomplete(&e))?;
        from_batch(&batch, out).map_err(corrupt)?;
    }
    Ok(())
}
