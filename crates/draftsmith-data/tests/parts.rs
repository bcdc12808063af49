//! Sharded distillation: N parts written separately read back as the single-process dataset;
//! a missing, unfinished or inconsistent part is refused, naming it.

mod common;

use std::path::Path;

use draftsmith_data::{
    read_records, DataError, DistillParams, DistillRecord, Part, RecordSource, ShardWriter, TargetId, INPUT_SHA256,
};

const PER_SHARD: usize = 3;

fn target() -> TargetId {
    TargetId { name: "tiny".into(), sha256: "cd".repeat(32) }
}

fn params(temperature: f64) -> DistillParams {
    DistillParams { settings: serde_json::json!({ "temperature": temperature }), teacher_len: None, topk: None }
}

/// None for every fourth input, else one record whose tokens depend on `i`.
fn records_for(i: usize) -> Vec<DistillRecord> {
    if i % 4 == 2 {
        return Vec::new();
    }
    let n = 2 + i % 5;
    vec![DistillRecord {
        id: format!("conv-{i}"),
        tokens: (0..n).map(|t| (i * 10 + t) as u32).collect(),
        loss_mask: (0..n).map(|t| t > 0).collect(),
        source: RecordSource::SelfDistilled,
        teacher: None,
        teacher_topk_ids: None,
        teacher_topk_logprobs: None,
    }]
}

/// Writes part `part` of `total` inputs (all of it unless `stop_after` cuts it short).
fn write_part(dir: &Path, part: Part, total: usize, temperature: f64, stop_after: Option<usize>) {
    write_part_with(dir, part, total, params(temperature), stop_after)
}

/// [`write_part`] with distillation parameters `params`.
fn write_part_with(dir: &Path, part: Part, total: usize, params: DistillParams, stop_after: Option<usize>) {
    let mut writer = ShardWriter::open_part(dir, part, total, target(), params, PER_SHARD).unwrap();
    let range = writer.input_range(total).unwrap();
    // A fresh part starts at its range's start, a resumed one after its finished shards.
    let start = writer.inputs_done();
    assert!(range.start <= start && start <= range.end, "{start} outside {range:?}");
    let end = stop_after.map_or(range.end, |n| range.start + n);
    for i in start..end {
        writer.push_input(records_for(i)).unwrap();
    }
    if stop_after.is_none() {
        writer.finish().unwrap();
    }
}

#[test]
fn parts_cover_the_inputs_once_in_order() {
    for count in 1..=5 {
        for total in [0usize, 1, 4, 7, 23] {
            let ranges: Vec<_> = (0..count).map(|i| Part::new(i, count).unwrap().range(total)).collect();
            let flat: Vec<usize> = ranges.iter().flat_map(|r| r.clone()).collect();
            assert_eq!(flat, (0..total).collect::<Vec<_>>(), "{count} parts of {total}");
        }
    }
    assert_eq!("1/4".parse::<Part>().unwrap(), Part::new(1, 4).unwrap());
    assert_eq!(Part::new(1, 4).unwrap().to_string(), "1/4");
    for bad in ["4/4", "1", "a/2", "0/0"] {
        assert!(bad.parse::<Part>().unwrap_err().contains(bad), "{bad}");
    }
}

#[test]
fn merged_parts_equal_the_single_process_dataset() {
    let total = 17;
    let single = common::fresh_dir("parts-single");
    let mut writer = ShardWriter::open(&single, target(), params(0.0), PER_SHARD).unwrap();
    for i in 0..total {
        writer.push_input(records_for(i)).unwrap();
    }
    writer.finish().unwrap();
    let (_, want) = read_records(&single).unwrap();

    let dir = common::fresh_dir("parts-merged");
    // Written out of order, one part resumed after an interruption.
    write_part(&dir, Part::new(2, 3).unwrap(), total, 0.0, None);
    write_part(&dir, Part::new(0, 3).unwrap(), total, 0.0, Some(4));
    write_part(&dir, Part::new(1, 3).unwrap(), total, 0.0, None);
    let err = read_records(&dir).unwrap_err().to_string();
    assert!(err.contains("part 0/3") && err.contains("not finished"), "{err}");
    write_part(&dir, Part::new(0, 3).unwrap(), total, 0.0, None);
    let (manifest, got) = read_records(&dir).unwrap();
    assert_eq!(got, want, "record for record");
    assert!(manifest.complete && manifest.part.is_none());
    assert_eq!(manifest.records(), want.len());
    assert!(manifest.shards[0].file.starts_with("part-00000-of-00003/"), "{:?}", manifest.shards[0]);

    // A single-process run into the parts' directory, or a part into a single dataset, is refused.
    let err = ShardWriter::open(&dir, target(), params(0.0), PER_SHARD).err().unwrap().to_string();
    assert!(err.contains("--shard"), "{err}");
    let err = ShardWriter::open_part(&single, Part::new(0, 2).unwrap(), total, target(), params(0.0), PER_SHARD)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("single-process"), "{err}");
}

