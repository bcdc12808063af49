//! Writing a distilled dataset shard by shard, resumably, and reading it back.
//!
//! A dataset is a directory holding `manifest.json` and `shard-00000.parquet`, `shard-00001…`.
//! Each shard covers a fixed number of consecutive input items. The manifest is written when the
//! dataset is created, before any shard. A shard is first written as `shard-XXXXX.parquet.tmp`,
//! synced and renamed; only then is the manifest (itself written to a temporary file and
//! renamed) updated to list it. A run killed at any point therefore leaves a manifest that lists
//! only complete, checksummed shards, and reopening the directory resumes after the last of them.
//! A listed shard whose file is missing (deleted, for instance after a checksum mismatch) is
//! redone on reopening — just that shard, the others kept. What a resumed run deletes, and what
//! it refuses to touch, is in [`crate::leftovers`]. The parts of a sharded distillation are
//! datasets of this layout in `part-…-of-…` subdirectories ([`crate::Part`]).

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use draftsmith_core::digest::{hex, sha256_file, Digest, Sha256};
use draftsmith_core::fsio::{sync_dir, DirLock};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::error::DataError;
use crate::leftovers::{refuse_unmanifested_shards, remove_leftovers, todo_ranges, warn_missing, Layout};
use crate::manifest::{
    check_resume, manifest_path, read_manifest, write_manifest, DistillManifest, DistillParams, ShardInfo, TargetId,
    FORMAT_VERSION,
};
use crate::parts::{check_kind, part_dirs, read_parts, Part, PartInfo};
use crate::record::DistillRecord;
use crate::schema::{from_batch, to_batch};

/// How a distilled dataset names its files (see [`crate::leftovers`]).
const LAYOUT: Layout = Layout {
    prefix: "shard-",
    suffix: ".parquet",
    manifest: crate::manifest::MANIFEST_FILE,
    command: "`draftsmith distill`",
    redone: "inputs",
};

/// Writes a distilled dataset, resuming a previous run in the same directory.
///
/// Records are held in memory until their shard is full. Dropping the writer without
/// [`ShardWriter::finish`] loses those pending inputs (fewer than one shard); a later
/// [`ShardWriter::open`] reports them as not done, so they are redone.
///
/// The caller pushes the inputs [`ShardWriter::todo`] lists, in that order: first those of the
/// listed shards whose files are missing (each rewritten under its own name, with the inputs it
/// covered), then from [`ShardWriter::inputs_done`] on.
pub struct ShardWriter {
    dir: PathBuf,
    manifest: DistillManifest,
    inputs_per_shard: usize,
    pending: Vec<DistillRecord>,
    pending_inputs: usize,
    /// Listed shards (indices into the manifest's) whose files are missing, in input order:
    /// the pushed inputs fill these first.
    redo: Vec<usize>,
    /// Held while the writer lives: a second run into this directory is refused.
    _lock: DirLock,
}

