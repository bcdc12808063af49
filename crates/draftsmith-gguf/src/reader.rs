//! A bounds-checked little-endian cursor over a file's bytes.
//!
//! Every read names what it reads (lazily, so the happy path does not allocate) so that a
//! truncated or corrupt file produces an error saying where and what.

use std::path::Path;

use crate::error::GgufError;

/// Cursor over the bytes of one file.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    /// A cursor at offset 0 of `bytes`, which are the contents of `path`.
    pub(crate) fn new(bytes: &'a [u8], path: &'a Path) -> Self {
        Self { bytes, pos: 0, path }
    }

    /// Current byte offset.
    pub(crate) fn pos(&self) -> u64 {
        self.pos as u64
    }

    /// Length of the whole file.
    pub(crate) fn file_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Bytes left after the cursor.
    pub(crate) fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    /// The file path, for errors built by callers.
    pub(crate) fn path(&self) -> &'a Path {
        self.path
    }

    /// Takes the next `n` bytes, or fails with [`GgufError::Truncated`] describing `what`.
    pub(crate) fn take(&mut self, n: u64, what: impl FnOnce() -> String) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                path: self.path.to_path_buf(),
                offset: self.pos(),
                needed: n,
                what: what(),
                file_len: self.file_len(),
            });
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    /// Takes exactly `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self, what: impl FnOnce() -> String) -> Result<[u8; N], GgufError> {
        let bytes = self.take(N as u64, what)?;
        Ok(bytes.try_into().expect("take returned N bytes"))
    }

    /// Reads a little-endian `u32`.
    pub(crate) fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    /// Reads a little-endian `u64`.
    pub(crate) fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Reads a GGUF string: a `u64` byte length followed by UTF-8 bytes.
    ///
    /// A length larger than the whole file is reported as absurd (without allocating); one that
    /// merely runs past the end is reported as truncation.
    pub(crate) fn string(&mut self, what: impl Fn() -> String) -> Result<String, GgufError> {
        let len_offset = self.pos();
        let len = self.u64(|| format!("length of {}", what()))?;
        self.check_absurd(len, 1, len_offset, || format!("string length of {}", what()))?;
        let start = self.pos();
        let bytes = self.take(len, &what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::InvalidUtf8 {
            path: self.path.to_path_buf(),
            offset: start,
            what: what(),
        })
    }

    /// Fails with [`GgufError::AbsurdValue`] when `count` items of at least `min_size` bytes each
    /// could not fit in the whole file.
    pub(crate) fn check_absurd(
        &self,
        count: u64,
        min_size: u64,
        offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<(), GgufError> {
        let limit = self.file_len() / min_size.max(1);
        if count > limit {
            return Err(self.absurd(offset, what(), count, limit));
        }
        Ok(())
    }

    /// Builds an [`GgufError::AbsurdValue`] for this file.
    pub(crate) fn absurd(&self, offset: u64, what: String, value: u64, limit: u64) -> GgufError {
        GgufError::AbsurdValue { path: self.path.to_path_buf(), offset, what, value, limit }
    }

    /// A capacity for `count` items of at least `min_size` bytes that never exceeds what the
    /// remaining bytes could hold, so corrupt counts cannot cause huge allocations.
    pub(crate) fn capacity_for(&self, count: u64, min_size: u64) -> usize {
        count.min(self.remaining() / min_size.max(1)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_reports_truncation() {
        let path = Path::new("/x/y.gguf");
        let mut bytes = 3u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"abc");
        bytes.extend_from_slice(&[1, 0]);
        let mut r = Reader::new(&bytes, path);
        assert_eq!(r.string(|| "key".into()).unwrap(), "abc");
        let err = r.u32(|| "version".into()).unwrap_err().to_string();
        assert!(err.contains("/x/y.gguf") && err.contains("offset 11") && err.contains("version"), "{err}");
    }

    #[test]
    fn absurd_string_length_does_not_allocate() {
        let path = Path::new("f.gguf");
        let bytes = u64::MAX.to_le_bytes();
        let err = Reader::new(&bytes, path).string(|| "key".into()).unwrap_err().to_string();
        assert!(err.contains("absurd string length of key"), "{err}");
    }
}