#[test]
fn missing_foreign_and_inconsistent_parts_are_named() {
    let total = 9;
    let dir = common::fresh_dir("parts-bad");
    write_part(&dir, Part::new(0, 2).unwrap(), total, 0.0, None);
    let err = read_records(&dir).unwrap_err();
    assert!(matches!(err, DataError::Parts { .. }), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("part 1/2") && err.contains("missing") && err.contains("part-00001-of-00002"), "{err}");

    // A part run with other arguments than those begun beside it is refused before it starts.
    let open = |part: Part, total: usize, temperature: f64| {
        ShardWriter::open_part(&dir, part, total, target(), params(temperature), PER_SHARD).err().unwrap().to_string()
    };
    let err = open(Part::new(1, 2).unwrap(), total, 0.7);
    assert!(err.contains("part 0/2") && err.contains("temperature") && err.contains("same arguments"), "{err}");
    let err = open(Part::new(1, 2).unwrap(), total + 2, 0.0);
    assert!(err.contains("part-00000-of-00002") && err.contains("of 11"), "{err}");
    let err = open(Part::new(1, 3).unwrap(), total, 0.0);
    assert!(err.contains("part 0/2") && err.contains("--shard count"), "{err}");
    assert!(!dir.join("part-00001-of-00002").exists() && !dir.join("part-00001-of-00003").exists());
    // So is one beside a part begun that has written no shard yet.
    let begun = common::fresh_dir("parts-begun");
    drop(ShardWriter::open_part(&begun, Part::new(0, 2).unwrap(), total, target(), params(0.0), PER_SHARD).unwrap());
    let err = ShardWriter::open_part(&begun, Part::new(1, 2).unwrap(), total, target(), params(0.7), PER_SHARD)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("part 0/2") && err.contains("no shard yet"), "{err}");

    // Parts made elsewhere and moved in beside it are refused by the merge, naming them.
    let moved_in = |part: Part, total: usize, temperature: f64| {
        let elsewhere = common::fresh_dir("parts-elsewhere");
        write_part(&elsewhere, part, total, temperature, None);
        std::fs::rename(elsewhere.join(part.dir_name()), dir.join(part.dir_name())).unwrap();
        let err = read_records(&dir).unwrap_err().to_string();
        std::fs::remove_dir_all(dir.join(part.dir_name())).unwrap();
        err
    };
    // Part 1 distilled with other settings.
    let err = moved_in(Part::new(1, 2).unwrap(), total, 0.7);
    assert!(err.contains("part-00001-of-00002") && err.contains("params.settings"), "{err}");
    // Part 1 of a different input list.
    let err = moved_in(Part::new(1, 2).unwrap(), total + 2, 0.0);
    assert!(err.contains("part-00001-of-00002") && err.contains("inputs"), "{err}");
    // A part of another split beside them.
    let err = moved_in(Part::new(1, 3).unwrap(), total, 0.0);
    assert!(err.contains("different splits"), "{err}");

    // Resuming a part with another input count is refused.
    let err = ShardWriter::open_part(&dir, Part::new(0, 2).unwrap(), total + 1, target(), params(0.0), PER_SHARD)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("part") && err.contains("part-00000-of-00002"), "{err}");
}

#[test]
fn parts_made_before_and_after_the_input_sha_merge_and_a_difference_names_only_its_key() {
    let total = 9;
    let settings = |v: serde_json::Value| DistillParams { settings: v, teacher_len: None, topk: None };
    // Part 0 written before the input's sha256 was recorded, part 1 after: one distillation.
    let dir = common::fresh_dir("parts-sha");
    let old = serde_json::json!({ "temperature": 0.0, "opts": { "a": 1, "b": 2 } });
    write_part_with(&dir, Part::new(0, 2).unwrap(), total, settings(old.clone()), None);
    let mut new = old.clone();
    new[INPUT_SHA256] = "ab".repeat(32).into();
    write_part_with(&dir, Part::new(1, 2).unwrap(), total, settings(new.clone()), None);
    let (_, records) = read_records(&dir).unwrap();
    assert_eq!(records.len(), (0..total).filter(|i| i % 4 != 2).count());

    // A part whose settings differ in one nested key is refused, naming that key alone.
    let other = common::fresh_dir("parts-nested");
    write_part_with(&other, Part::new(0, 2).unwrap(), total, settings(new.clone()), None);
    let elsewhere = common::fresh_dir("parts-nested-elsewhere");
    new["opts"]["b"] = 3.into();
    write_part_with(&elsewhere, Part::new(1, 2).unwrap(), total, settings(new), None);
    let part = Part::new(1, 2).unwrap();
    std::fs::rename(elsewhere.join(part.dir_name()), other.join(part.dir_name())).unwrap();
    let err = read_records(&other).unwrap_err().to_string();
    assert!(err.contains("opts.b") && err.contains("not one distillation"), "{err}");
    assert!(!err.contains("temperature") && !err.contains(INPUT_SHA256), "only the differing key: {err}");
}