impl ShardWriter {
    /// Creates the dataset directory, or resumes the dataset already in it.
    ///
    /// Resuming requires the manifest's target and params to equal `target` and `params`
    /// ([`DataError::ResumeMismatch`] names the first differing field) and every listed shard
    /// that exists to have its recorded SHA-256 ([`DataError::CorruptShard`] otherwise: the user
    /// decides whether to delete it). A listed shard whose file is missing is redone
    /// ([`ShardWriter::todo`]). What a killed run left (temporaries, the next shard renamed but
    /// not yet listed) is removed with a warning and its inputs are redone; files named like
    /// shards that no interrupted run of this dataset can have written — any at all when there
    /// is no `manifest.json` — are refused with [`DataError::UnknownFiles`], and nothing is
    /// deleted (the rule is documented in this crate's `leftovers` module).
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
        // The other parts already begun must be of the same distillation, or the merge would
        // refuse them only once every part has run.
        for (other, path) in part_dirs(dir)? {
            let begun = other != part && manifest_path(&path).exists();
            let Some(theirs) = begun.then(|| read_manifest(&path)).transpose()? else { continue };
            // A part begun but stopped before its first shard still records its arguments.
            let unwritten = match theirs.shards.is_empty() {
                true => " (it has written no shard yet: if its run stopped, delete that directory)",
                false => "",
            };
            let bad = |problem: String| DataError::Parts { dir: dir.to_path_buf(), problem };
            let split = theirs.part.map(|p| (p.part.count, p.total_inputs));
            if split.is_some_and(|s| s != (part.count, total_inputs)) {
                return Err(bad(format!(
                    "{} is part {other} of {} inputs, and this run is part {part} of {total_inputs}: every part must \
                     be run with the same arguments and --shard count{unwritten}",
                    path.display(),
                    split.map_or(0, |s| s.1)
                )));
            }
            match check_resume(&path, &theirs, &target, &params) {
                Err(DataError::ResumeMismatch { field, existing, given, .. }) => {
                    return Err(bad(format!(
                        "part {other} ({}) has {field} = {existing}, this run has {given}: every part must be run \
                         with the same arguments{unwritten}",
                        path.display()
                    )))
                }
                other => other?,
            }
        }
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
        let lock = DirLock::acquire(dir, "distill")?;
        let on_disk = if manifest_path(dir).exists() { Some(read_manifest(dir)?) } else { None };
        // A manifest that lists no shard holds no work yet (a run stopped before its first shard,
        // e.g. by a missing chat template): a run with other settings starts afresh in it.
        let resuming = on_disk.as_ref().is_some_and(|m| !m.shards.is_empty());
        if on_disk.is_none() {
            refuse_unmanifested_shards(dir, &LAYOUT)?;
        }
        let manifest = match on_disk.filter(|_| resuming) {
            Some(manifest) => {
                check_resume(dir, &manifest, &target, &params)?;
                if manifest.part != part {
                    return Err(DataError::ResumeMismatch {
                        dir: dir.to_path_buf(),
                        field: "part",
                        existing: format!("{:?}", manifest.part),
                        given: format!("{part:?}"),
                    });
                }
                manifest
            }
            None => DistillManifest {
                format_version: FORMAT_VERSION,
                target,
                params,
                shards: Vec::new(),
                complete: false,
                part,
            },
        };
        let mut redo = Vec::new();
        for (index, shard) in manifest.shards.iter().enumerate() {
            let path = dir.join(&shard.file);
            if path.exists() {
                verify_checksum(&path, &shard.sha256)?;
            } else {
                redo.push(index);
            }
        }
        let listed: Vec<&str> = manifest.shards.iter().map(|s| s.file.as_str()).collect();
        remove_leftovers(dir, &LAYOUT, &listed)?;
        let mut writer = ShardWriter {
            dir: dir.to_path_buf(),
            manifest,
            inputs_per_shard,
            pending: Vec::new(),
            pending_inputs: 0,
            redo,
            _lock: lock,
        };
        for &index in &writer.redo {
            let shard = &writer.manifest.shards[index];
            warn_missing(dir, &LAYOUT, &shard.file, shard.first_input..shard.first_input + shard.inputs);
        }
        // The manifest on disk says so too while a listed shard is missing.
        if !resuming || (!writer.redo.is_empty() && writer.manifest.complete) {
            writer.manifest.complete = false;
            write_manifest(dir, &writer.manifest)?;
        }
        Ok(writer)
    }

    /// The input items covered by listed shards end here: after the shards of
    /// [`ShardWriter::todo`]'s first ranges are redone, the caller goes on from this index (for
    /// a part, an index into the whole input list).
    pub fn inputs_done(&self) -> usize {
        self.manifest.inputs_done()
    }

    /// The inputs still to push, out of `total` (the caller's input list), in the order
    /// [`ShardWriter::push_input`] takes them: the inputs of each listed shard whose file is
    /// missing (adjacent ones merged), then from [`ShardWriter::inputs_done`] to the end of
    /// [`ShardWriter::input_range`]. Refused, naming the shard, when a missing shard covers
    /// inputs beyond `total` (a rerun given fewer inputs than the run that wrote it).
    pub fn todo(&self, total: usize) -> Result<Vec<Range<usize>>, DataError> {
        let range = self.input_range(total)?;
        let mut missing = Vec::with_capacity(self.redo.len());
        for &index in &self.redo {
            let shard = &self.manifest.shards[index];
            let inputs = shard.first_input..shard.first_input + shard.inputs;
            if inputs.end > range.end {
                return Err(DataError::InvalidArgument {
                    path: self.dir.join(&shard.file),
                    problem: format!(
                        "listed in manifest.json but missing; it holds inputs {}..{} but this run has only {total}: \
                         rerun with the input list (--data, --limit) that wrote it to redo it",
                        inputs.start, inputs.end
                    ),
                });
            }
            missing.push(inputs);
        }
        let tail = self.inputs_done().clamp(range.start, range.end)..range.end;
        Ok(todo_ranges(missing, tail))
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
        let due = match self.redo.first() {
            Some(&index) => self.manifest.shards[index].inputs,
            None => self.inputs_per_shard,
        };
        if self.pending_inputs == due {
            self.write_shard()?;
        }
        Ok(())
    }

    /// Writes the last partial shard, marks the manifest complete and returns it. Refused while
    /// a listed shard is still missing (its inputs were not pushed: [`ShardWriter::todo`]).
    pub fn finish(mut self) -> Result<DistillManifest, DataError> {
        if let Some(&index) = self.redo.first() {
            let shard = &self.manifest.shards[index];
            return Err(DataError::InvalidArgument {
                path: self.dir.join(&shard.file),
                problem: format!(
                    "listed in manifest.json but missing, and its inputs {}..{} were not all given again: \
                     rerun the same `draftsmith distill` command to redo it",
                    shard.first_input,
                    shard.first_input + shard.inputs
                ),
            });
        }
        if self.pending_inputs > 0 {
            self.write_shard()?;
        }
        self.manifest.complete = true;
        write_manifest(&self.dir, &self.manifest)?;
        Ok(self.manifest)
    }

    /// Writes the pending records as the first missing listed shard (under its own name, its
    /// entry updated), or else as the next shard, listed in the manifest once it is in place.
    fn write_shard(&mut self) -> Result<(), DataError> {
        let redo = self.redo.first().copied();
        let file = match redo {
            Some(index) => self.manifest.shards[index].file.clone(),
            None => shard_file_name(self.manifest.shards.len()),
        };
        let path = self.dir.join(&file);
        let tmp = self.dir.join(format!("{file}.tmp"));
        let sha256 = write_parquet(&tmp, &self.pending)?;
        std::fs::rename(&tmp, &path).map_err(DataError::io(&path))?;
        sync_dir(&self.dir);
        let records = self.pending.len();
        let tokens = self.pending.iter().map(|r| r.tokens.len()).sum();
        match redo {
            Some(index) => {
                let shard = &mut self.manifest.shards[index];
                debug_assert_eq!(shard.inputs, self.pending_inputs);
                (shard.records, shard.tokens, shard.sha256) = (records, tokens, sha256);
                self.redo.remove(0);
                tracing::info!(shard = %path.display(), records, "redid missing shard");
            }
            None => self.manifest.shards.push(ShardInfo {
                file,
                first_input: self.manifest.inputs_done(),
                inputs: self.pending_inputs,
                records,
                tokens,
                sha256,
            }),
        }
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
        let mut problem = format!("sha256 is {found} but manifest.json records {expected}");
        if !ends_with_parquet_magic(path) {
            problem.push_str("; not a complete parquet file (it ends before its footer)");
        }
        return Err(DataError::CorruptShard { path: path.to_path_buf(), problem });
    }
    Ok(())
}

