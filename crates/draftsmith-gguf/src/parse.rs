//! Parsing of the GGUF header, metadata key/values and tensor infos (everything before the
//! data section). Layout, all little-endian:
//!
//! ```text
//! magic "GGUF" | version u32 | tensor_count u64 | kv_count u64
//! kv_count × (key: string, value_type: u32, value)
//! tensor_count × (name: string, n_dims: u32, dims: n_dims × u64, type: u32, offset: u64)
//! padding to `general.alignment` (default 32) | data section
//! ```
//! where a string is a `u64` length and UTF-8 bytes, and an array value is an element type
//! (`u32`), a count (`u64`) and the elements.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::GgufError;
use crate::metadata::MetadataValue;
use crate::reader::Reader;
use crate::tensor::{TensorInfo, MAX_DIMS};
use crate::types::GgmlType;

/// The four magic bytes at offset 0.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Size of the fixed header: magic, version, tensor count, metadata count.
pub const HEADER_LEN: u64 = 24;
/// Alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// More tensors than this is treated as corruption.
pub const MAX_TENSORS: u64 = 1_000_000;
/// More metadata entries than this is treated as corruption.
pub const MAX_METADATA: u64 = 1_000_000;
/// Deeper nesting of arrays than this is treated as corruption.
const MAX_ARRAY_DEPTH: u32 = 8;
/// Smallest possible encoded tensor info: empty name, no dims, type, offset.
const MIN_TENSOR_INFO_LEN: u64 = 8 + 4 + 4 + 8;

/// Everything before the data section.
pub(crate) struct Parsed {
    pub version: u32,
    pub metadata: BTreeMap<String, MetadataValue>,
    pub tensors: Vec<TensorInfo>,
    /// Offset of the first byte after the tensor infos (before alignment padding).
    pub infos_end: u64,
}

/// Parses header, metadata and tensor infos of the file `path` whose bytes are `bytes`.
pub(crate) fn parse(bytes: &[u8], path: &Path) -> Result<Parsed, GgufError> {
    let mut r = Reader::new(bytes, path);
    let (version, tensor_count, kv_count) = read_header(&mut r)?;
    let metadata = read_metadata(&mut r, kv_count)?;
    let tensors = read_tensor_infos(&mut r, tensor_count)?;
    Ok(Parsed { version, metadata, tensors, infos_end: r.pos() })
}

/// Checks magic, size and version; returns (version, tensor count, metadata count).
fn read_header(r: &mut Reader<'_>) -> Result<(u32, u64, u64), GgufError> {
    let path = r.path().to_path_buf();
    let file_len = r.file_len();
    if file_len >= 4 {
        let found: [u8; 4] = r.array(|| "magic".into())?;
        if found != MAGIC {
            let shown = String::from_utf8_lossy(&found).into_owned();
            return Err(GgufError::BadMagic { path, found, shown });
        }
    }
    if file_len < HEADER_LEN {
        return Err(GgufError::TooShort { path, len: file_len, needed: HEADER_LEN });
    }
    let version = r.u32(|| "version".into())?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion { path, version, hint: version_hint(version) });
    }
    let count_offset = r.pos();
    let tensor_count = r.u64(|| "tensor count".into())?;
    if tensor_count > MAX_TENSORS {
        return Err(r.absurd(count_offset, "tensor count".into(), tensor_count, MAX_TENSORS));
    }
    let kv_offset = r.pos();
    let kv_count = r.u64(|| "metadata key/value count".into())?;
    if kv_count > MAX_METADATA {
        let what = "metadata key/value count".into();
        return Err(r.absurd(kv_offset, what, kv_count, MAX_METADATA));
    }
    Ok((version, tensor_count, kv_count))
}

/// Explains common causes of a bad version number.
fn version_hint(version: u32) -> String {
    if version == 1 {
        " (GGUF v1 used 32-bit counts; re-convert the model with a current llama.cpp)".into()
    } else if matches!(version.swap_bytes(), 2 | 3) {
        " (this looks like a big-endian GGUF file, which is not supported)".into()
    } else {
        String::new()
    }
}

/// Reads `kv_count` metadata entries, rejecting duplicate keys.
fn read_metadata(r: &mut Reader<'_>, kv_count: u64) -> Result<BTreeMap<String, MetadataValue>, GgufError> {
    let mut metadata = BTreeMap::new();
    for index in 0..kv_count {
        let key = r.string(|| format!("key of metadata entry #{index}"))?;
        let type_offset = r.pos();
        let type_id = r.u32(|| format!("value type of metadata key {key:?}"))?;
        let value = read_value(r, &key, type_id, type_offset, 0)?;
        if metadata.contains_key(&key) {
            let path = r.path().to_path_buf();
            return Err(GgufError::Duplicate { path, what: "metadata key", name: key });
        }
        metadata.insert(key, value);
    }
    Ok(metadata)
}

