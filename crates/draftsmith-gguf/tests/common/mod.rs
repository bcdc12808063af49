//! Test-only helpers: a minimal GGUF writer, temporary files, and the dequant fixtures.
//! Not part of the crate's public API.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A metadata value to write. `Array` carries its element type id explicitly so that empty and
/// heterogeneous (deliberately wrong) arrays can be written; `Raw` writes any type id and bytes.
#[derive(Clone, Debug)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(String),
    Array(u32, Vec<Value>),
    Raw { type_id: u32, bytes: Vec<u8> },
}

impl Value {
    /// The GGUF value type id.
    pub fn type_id(&self) -> u32 {
        match self {
            Value::U8(_) => 0,
            Value::I8(_) => 1,
            Value::U16(_) => 2,
            Value::I16(_) => 3,
            Value::U32(_) => 4,
            Value::I32(_) => 5,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::Str(_) => 8,
            Value::Array(..) => 9,
            Value::U64(_) => 10,
            Value::I64(_) => 11,
            Value::F64(_) => 12,
            Value::Raw { type_id, .. } => *type_id,
        }
    }

    /// An array of strings.
    pub fn strs(items: &[&str]) -> Value {
        Value::Array(8, items.iter().map(|s| Value::Str(s.to_string())).collect())
    }

    /// Appends the value's payload (without its type id).
    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Value::U8(v) => out.push(*v),
            Value::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::Bool(v) => out.push(u8::from(*v)),
            Value::Str(s) => write_str(out, s),
            Value::Array(elem, items) => {
                out.extend_from_slice(&elem.to_le_bytes());
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                items.iter().for_each(|item| item.write(out));
            }
            Value::Raw { bytes, .. } => out.extend_from_slice(bytes),
        }
    }
}

/// Appends a GGUF string (u64 length + bytes).
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A tensor to write. `offset` overrides the offset written in its info (data is still placed
/// at the computed offset), to make corrupt files.
#[derive(Clone, Debug)]
pub struct TestTensor {
    pub name: String,
    pub dims: Vec<u64>,
    pub type_id: u32,
    pub data: Vec<u8>,
    pub offset: Option<u64>,
}

/// Builds GGUF bytes.
#[derive(Clone, Debug)]
pub struct GgufBuilder {
    pub version: u32,
    /// Alignment used for layout; write `general.alignment` yourself when it is not 32.
    pub alignment: u64,
    pub kvs: Vec<(String, Value)>,
    pub tensors: Vec<TestTensor>,
}

impl GgufBuilder {
    /// An empty version-3 file with the default alignment.
    pub fn new() -> Self {
        Self { version: 3, alignment: 32, kvs: Vec::new(), tensors: Vec::new() }
    }

    /// Adds a metadata entry.
    pub fn kv(mut self, key: &str, value: Value) -> Self {
        self.kvs.push((key.to_string(), value));
        self
    }

    /// Adds a tensor.
    pub fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, data: Vec<u8>) -> Self {
        let tensor = TestTensor { name: name.into(), dims: dims.to_vec(), type_id, data, offset: None };
        self.tensors.push(tensor);
        self
    }

    /// Offsets (relative to the data section) at which tensor data is placed.
    fn layout(&self) -> Vec<u64> {
        let mut next = 0u64;
        let mut offsets = Vec::new();
        for t in &self.tensors {
            offsets.push(next);
            next = (next + t.data.len() as u64).next_multiple_of(self.alignment);
        }
        offsets
    }

    /// The complete file.
    pub fn build(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kvs.len() as u64).to_le_bytes());
        for (key, value) in &self.kvs {
            write_str(&mut out, key);
            out.extend_from_slice(&value.type_id().to_le_bytes());
            value.write(&mut out);
        }
        let offsets = self.layout();
        for (t, &offset) in self.tensors.iter().zip(&offsets) {
            write_str(&mut out, &t.name);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            t.dims.iter().for_each(|d| out.extend_from_slice(&d.to_le_bytes()));
            out.extend_from_slice(&t.type_id.to_le_bytes());
            out.extend_from_slice(&t.offset.unwrap_or(offset).to_le_bytes());
        }
        let data_start = (out.len() as u64).next_multiple_of(self.alignment) as usize;
        out.resize(data_start, 0);
        for (t, &offset) in self.tensors.iter().zip(&offsets) {
            out.resize(data_start + offset as usize, 0);
            out.extend_from_slice(&t.data);
        }
        out
    }
}

/// A file in the temp dir that is removed on drop.
pub struct TempFile {
    pub path: PathBuf,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes `bytes` to a fresh uniquely named temp file (pid + counter + `tag`).
pub fn write_temp(tag: &str, bytes: &[u8]) -> TempFile {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("draftsmith-gguf-test-{}-{n}-{tag}.gguf", std::process::id());
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, bytes).expect("write temp file");
    TempFile { path }
}

/// A dequant fixture written by `scripts/reference/make_dequant_fixtures.py`.
pub struct Fixture {
    pub type_name: String,
    pub type_id: u32,
    pub bytes: Vec<u8>,
    pub expected: Vec<f32>,
}

/// Directory of checked-in fixtures. `CARGO_MANIFEST_DIR` is read when the test runs (cargo
/// sets it then too), so a test binary reused from another checkout through a shared target
/// directory finds this checkout's files.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
        .join("tests/fixtures")
}

/// Loads `dequant_<name>.{bin,json}` (e.g. `name = "q4_k"`).
pub fn load_fixture(name: &str) -> Fixture {
    let dir = fixtures_dir();
    let bytes = std::fs::read(dir.join(format!("dequant_{name}.bin"))).expect("fixture .bin");
    let text = std::fs::read_to_string(dir.join(format!("dequant_{name}.json"))).expect("fixture .json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("fixture json parses");
    let expected: Vec<f32> = json["expected_bits"]
        .as_array()
        .expect("expected_bits array")
        .iter()
        .map(|b| f32::from_bits(b.as_u64().expect("u32 bits") as u32))
        .collect();
    assert_eq!(json["n_elements"].as_u64(), Some(expected.len() as u64));
    Fixture {
        type_name: json["type"].as_str().expect("type").to_string(),
        type_id: json["type_id"].as_u64().expect("type_id") as u32,
        bytes,
        expected,
    }
}

/// Asserts `actual == expected` bit for bit, naming the first differing index.
pub fn assert_bits_eq(what: &str, actual: &[f32], expected: &[f32]) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    let mismatches = actual.iter().zip(expected).filter(|(a, e)| a.to_bits() != e.to_bits()).count();
    if let Some(i) = (0..actual.len()).find(|&i| actual[i].to_bits() != expected[i].to_bits()) {
        panic!(
            "{what}: {mismatches} of {} values differ; first at index {i}: got {:e}, expected {:e}",
            actual.len(),
            actual[i],
            expected[i]
        );
    }
}
