//! [`GgufFile`]: an opened, validated, memory-mapped GGUF file.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::dequant;
use crate::error::GgufError;
use crate::metadata::MetadataValue;
use crate::parse::{self, DEFAULT_ALIGNMENT, HEADER_LEN};
use crate::tensor::TensorInfo;

/// Metadata key holding the data-section alignment.
const ALIGNMENT_KEY: &str = "general.alignment";

/// A GGUF (v2 or v3) file, memory-mapped, with its metadata and tensor infos parsed.
///
/// [`GgufFile::open`] validates everything needed to read tensors safely: magic, version, every
/// metadata entry, every tensor's type id, shape and alignment, that every tensor's bytes lie
/// inside the file, and that no two tensors' bytes overlap or leave a gap of unused bytes (a
/// tensor declared with another type or shape than it was written with). Tensors of known but
/// unsupported types (e.g. Q2_K) are accepted at open, so that metadata can still be read;
/// dequantizing them fails.
pub struct GgufFile {
    path: PathBuf,
    version: u32,
    metadata: BTreeMap<String, MetadataValue>,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
    mmap: Mmap,
}

impl GgufFile {
    /// Opens, memory-maps and validates the GGUF file at `path`.
    ///
    /// The file must not be modified while the returned value is alive (as for any mmap).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, GgufError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| GgufError::Io { path: path.clone(), source };
        let file = File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < HEADER_LEN {
            // Too short to map usefully; parsing the bytes reports bad magic or a short file.
            let bytes = std::fs::read(&path).map_err(io)?;
            parse::parse(&bytes, &path)?;
            return Err(GgufError::TooShort { path, len, needed: HEADER_LEN });
        }
        // SAFETY: the map is read-only; as documented, the file must not change while mapped.
        let mmap = unsafe { Mmap::map(&file) }.map_err(io)?;
        let parsed = parse::parse(&mmap, &path)?;
        let alignment = alignment(&path, &parsed.metadata)?;
        let data_offset = parsed.infos_end.next_multiple_of(alignment);
        let mut gguf = Self {
            path,
            version: parsed.version,
            metadata: parsed.metadata,
            tensors: parsed.tensors,
            index: HashMap::new(),
            alignment,
            data_offset,
            mmap,
        };
        gguf.validate_tensors()?;
        gguf.index = gguf.tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        Ok(gguf)
    }

    /// Checks every tensor's shape, offset alignment and byte range, then that no two ranges
    /// overlap or leave a gap.
    fn validate_tensors(&self) -> Result<(), GgufError> {
        let file_len = self.mmap.len() as u64;
        for info in &self.tensors {
            let tensor = || info.name.clone();
            if let Some(problem) = info.shape_problem() {
                let (path, dims) = (self.path.clone(), info.dims.clone());
                return Err(GgufError::BadShape { path, tensor: tensor(), dims, problem });
            }
            if info.offset % self.alignment != 0 {
                let (path, offset, alignment) = (self.path.clone(), info.offset, self.alignment);
                return Err(GgufError::MisalignedTensor { path, tensor: tensor(), offset, alignment });
            }
            let start = self.data_offset.saturating_add(info.offset);
            let end = start.saturating_add(info.n_bytes());
            if end > file_len {
                let path = self.path.clone();
                return Err(GgufError::TensorOutOfBounds { path, tensor: tensor(), start, end, file_len });
            }
        }
        self.check_layout()
    }

    /// Fails with [`GgufError::OverlappingTensors`] if two (non-empty) tensors share bytes, and
    /// with [`GgufError::TensorGap`] if a tensor's data is followed by unused bytes of at least
    /// the alignment before the next one. A tensor declared with a larger type or shape than it
    /// was written with reaches into the next tensor's data; one declared smaller leaves part of
    /// its data unread, and the rest is read as the wrong format: either way reading it would
    /// silently give garbage. GGUF writers place each tensor right after the previous one,
    /// padded to the alignment, and llama.cpp refuses any other layout; this check is looser
    /// (any table order, any leading gap, bytes after the last tensor) but catches both
    /// mistakes for every tensor but the last in the file. Sorting by start offset makes this one
    /// pass: if any two ranges overlap, two neighbours in that order do.
    fn check_layout(&self) -> Result<(), GgufError> {
        let range = |info: &TensorInfo| {
            let start = self.data_offset.saturating_add(info.offset);
            (start, start.saturating_add(info.n_bytes()))
        };
        let mut order: Vec<&TensorInfo> = self.tensors.iter().filter(|t| t.n_bytes() > 0).collect();
        order.sort_unstable_by_key(|t| range(t));
        for pair in order.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let ((first_start, first_end), (second_start, second_end)) = (range(a), range(b));
            if second_start < first_end {
                return Err(GgufError::OverlappingTensors {
                    path: self.path.clone(),
                    first: a.name.clone(),
                    first_dtype: a.dtype,
                    first_start,
                    first_end,
                    second: b.name.clone(),
                    second_dtype: b.dtype,
                    second_start,
                    second_end,
                });
            }
            let padded_end = self.data_offset + (first_end - self.data_offset).next_multiple_of(self.alignment);
            if second_start > padded_end {
                return Err(GgufError::TensorGap {
                    path: self.path.clone(),
                    tensor: a.name.clone(),
                    dtype: a.dtype,
                    start: first_start,
                    end: first_end,
                    next: b.name.clone(),
                    next_start: second_start,
                    alignment: self.alignment,
                });
            }
        }
        Ok(())
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data-section alignment (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute byte offset of the data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// All metadata, by key.
    pub fn metadata(&self) -> &BTreeMap<String, MetadataValue> {
        &self.metadata
    }

    /// The metadata value for `key`, if present.
    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.metadata.get(key)
    }

    /// All tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor info named `name`, if present.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// The tensor info named `name`, or [`GgufError::TensorNotFound`].
    pub fn require_tensor(&self, name: &str) -> Result<&TensorInfo, GgufError> {
        self.tensor(name).ok_or_else(|| GgufError::TensorNotFound { path: self.path.clone(), name: name.to_string() })
    }

    /// The raw (block) bytes of a tensor of this file.
    ///
    /// # Panics
    /// If `info` describes bytes outside the file, which cannot happen for infos returned by
    /// this file (they were validated at open).
    pub fn tensor_bytes(&self, info: &TensorInfo) -> &[u8] {
        let start = self.data_offset.saturating_add(info.offset);
        let end = start.saturating_add(info.n_bytes());
        let range = usize::try_from(start).unwrap_or(usize::MAX)..usize::try_from(end).unwrap_or(usize::MAX);
        self.mmap.get(range).unwrap_or_else(|| {
            panic!("{}: tensor {:?} bytes {start}..{end} lie outside the file", self.path.display(), info.name)
        })
    }

    /// Dequantizes the tensor named `name` to f32, row-major with `dims[0]` fastest.
    pub fn dequantize(&self, name: &str) -> Result<Vec<f32>, GgufError> {
        let info = self.require_tensor(name)?;
        let mut out = vec![0.0f32; info.n_elements() as usize];
        self.dequantize_tensor_into(info, &mut out)?;
        Ok(out)
    }

    /// Dequantizes the tensor `info` of this file into `out`, whose length must be the
    /// tensor's element count.
    pub fn dequantize_tensor_into(&self, info: &TensorInfo, out: &mut [f32]) -> Result<(), GgufError> {
        if !info.dtype.is_supported() {
            return Err(GgufError::UnsupportedTensorType {
                path: self.path.clone(),
                tensor: info.name.clone(),
                dtype: info.dtype,
            });
        }
        dequant::dequantize_into(info.dtype, self.tensor_bytes(info), out).map_err(|source| GgufError::Dequant {
            path: self.path.clone(),
            tensor: info.name.clone(),
            source,
        })
    }

    /// Fails with [`GgufError::UnsupportedTensorType`] for the first tensor that cannot be
    /// dequantized; lets a loader reject a file before doing any work.
    pub fn check_all_supported(&self) -> Result<(), GgufError> {
        match self.tensors.iter().find(|t| !t.dtype.is_supported()) {
            None => Ok(()),
            Some(info) => Err(GgufError::UnsupportedTensorType {
                path: self.path.clone(),
                tensor: info.name.clone(),
                dtype: info.dtype,
            }),
        }
    }
}

/// Reads and checks `general.alignment` (default [`DEFAULT_ALIGNMENT`]).
fn alignment(path: &Path, metadata: &BTreeMap<String, MetadataValue>) -> Result<u64, GgufError> {
    let Some(value) = metadata.get(ALIGNMENT_KEY) else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let alignment = value.as_u64().ok_or_else(|| GgufError::WrongType {
        path: path.to_path_buf(),
        key: ALIGNMENT_KEY.to_string(),
        expected: "unsigned integer",
        found: value.type_name().to_string(),
    })?;
    if !alignment.is_power_of_two() {
        return Err(GgufError::BadAlignment { path: path.to_path_buf(), alignment });
    }
    Ok(alignment)
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("metadata_keys", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .finish()
    }
}
