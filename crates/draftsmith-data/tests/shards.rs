//! Distilled datasets: round trip, resume after a kill, leftovers, corruption, mismatches.

// Lists of input ranges to redo, one range long at times.
#![allow(clippy::single_range_in_vec_init)]

mod common;

use std::path::Path;

use draftsmith_data::{
    read_manifest, read_records, DataError, DistillParams, DistillRecord, RecordSource, ShardWriter, TargetId, NO_TOKEN,
};

const TEACHER_LEN: usize = 2;
const TOPK: usize = 3;
const PER_SHARD: usize = 4;

fn target() -> TargetId {
    TargetId { name: "tiny".into(), sha256: "ab".repeat(32) }
}

fn params() -> DistillParams {
    DistillParams {
        settings: serde_json::json!({"temperature": 0.0, "max_new_tokens": 16}),
        teacher_len: Some(TEACHER_LEN),
        topk: Some(TOPK),
    }
}

/// The records made from input `i`: none for every fifth input, else one or two records with
/// lengths, contents and optional columns that vary with `i`.
fn records_for(i: usize) -> Vec<DistillRecord> {
    if i % 5 == 3 {
        return Vec::new();
    }
    (0..1 + i % 2)
        .map(|k| {
            let n = 3 + (i * 7 + k) % 11;
            let tokens: Vec<u32> = (0..n).map(|t| (i * 100 + k * 10 + t) as u32).collect();
            let loss_mask = (0..n).map(|t| t >= n / 2).collect();
            let with_teacher = k == 0;
            DistillRecord {
                id: format!("conv-{i}"),
                teacher: with_teacher
                    .then(|| (0..n * TEACHER_LEN).map(|j| if j % 5 == 0 { NO_TOKEN } else { j as u32 }).collect()),
                teacher_topk_ids: with_teacher.then(|| (0..n * TOPK).map(|j| j as u32 * 3).collect()),
                teacher_topk_logprobs: with_teacher.then(|| (0..n * TOPK).map(|j| -(j as f32) / 7.0).collect()),
                source: if k == 0 { RecordSource::SelfDistilled } else { RecordSource::GroundTruth },
                tokens,
                loss_mask,
            }
        })
        .collect()
}

fn push_range(writer: &mut ShardWriter, inputs: std::ops::Range<usize>) {
    for i in inputs {
        writer.push_input(records_for(i)).unwrap();
    }
}

fn expected(inputs: usize) -> Vec<DistillRecord> {
    (0..inputs).flat_map(records_for).collect()
}

/// Writes `inputs` items in one uninterrupted run.
fn write_all(dir: &Path, inputs: usize) {
    let mut writer = ShardWriter::open(dir, target(), params(), PER_SHARD).unwrap();
    push_range(&mut writer, 0..inputs);
    writer.finish().unwrap();
}

#[test]
fn round_trip_two_and_a_half_shards() {
    let dir = common::fresh_dir("round-trip");
    write_all(&dir, 10);
    let (manifest, records) = read_records(&dir).unwrap();
    assert_eq!(records, expected(10));
    assert!(manifest.complete);
    let files: Vec<_> = manifest.shards.iter().map(|s| s.file.as_str()).collect();
    assert_eq!(files, ["shard-00000.parquet", "shard-00001.parquet", "shard-00002.parquet"]);
    let inputs: Vec<_> = manifest.shards.iter().map(|s| (s.first_input, s.inputs)).collect();
    assert_eq!(inputs, [(0, 4), (4, 4), (8, 2)]);
    assert_eq!(manifest.records(), records.len());
    let tokens: usize = records.iter().map(|r| r.tokens.len()).sum();
    assert_eq!(manifest.shards.iter().map(|s| s.tokens).sum::<usize>(), tokens);
    assert_eq!(manifest.target, target());
    assert_eq!(manifest.params, params());
    assert_eq!(read_manifest(&dir).unwrap(), manifest);
}

