//! Reading members out of downloaded archives: wheels (zip) and sdists
//! (`.tar.gz`). Debian packages are unpacked by `dpkg-deb`, see `assemble`.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::Path;

use flate2::read::GzDecoder;

use crate::error::{FetchError, Result};

/// Called with each matching member's name and contents.
pub(crate) type MemberSink<'a> = dyn FnMut(&str, &mut dyn Read) -> Result<()> + 'a;

/// Does `name` match `pattern`? A `*` matches any run of characters other than `/`.
pub(crate) fn member_matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some((b'*', rest)) => (0..=n.len()).take_while(|&i| i == 0 || n[i - 1] != b'/').any(|i| go(rest, &n[i..])),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

/// The final path component of a member name.
pub(crate) fn base_name(member: &str) -> &str {
    member.rsplit('/').next().unwrap_or(member)
}

/// Copies a member to `out`, attributing read errors to the archive and
/// write errors to `out_path`. Returns the bytes copied.
pub(crate) fn copy_member(
    reader: &mut dyn Read,
    archive: &Path,
    member: &str,
    out: &mut dyn Write,
    out_path: &Path,
) -> Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(|e| FetchError::io(archive, format!("read member {member}"), e))?;
        if n == 0 {
            return Ok(total);
        }
        out.write_all(&buf[..n]).map_err(|e| FetchError::io(out_path, "write", e))?;
        total += n as u64;
    }
}

/// Feeds every member of `archive` matching one of `patterns` to `sink`:
/// zip archives in pattern order (names sorted within a pattern), tarballs
/// in archive order. A pattern matching nothing is an error.
pub(crate) fn for_each_member(archive: &Path, patterns: &[&str], sink: &mut MemberSink<'_>) -> Result<()> {
    let name = archive.to_string_lossy();
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        for_each_tar_member(archive, patterns, sink)
    } else {
        for_each_zip_member(archive, patterns, sink)
    }
}

fn for_each_zip_member(archive: &Path, patterns: &[&str], sink: &mut MemberSink<'_>) -> Result<()> {
    let file = File::open(archive).map_err(|e| FetchError::io(archive, "open archive", e))?;
    let zip_err = |source| FetchError::Zip { archive: archive.to_path_buf(), source };
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(zip_err)?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    for pattern in patterns {
        let mut matched: Vec<&String> = names.iter().filter(|n| member_matches(pattern, n)).collect();
        if matched.is_empty() {
            return Err(FetchError::MemberMissing { archive: archive.to_path_buf(), member: pattern.to_string() });
        }
        matched.sort();
        for member in matched {
            let mut entry = zip.by_name(member).map_err(zip_err)?;
            sink(member, &mut entry)?;
        }
    }
    Ok(())
}

fn for_each_tar_member(archive: &Path, patterns: &[&str], sink: &mut MemberSink<'_>) -> Result<()> {
    let file = File::open(archive).map_err(|e| FetchError::io(archive, "open archive", e))?;
    let mut tar = tar::Archive::new(GzDecoder::new(BufReader::new(file)));
    let mut hits = vec![0usize; patterns.len()];
    let read_err = |e| FetchError::io(archive, "read tar.gz archive", e);
    for entry in tar.entries().map_err(read_err)? {
        let mut entry = entry.map_err(read_err)?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let member = entry.path().map_err(read_err)?.to_string_lossy().into_owned();
        if let Some(i) = patterns.iter().position(|p| member_matches(p, &member)) {
            hits[i] += 1;
            sink(&member, &mut entry)?;
        }
    }
    match hits.iter().position(|&h| h == 0) {
        Some(i) => Err(FetchError::MemberMissing { archive: archive.to_path_buf(), member: patterns[i].to_string() }),
        None => Ok(()),
    }
}