/// Reads one value of GGUF type `type_id` (read at `type_offset`) for metadata key `key`.
fn read_value(
    r: &mut Reader<'_>,
    key: &str,
    type_id: u32,
    type_offset: u64,
    depth: u32,
) -> Result<MetadataValue, GgufError> {
    let what = || format!("value of metadata key {key:?}");
    let value = match type_id {
        0 => MetadataValue::U8(u8::from_le_bytes(r.array(what)?)),
        1 => MetadataValue::I8(i8::from_le_bytes(r.array(what)?)),
        2 => MetadataValue::U16(u16::from_le_bytes(r.array(what)?)),
        3 => MetadataValue::I16(i16::from_le_bytes(r.array(what)?)),
        4 => MetadataValue::U32(u32::from_le_bytes(r.array(what)?)),
        5 => MetadataValue::I32(i32::from_le_bytes(r.array(what)?)),
        6 => MetadataValue::F32(f32::from_le_bytes(r.array(what)?)),
        7 => MetadataValue::Bool(r.array::<1>(what)?[0] != 0),
        8 => MetadataValue::String(r.string(what)?),
        9 => read_array(r, key, depth)?,
        10 => MetadataValue::U64(u64::from_le_bytes(r.array(what)?)),
        11 => MetadataValue::I64(i64::from_le_bytes(r.array(what)?)),
        12 => MetadataValue::F64(f64::from_le_bytes(r.array(what)?)),
        _ => {
            let path = r.path().to_path_buf();
            let key = key.to_string();
            return Err(GgufError::UnknownValueType { path, key, type_id, offset: type_offset });
        }
    };
    Ok(value)
}

/// Smallest encoded size of one element of GGUF type `type_id` (unknown types: 1).
fn min_value_len(type_id: u32) -> u64 {
    match type_id {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        _ => 1,
    }
}

/// Reads an array value (element type, count, elements) for metadata key `key`.
fn read_array(r: &mut Reader<'_>, key: &str, depth: u32) -> Result<MetadataValue, GgufError> {
    let header_offset = r.pos();
    if depth >= MAX_ARRAY_DEPTH {
        let what = format!("array nesting depth of metadata key {key:?}");
        return Err(r.absurd(header_offset, what, u64::from(depth) + 1, MAX_ARRAY_DEPTH.into()));
    }
    let elem_type = r.u32(|| format!("array element type of metadata key {key:?}"))?;
    let count_offset = r.pos();
    let count = r.u64(|| format!("array length of metadata key {key:?}"))?;
    let min_len = min_value_len(elem_type);
    r.check_absurd(count, min_len, count_offset, || format!("array length of metadata key {key:?}"))?;
    let mut items = Vec::with_capacity(r.capacity_for(count, min_len));
    for _ in 0..count {
        items.push(read_value(r, key, elem_type, header_offset, depth + 1)?);
    }
    Ok(MetadataValue::Array(items))
}

/// Reads `tensor_count` tensor infos, rejecting duplicate names and unknown types.
fn read_tensor_infos(r: &mut Reader<'_>, tensor_count: u64) -> Result<Vec<TensorInfo>, GgufError> {
    let mut tensors = Vec::with_capacity(r.capacity_for(tensor_count, MIN_TENSOR_INFO_LEN));
    let mut seen = std::collections::HashSet::new();
    for index in 0..tensor_count {
        let info = read_tensor_info(r, index)?;
        if !seen.insert(info.name.clone()) {
            let path = r.path().to_path_buf();
            return Err(GgufError::Duplicate { path, what: "tensor name", name: info.name });
        }
        tensors.push(info);
    }
    Ok(tensors)
}

/// Reads tensor info number `index`.
fn read_tensor_info(r: &mut Reader<'_>, index: u64) -> Result<TensorInfo, GgufError> {
    let name = r.string(|| format!("name of tensor #{index}"))?;
    let n_dims_offset = r.pos();
    let n_dims = r.u32(|| format!("dimension count of tensor {name:?}"))?;
    if n_dims as usize > MAX_DIMS {
        let what = format!("dimension count of tensor {name:?}");
        return Err(r.absurd(n_dims_offset, what, n_dims.into(), MAX_DIMS as u64));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for axis in 0..n_dims {
        dims.push(r.u64(|| format!("dim {axis} of tensor {name:?}"))?);
    }
    let type_id = r.u32(|| format!("type of tensor {name:?}"))?;
    let offset = r.u64(|| format!("data offset of tensor {name:?}"))?;
    let Some(dtype) = GgmlType::from_id(type_id) else {
        let path = r.path().to_path_buf();
        return Err(GgufError::UnknownTensorType { path, tensor: name, type_id });
    };
    Ok(TensorInfo { name, dims, dtype, offset })
}
