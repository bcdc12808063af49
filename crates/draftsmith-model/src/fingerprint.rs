//! A stable fingerprint of a model's weights, so artifacts derived from a target (distilled
//! data, drafters) can refuse to be paired with another one.

use std::io::Read;
use std::path::Path;

use draftsmith_core::digest::{hex, Digest, Sha256};
use draftsmith_core::stamp::sha256_file_stamped;

use crate::error::ModelError;

/// sha256 (hex) of a GGUF file: what a fresh `<file>.sha256` stamp beside it records, else
/// hashed and stamped (`fetch` stamps the models it verifies; a user's own GGUF is read in full
/// once, not by every command that checks a drafter or a dataset against it). For a Hugging
/// Face directory, of `config.json` and each safetensors file's name, size and header (the
/// tensor table with every offset), which identifies the weights without reading gigabytes.
pub fn weights_sha256(path: &Path) -> Result<String, ModelError> {
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ModelError::Io { path: p, source }
    };
    if path.is_file() {
        return sha256_file_stamped(path).map_err(io(path));
    }
    let mut hasher = Sha256::new();
    {
        let config = path.join("config.json");
        hasher.update(std::fs::read(&config).map_err(io(&config))?);
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(io(path))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect();
        files.sort();
        for f in files {
            let mut file = std::fs::File::open(&f).map_err(io(&f))?;
            let size = file.metadata().map_err(io(&f))?.len();
            hasher.update(f.file_name().unwrap_or_default().as_encoded_bytes());
            hasher.update(size.to_le_bytes());
            let mut len = [0u8; 8];
            file.read_exact(&mut len).map_err(io(&f))?;
            let header_len = u64::from_le_bytes(len).min(size.saturating_sub(8)).min(100 << 20);
            let mut header = vec![0u8; header_len as usize];
            file.read_exact(&mut header).map_err(io(&f))?;
            hasher.update(&header);
        }
    }
    Ok(hex(&hasher.finalize()))
}