#[test]
fn resume_after_drop_matches_uninterrupted_run() {
    let reference = common::fresh_dir("resume-reference");
    write_all(&reference, 10);

    let dir = common::fresh_dir("resume");
    let mut writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    push_range(&mut writer, 0..6); // one full shard + 2 pending inputs, lost on drop
    drop(writer);
    assert!(!read_manifest(&dir).unwrap().complete);

    let mut writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    assert_eq!(writer.inputs_done(), 4);
    let done = writer.inputs_done();
    push_range(&mut writer, done..10);
    let manifest = writer.finish().unwrap();
    assert_eq!(manifest, read_manifest(&reference).unwrap());
    assert_eq!(read_records(&dir).unwrap().1, expected(10));

    // Reopening a finished dataset resumes nothing and keeps it complete.
    let writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    assert_eq!(writer.inputs_done(), 10);
    assert_eq!(writer.finish().unwrap(), manifest);
}

#[test]
fn leftover_tmp_shard_is_removed_and_redone() {
    let dir = common::fresh_dir("leftover");
    let mut writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    push_range(&mut writer, 0..5);
    drop(writer);
    // A kill in the middle of writing shard 1.
    let tmp = dir.join("shard-00001.parquet.tmp");
    std::fs::write(&tmp, b"PAR1 half a shard").unwrap();

    let mut writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    assert!(!tmp.exists());
    assert_eq!(writer.inputs_done(), 4);
    push_range(&mut writer, 4..10);
    writer.finish().unwrap();
    assert_eq!(read_records(&dir).unwrap().1, expected(10));
    assert!(!tmp.exists());
}

