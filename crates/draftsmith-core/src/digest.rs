//! sha256 checksums as lowercase hex: the one spelling of a checksum in manifests, model
//! fingerprints, dataset shards and fetch stamps. [`Sha256`] is re-exported so that a crate
//! hashing a stream as it writes it uses the same hasher and the same [`hex`].

use std::io::{self, Read};
use std::path::Path;

pub use sha2::{Digest, Sha256};

/// Lowercase hex of a digest (or of any bytes).
pub fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::with_capacity(2 * digest.len()), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// sha256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// sha256 of everything `reader` yields, hex (read in 1 MiB pieces).
pub fn sha256_reader(reader: &mut impl Read) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// sha256 of the file at `path`, hex. The caller names the path in its own error.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    sha256_reader(&mut std::fs::File::open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(sha256_hex(b""), empty);
        assert_eq!(sha256_reader(&mut &b""[..]).unwrap(), empty);
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(hex(&[0, 15, 255]), "000fff");
        let path = std::env::temp_dir().join(format!("draftsmith-core-digest-{}", std::process::id()));
        std::fs::write(&path, b"abc").unwrap();
        assert_eq!(sha256_file(&path).unwrap(), sha256_hex(b"abc"));
        std::fs::remove_file(&path).unwrap();
        assert!(sha256_file(&path).is_err());
    }
}