/// Whether the file ends with parquet's `PAR1` magic, as every complete parquet file does.
fn ends_with_parquet_magic(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let mut tail = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.seek(SeekFrom::End(-4)).and_then(|_| f.read_exact(&mut tail)))
        .is_ok_and(|()| &tail == b"PAR1")
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
        if dir.is_file() {
            let problem = "a file, not a distilled dataset (the directory `draftsmith distill --out` wrote)";
            return Err(DataError::NotADataset { dir: dir.to_path_buf(), problem });
        }
        let parts = part_dirs(dir)?;
        if !parts.is_empty() {
            return read_parts(dir, parts, read_dataset);
        }
        let problem = match dir.is_dir() {
            true => {
                "not a distilled dataset: it has no manifest.json (nor the parts of a split distillation); give \
                     the directory `draftsmith distill --out` wrote"
            }
            false => "no such directory (a distilled dataset is the directory `draftsmith distill --out` wrote)",
        };
        return Err(DataError::NotADataset { dir: dir.to_path_buf(), problem });
    }
    read_dataset(dir)
}

/// [`read_records`] of one dataset directory (with its own `manifest.json`).
fn read_dataset(dir: &Path) -> Result<(DistillManifest, Vec<DistillRecord>), DataError> {
    // A distillation still running would leave the reader a dataset it goes on changing.
    DirLock::check_not_written(dir)?;
    let manifest = read_manifest(dir)?;
    let mut records = Vec::with_capacity(manifest.records());
    for shard in &manifest.shards {
        let path = dir.join(&shard.file);
        // The checksum first: a damaged shard is named as such, not by what its records look like.
        verify_checksum(&path, &shard.sha256)?;
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