#[test]
fn truncated_shard_is_a_corrupt_shard_error_naming_the_file() {
    let dir = common::fresh_dir("truncated");
    write_all(&dir, 10);
    let shard = dir.join("shard-00001.parquet");
    let bytes = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &bytes[..bytes.len() / 2]).unwrap();

    let err = read_records(&dir).unwrap_err();
    assert!(matches!(err, DataError::CorruptShard { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("shard-00001.parquet"), "{text}");
    assert!(text.contains("not a complete parquet file") && text.contains("delete it and rerun"), "{text}");

    // Resuming refuses it too, by checksum, and touches nothing.
    let Err(err) = ShardWriter::open(&dir, target(), params(), PER_SHARD) else { panic!("opened") };
    let text = err.to_string();
    assert!(text.contains("shard-00001.parquet") && text.contains("sha256"), "{text}");
    assert!(text.contains("delete it and rerun") && text.contains("redo just that shard"), "{text}");
    assert_eq!(std::fs::read(&shard).unwrap().len(), bytes.len() / 2);

    // Deleted as the message says, it is redone on the next run: just that shard.
    std::fs::remove_file(&shard).unwrap();
    redo_missing(&dir, 10, &[4..8]);
}

/// Reopens `dir` (written from `inputs` inputs, some listed shards deleted), checks that the
/// writer asks for exactly `missing` and then the rest, pushes them, and checks that the
/// dataset is the uninterrupted one again with every other shard untouched.
fn redo_missing(dir: &Path, inputs: usize, missing: &[std::ops::Range<usize>]) {
    let before = read_manifest(dir).unwrap();
    let kept: Vec<(String, Vec<u8>)> = before
        .shards
        .iter()
        .filter(|s| dir.join(&s.file).exists())
        .map(|s| (s.file.clone(), std::fs::read(dir.join(&s.file)).unwrap()))
        .collect();
    let mut writer = ShardWriter::open(dir, target(), params(), PER_SHARD).unwrap();
    assert!(!read_manifest(dir).unwrap().complete, "incomplete on disk while a shard is missing");
    let mut todo = missing.to_vec();
    if writer.inputs_done() < inputs {
        todo.push(writer.inputs_done()..inputs);
    }
    assert_eq!(writer.todo(inputs).unwrap(), todo);
    for range in todo {
        push_range(&mut writer, range);
    }
    let manifest = writer.finish().unwrap();
    let reference = common::fresh_dir(&format!("{}-reference", dir.file_name().unwrap().to_string_lossy()));
    write_all(&reference, inputs);
    assert_eq!(manifest, read_manifest(&reference).unwrap(), "the manifest lists the redone shards again");
    assert_eq!(read_records(dir).unwrap().1, expected(inputs));
    for (file, bytes) in kept {
        assert_eq!(std::fs::read(dir.join(&file)).unwrap(), bytes, "{file} kept as it was");
    }
}

#[test]
fn missing_shard_is_named_and_redone_alone() {
    let dir = common::fresh_dir("missing");
    write_all(&dir, 6);
    std::fs::remove_file(dir.join("shard-00000.parquet")).unwrap();
    let err = read_records(&dir).unwrap_err();
    assert!(matches!(err, DataError::MissingShard { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("shard-00000.parquet") && text.contains("redo just that shard"), "{text}");
    redo_missing(&dir, 6, &[0..4]);
}

#[test]
fn several_missing_shards_are_redone_and_the_run_goes_on() {
    let dir = common::fresh_dir("missing-several");
    let mut writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    push_range(&mut writer, 0..16);
    drop(writer); // four shards listed, the run not finished
    for shard in [0, 1, 3] {
        std::fs::remove_file(dir.join(format!("shard-{shard:05}.parquet"))).unwrap();
    }
    // A kill while redoing shard 0 left its temporary.
    std::fs::write(dir.join("shard-00000.parquet.tmp"), b"PAR1 torn").unwrap();
    redo_missing(&dir, 22, &[0..8, 12..16]);
    assert!(!dir.join("shard-00000.parquet.tmp").exists());
}

#[test]
fn a_missing_shard_must_be_pushed_before_finishing() {
    let dir = common::fresh_dir("missing-unpushed");
    write_all(&dir, 10);
    std::fs::remove_file(dir.join("shard-00002.parquet")).unwrap();
    let writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    assert_eq!(writer.todo(10).unwrap(), [8..10]);
    let text = writer.todo(6).unwrap_err().to_string();
    assert!(text.contains("shard-00002.parquet") && text.contains("inputs 8..10") && text.contains("only 6"), "{text}");
    let text = writer.finish().unwrap_err().to_string();
    assert!(text.contains("shard-00002.parquet") && text.contains("missing"), "{text}");
    assert!(!read_manifest(&dir).unwrap().complete);
}

/// The files in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn shards_without_a_manifest_are_refused_and_kept() {
    let dir = common::fresh_dir("no-manifest");
    write_all(&dir, 10);
    std::fs::remove_file(dir.join("manifest.json")).unwrap();
    let before: Vec<Vec<u8>> =
        (0..3).map(|i| std::fs::read(dir.join(format!("shard-{i:05}.parquet"))).unwrap()).collect();
    for _ in 0..2 {
        let Err(err) = ShardWriter::open(&dir, target(), params(), PER_SHARD) else { panic!("opened") };
        assert!(matches!(err, DataError::UnknownFiles { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.contains(&dir.display().to_string()) && text.contains("no manifest.json"), "{text}");
        assert!(text.contains("shard-00000.parquet, shard-00001.parquet, shard-00002.parquet"), "{text}");
        assert!(text.contains("nothing was deleted") && text.contains("move them elsewhere"), "{text}");
        // Nothing deleted, and no manifest written that would adopt them on the next try.
        assert_eq!(files(&dir), ["shard-00000.parquet", "shard-00001.parquet", "shard-00002.parquet"]);
    }
    for (i, bytes) in before.iter().enumerate() {
        assert_eq!(&std::fs::read(dir.join(format!("shard-{i:05}.parquet"))).unwrap(), bytes);
    }

    // An unrelated directory with shard-named files: the same.
    let other = common::fresh_dir("unrelated");
    std::fs::write(other.join("shard-00007.parquet"), b"someone else's").unwrap();
    std::fs::write(other.join("notes.tmp"), b"mine").unwrap();
    let Err(err) = ShardWriter::open(&other, target(), params(), PER_SHARD) else { panic!("opened") };
    assert!(err.to_string().contains("shard-00007.parquet"), "{err}");
    assert_eq!(files(&other), ["notes.tmp", "shard-00007.parquet"]);
    // Files not named like shards are no obstacle, and are left alone.
    std::fs::remove_file(other.join("shard-00007.parquet")).unwrap();
    write_all(&other, 2);
    assert_eq!(files(&other), ["manifest.json", "notes.tmp", "shard-00000.parquet"]);
}

#[test]
fn unlisted_shards_other_than_the_next_are_refused_and_kept() {
    let dir = common::fresh_dir("unlisted");
    let mut writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    push_range(&mut writer, 0..4);
    drop(writer); // shard 0 listed
                  // Shard 1 renamed into place before a kill (an interrupted run's), shard 5 from elsewhere.
    std::fs::write(dir.join("shard-00001.parquet"), b"PAR1 whole but unlisted").unwrap();
    std::fs::write(dir.join("shard-00005.parquet"), b"not ours").unwrap();
    let Err(err) = ShardWriter::open(&dir, target(), params(), PER_SHARD) else { panic!("opened") };
    let text = err.to_string();
    assert!(text.contains("shard-00005.parquet") && !text.contains("shard-00001"), "{text}");
    assert!(dir.join("shard-00001.parquet").exists(), "nothing deleted while refusing");
    std::fs::rename(dir.join("shard-00005.parquet"), dir.join("elsewhere.parquet")).unwrap();
    let writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    assert_eq!(writer.inputs_done(), 4);
    assert_eq!(files(&dir), ["draftsmith.lock", "elsewhere.parquet", "manifest.json", "shard-00000.parquet"]);
    // A reader waits for the writer: the dataset it would read is still changing.
    let err = draftsmith_data::read_records(&dir).unwrap_err().to_string();
    assert!(err.contains("is still being written") && err.contains("draftsmith distill"), "{err}");
    drop(writer);
    assert_eq!(draftsmith_data::read_records(&dir).unwrap().1.len(), 4, "read once the writer is gone");
    assert_eq!(
        files(&dir),
        ["elsewhere.parquet", "manifest.json", "shard-00000.parquet"],
        "the lock goes with the writer"
    );
}

#[test]
fn resume_with_other_params_or_target_is_refused() {
    let dir = common::fresh_dir("mismatch");
    let mut writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    push_range(&mut writer, 0..4);
    drop(writer);

    let field_of = |target: TargetId, params: DistillParams| match ShardWriter::open(&dir, target, params, PER_SHARD) {
        Err(DataError::ResumeMismatch { field, .. }) => field,
        other => panic!("expected a mismatch, got {:?}", other.map(|w| w.inputs_done())),
    };
    let other_settings = DistillParams { settings: serde_json::json!({"temperature": 1.0}), ..params() };
    assert_eq!(field_of(target(), other_settings), "params.settings");
    assert_eq!(field_of(target(), DistillParams { topk: Some(8), ..params() }), "params.topk");
    assert_eq!(field_of(target(), DistillParams { teacher_len: None, ..params() }), "params.teacher_len");
    let other_target = TargetId { sha256: "cd".repeat(32), ..target() };
    assert_eq!(field_of(other_target, params()), "target.sha256");
    // The refused attempts changed nothing.
    assert_eq!(ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap().inputs_done(), 4);
}

#[test]
fn a_manifest_without_shards_is_started_afresh_with_other_settings() {
    // A run that stopped before its first shard (a missing chat template, a failed model load)
    // left a manifest and no work: rerunning as its error advised, with other settings, starts over.
    let dir = common::fresh_dir("no-shards");
    drop(ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap());
    let other_settings = DistillParams { settings: serde_json::json!({"chat_template": false}), ..params() };
    let mut writer = ShardWriter::open(&dir, target(), other_settings.clone(), PER_SHARD).unwrap();
    push_range(&mut writer, 0..4);
    drop(writer);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["params"]["settings"], other_settings.settings);
    // Once a shard is listed, other settings are refused again.
    assert!(matches!(
        ShardWriter::open(&dir, target(), params(), PER_SHARD),
        Err(DataError::ResumeMismatch { field: "params.settings", .. })
    ));
}

#[test]
fn a_manifest_without_the_inputs_sha256_resumes_and_one_with_it_must_match() {
    let dir = common::fresh_dir("input-sha");
    // Nested as `distill` nests it, under the settings' `input`.
    let plain = DistillParams { settings: serde_json::json!({"temperature": 0.0, "input": {"bytes": 7}}), ..params() };
    let with = |sha: &str| {
        let mut settings = plain.settings.clone();
        settings["input"][draftsmith_data::INPUT_SHA256] = serde_json::json!(sha);
        DistillParams { settings, ..params() }
    };
    // Written before the input's sha256 was recorded.
    let mut writer = ShardWriter::open(&dir, target(), plain.clone(), PER_SHARD).unwrap();
    push_range(&mut writer, 0..4);
    drop(writer);
    assert_eq!(ShardWriter::open(&dir, target(), with("aa"), PER_SHARD).unwrap().inputs_done(), 4);
    let recorded = common::fresh_dir("input-sha-recorded");
    let mut writer = ShardWriter::open(&recorded, target(), with("aa"), PER_SHARD).unwrap();
    push_range(&mut writer, 0..4);
    drop(writer);
    let err = ShardWriter::open(&recorded, target(), with("bb"), PER_SHARD).err();
    assert!(matches!(err, Some(DataError::ResumeMismatch { field: "params.settings", .. })), "{err:?}");
    // Only the differing setting is shown, under its dotted key.
    let text = err.unwrap().to_string();
    assert!(text.contains(&format!(r#"{{"input.{}":"aa"}}"#, draftsmith_data::INPUT_SHA256)), "{text}");
}

#[test]
fn inconsistent_records_are_rejected_on_push() {
    let dir = common::fresh_dir("inconsistent");
    let mut writer = ShardWriter::open(&dir, target(), params(), PER_SHARD).unwrap();
    let mut bad = records_for(0).remove(0);
    bad.loss_mask.pop();
    let err = writer.push_input(vec![bad]).unwrap_err();
    assert!(matches!(err, DataError::InvalidRecord { ref id, .. } if id == "conv-0"), "{err:?}");
    assert!(err.to_string().contains("loss_mask"), "{err}");

    let mut bad = records_for(0).remove(0);
    bad.teacher.as_mut().unwrap().push(1);
    let text = writer.push_input(vec![bad]).unwrap_err().to_string();
    assert!(text.contains("teacher") && text.contains("teacher_len 2"), "{text}");

    let no_teacher = DistillParams { teacher_len: None, topk: None, ..params() };
    let other = common::fresh_dir("inconsistent-no-teacher");
    let mut writer = ShardWriter::open(&other, target(), no_teacher, PER_SHARD).unwrap();
    let text = writer.push_input(records_for(0)).unwrap_err().to_string();
    assert!(text.contains("no teacher_len"), "{text}");
}

#[test]
fn zero_inputs_per_shard_is_refused() {
    let dir = common::fresh_dir("zero");
    let Err(err) = ShardWriter::open(&dir, target(), params(), 0) else { panic!("opened") };
    assert!(matches!(err, DataError::InvalidArgument { .. }), "{err:?}");
}

#[test]
fn a_directory_that_is_not_a_dataset_is_named_as_such() {
    let dir = common::fresh_dir("not-a-dataset");
    std::fs::write(dir.join("shard-00000.parquet"), b"PAR1").unwrap();
    let err = read_records(&dir).unwrap_err();
    assert!(matches!(err, DataError::NotADataset { .. }), "{err}");
    assert!(err.to_string().contains("no manifest.json") && err.to_string().contains("distill --out"), "{err}");
    let err = read_records(&dir.join("nowhere")).unwrap_err().to_string();
    assert!(err.contains("nowhere: no such directory"), "{err}");
    let err = read_records(&dir.join("shard-00000.parquet")).unwrap_err().to_string();
    assert!(err.contains("a file, not a distilled dataset"), "{err}");
}
