//! Corrupt, truncated and unsupported files: each must fail with a typed error whose message
//! names the file and says what is wrong — never panic or allocate absurdly.

mod common;

use common::{write_temp, GgufBuilder, TestTensor, Value};
use draftsmith_gguf::{GgmlType, GgufError, GgufFile};

/// A small valid file: metadata of several kinds, an F32 and a Q8_0 tensor.
fn valid_file() -> GgufBuilder {
    let f32_data: Vec<u8> = (0..8).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut q8_data = half::f16::from_f32(0.5).to_bits().to_le_bytes().to_vec();
    q8_data.extend((0..32).map(|i| i as u8));
    GgufBuilder::new()
        .kv("general.architecture", Value::Str("llama".into()))
        .kv("llama.block_count", Value::U32(2))
        .kv("tokenizer.ggml.tokens", Value::strs(&["a", "bc"]))
        .tensor("norm.weight", &[8], GgmlType::F32.id(), f32_data)
        .tensor("embd.weight", &[32, 1], GgmlType::Q8_0.id(), q8_data)
}

/// Opens `bytes` written to a temp file; returns the error, its message and the path shown.
fn open_err(tag: &str, bytes: &[u8]) -> (GgufError, String, String) {
    let file = write_temp(tag, bytes);
    let err = GgufFile::open(&file.path).expect_err("opening must fail");
    let msg = err.to_string();
    let path = file.path.display().to_string();
    assert!(msg.contains(&path), "message does not name the file {path}: {msg}");
    eprintln!("{tag}: {msg}");
    (err, msg, path)
}

fn assert_contains(msg: &str, parts: &[&str]) {
    for part in parts {
        assert!(msg.contains(part), "expected {part:?} in: {msg}");
    }
}

#[test]
fn valid_file_opens() {
    let file = write_temp("valid", &valid_file().build());
    let gguf = GgufFile::open(&file.path).unwrap();
    assert_eq!(gguf.tensors().len(), 2);
    assert_eq!(gguf.dequantize("embd.weight").unwrap()[3], 1.5);
}

#[test]
fn wrong_magic() {
    let mut bytes = valid_file().build();
    bytes[..4].copy_from_slice(b"GGML");
    let (err, msg, _) = open_err("magic", &bytes);
    assert!(matches!(err, GgufError::BadMagic { found, .. } if &found == b"GGML"));
    assert_contains(&msg, &["not a GGUF file", "GGML"]);
}

#[test]
fn empty_and_short_files() {
    let (err, msg, _) = open_err("empty", &[]);
    assert!(matches!(err, GgufError::TooShort { len: 0, .. }), "{msg}");
    assert_contains(&msg, &["shorter than the 24-byte GGUF header"]);
    let (_, msg, _) = open_err("short", b"GGUF\x03\0\0\0\0");
    assert_contains(&msg, &["9 bytes", "shorter"]);
    let (err, _, _) = open_err("short-bad-magic", b"PK\x03\x04zip");
    assert!(matches!(err, GgufError::BadMagic { .. }));
}

/// Every proper prefix of a valid file fails with a message naming the file and the cause.
#[test]
fn every_truncation_is_reported() {
    let bytes = valid_file().build();
    for len in 0..bytes.len() {
        let (err, msg, _) = open_err("trunc", &bytes[..len]);
        let ok = match err {
            GgufError::TooShort { .. } => msg.contains("shorter"),
            GgufError::Truncated { offset, .. } => msg.contains("truncated") && offset <= len as u64,
            GgufError::AbsurdValue { .. } => msg.contains("corrupt or truncated"),
            GgufError::TensorOutOfBounds { .. } => msg.contains("past end of file"),
            _ => false,
        };
        assert!(ok, "prefix of {len} bytes: unexpected error: {msg}");
    }
}

#[test]
fn truncation_in_metadata_says_where_and_what() {
    let bytes = valid_file().build();
    // Cut inside the value of the first key ("general.architecture" string value).
    let cut = 24 + 8 + "general.architecture".len() + 4 + 8 + 2;
    let (err, msg, _) = open_err("trunc-meta", &bytes[..cut]);
    assert!(matches!(err, GgufError::Truncated { .. }), "{msg}");
    assert_contains(&msg, &["truncated", &format!("offset {}", cut - 2), "general.architecture"]);
}

#[test]
fn unknown_tensor_type_id() {
    for id in [99u32, 4] {
        let mut builder = valid_file();
        builder.tensors[1].type_id = id;
        let (err, msg, _) = open_err("unknown-type", &builder.build());
        assert!(matches!(err, GgufError::UnknownTensorType { type_id, .. } if type_id == id), "{msg}");
        assert_contains(&msg, &["embd.weight", "unknown ggml type id", &id.to_string()]);
    }
}

#[test]
fn known_but_unsupported_type_opens_but_does_not_dequantize() {
    let builder = valid_file().tensor("q2k.weight", &[256], GgmlType::Q2_K.id(), vec![0; 84]);
    let file = write_temp("unsupported", &builder.build());
    let gguf = GgufFile::open(&file.path).unwrap();
    assert_eq!(gguf.get_str("general.architecture").unwrap(), "llama");
    let msg = gguf.dequantize("q2k.weight").unwrap_err().to_string();
    assert_contains(&msg, &[&file.path.display().to_string(), "q2k.weight", "Q2_K", "does not support"]);
    let msg = gguf.check_all_supported().unwrap_err().to_string();
    assert_contains(&msg, &["q2k.weight", "Q2_K"]);
    assert!(gguf.dequantize("norm.weight").is_ok());
}

#[test]
fn tensor_data_past_end_of_file() {
    let mut builder = valid_file();
    builder.tensors[0].offset = Some(1 << 20);
    let (err, msg, _) = open_err("past-eof", &builder.build());
    assert!(matches!(err, GgufError::TensorOutOfBounds { .. }), "{msg}");
    assert_contains(&msg, &["norm.weight", "past end of file"]);

    let mut builder = valid_file();
    builder.tensors[1].dims = vec![32, 1000]; // 1000 rows declared, 1 stored
    let (_, msg, _) = open_err("past-eof-dims", &builder.build());
    assert_contains(&msg, &["embd.weight", "past end of file"]);
}

#[test]
fn overlapping_tensors_are_rejected() {
    // norm.weight declared F64 instead of F32: its 64 bytes reach into embd.weight's.
    let mut builder = valid_file();
    builder.tensors[0].type_id = GgmlType::F64.id();
    let (err, msg, _) = open_err("overlap-type", &builder.build());
    assert!(matches!(err, GgufError::OverlappingTensors { .. }), "{msg}");
    assert_contains(&msg, &["\"norm.weight\" (F64", "overlaps tensor \"embd.weight\" (Q8_0", "corrupt"]);

    // Two tensors declared at the same offset, listed in either order.
    let mut builder = valid_file();
    builder.tensors[1].offset = Some(0);
    builder.tensors[1].dims = vec![32, 1];
    let (err, msg, _) = open_err("overlap-offset", &builder.build());
    assert!(matches!(err, GgufError::OverlappingTensors { .. }), "{msg}");
    assert_contains(&msg, &["norm.weight", "embd.weight", "overlaps"]);

    // Empty tensors occupy no bytes, so they overlap nothing.
    let mut builder = valid_file().tensor("empty", &[0], GgmlType::F32.id(), vec![]);
    builder.tensors[2].offset = Some(0);
    let file = write_temp("overlap-empty", &builder.build());
    assert!(GgufFile::open(&file.path).is_ok());
}

#[test]
fn a_tensor_declared_smaller_than_its_data_is_rejected() {
    // 64 F32 values (256 bytes) declared F16: the table says 128 bytes, and the next tensor
    // starts 128 bytes later than such a tensor would end (a read gives garbage, not an error).
    let f32_data: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let valid = valid_file().tensor("big.weight", &[64], GgmlType::F32.id(), f32_data).tensor(
        "tail.weight",
        &[8],
        GgmlType::F32.id(),
        vec![0; 32],
    );
    let file = write_temp("gap-valid", &valid.build());
    assert!(GgufFile::open(&file.path).is_ok(), "padding below the alignment is not a gap");
    let mut builder = valid;
    builder.tensors[2].type_id = GgmlType::F16.id();
    let (err, msg, _) = open_err("gap-type", &builder.build());
    assert!(matches!(err, GgufError::TensorGap { .. }), "{msg}");
    assert_contains(&msg, &["\"big.weight\" (F16", "128 unused bytes", "\"tail.weight\"", "corrupt"]);
}

#[test]
fn absurd_string_lengths() {
    // A key whose length prefix is enormous.
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
    bytes.extend_from_slice(b"padding-bytes");
    let (err, msg, _) = open_err("absurd-key", &bytes);
    assert!(matches!(err, GgufError::AbsurdValue { .. }), "{msg}");
    assert_contains(&msg, &["absurd string length", "key of metadata entry #0"]);

    // A string value whose length is larger than the file.
    let raw = Value::Raw { type_id: 8, bytes: (1u64 << 40).to_le_bytes().to_vec() };
    let (_, msg, _) = open_err("absurd-value", &valid_file().kv("x.name", raw).build());
    assert_contains(&msg, &["absurd string length", "x.name"]);
}

#[test]
fn absurd_counts() {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&(1u64 << 40).to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    let (_, msg, _) = open_err("absurd-tensors", &bytes);
    assert_contains(&msg, &["absurd tensor count", "limit 1000000"]);

    let mut array = 5u32.to_le_bytes().to_vec(); // i32 elements
    array.extend_from_slice(&(1u64 << 50).to_le_bytes());
    let raw = Value::Raw { type_id: 9, bytes: array };
    let (_, msg, _) = open_err("absurd-array", &valid_file().kv("x.ids", raw).build());
    assert_contains(&msg, &["absurd array length", "x.ids"]);
}

#[test]
fn unsupported_versions() {
    for (version, hint) in [(1u32, "v1"), (4, ""), (0x0300_0000, "big-endian")] {
        let mut builder = valid_file();
        builder.version = version;
        let (err, msg, _) = open_err("version", &builder.build());
        assert!(matches!(err, GgufError::UnsupportedVersion { .. }), "{msg}");
        assert_contains(&msg, &["unsupported GGUF version", &version.to_string(), hint]);
    }
    let mut builder = valid_file();
    builder.version = 2;
    let file = write_temp("v2", &builder.build());
    assert_eq!(GgufFile::open(&file.path).unwrap().version(), 2);
}

#[test]
fn corrupt_metadata() {
    let raw = Value::Raw { type_id: 13, bytes: vec![0; 8] };
    let (_, msg, _) = open_err("value-type", &valid_file().kv("x.odd", raw).build());
    assert_contains(&msg, &["x.odd", "unknown value type id 13"]);

    let dup = valid_file().kv("llama.block_count", Value::U32(3));
    let (_, msg, _) = open_err("dup-key", &dup.build());
    assert_contains(&msg, &["duplicate metadata key", "llama.block_count"]);

    let bad_utf8 = Value::Raw { type_id: 8, bytes: [2u64.to_le_bytes().as_slice(), &[0xFF, 0xFE]].concat() };
    let (_, msg, _) = open_err("utf8", &valid_file().kv("x.bad", bad_utf8).build());
    assert_contains(&msg, &["invalid UTF-8", "x.bad"]);

    let mut nested = Value::Array(4, vec![Value::U32(1)]);
    for _ in 0..20 {
        nested = Value::Array(9, vec![nested]);
    }
    let (_, msg, _) = open_err("nesting", &valid_file().kv("x.deep", nested).build());
    assert_contains(&msg, &["absurd array nesting depth", "x.deep"]);
}

#[test]
fn corrupt_tensor_infos() {
    let mut builder = valid_file();
    builder.tensors[1].name = "norm.weight".into();
    let (_, msg, _) = open_err("dup-tensor", &builder.build());
    assert_contains(&msg, &["duplicate tensor name", "norm.weight"]);

    let mut builder = valid_file();
    builder.tensors[1].dims = vec![16, 2];
    let (err, msg, _) = open_err("shape", &builder.build());
    assert!(matches!(err, GgufError::BadShape { .. }), "{msg}");
    assert_contains(&msg, &["embd.weight", "invalid shape", "block size 32"]);

    let mut builder = valid_file();
    builder.tensors[0].dims = vec![8, 1, 1, 1, 1];
    let (_, msg, _) = open_err("ndims", &builder.build());
    assert_contains(&msg, &["absurd dimension count", "norm.weight"]);

    let mut builder = valid_file();
    builder.tensors[1].offset = Some(40);
    let (_, msg, _) = open_err("misaligned", &builder.build());
    assert_contains(&msg, &["embd.weight", "offset 40", "not a multiple of the alignment 32"]);

    let bad_alignment = valid_file().kv("general.alignment", Value::U32(48));
    let (_, msg, _) = open_err("alignment", &bad_alignment.build());
    assert_contains(&msg, &["general.alignment 48", "power of two"]);
}

#[test]
fn missing_file_names_the_path() {
    let path = std::env::temp_dir().join("draftsmith-gguf-test-does-not-exist.gguf");
    let msg = GgufFile::open(&path).unwrap_err().to_string();
    assert_contains(&msg, &[&path.display().to_string(), "cannot read"]);
}

#[test]
fn missing_keys_wrong_types_and_missing_tensors() {
    let builder = valid_file().kv("x.mixed", Value::Array(9, vec![]));
    let mut builder = builder.kv("x.nums", Value::Array(4, vec![Value::U32(1)]));
    builder.tensors.push(TestTensor {
        name: "extra".into(),
        dims: vec![1],
        type_id: 0,
        data: vec![0; 4],
        offset: None,
    });
    let file = write_temp("getters", &builder.build());
    let path = file.path.display().to_string();
    let gguf = GgufFile::open(&file.path).unwrap();
    let cases = [
        (gguf.get_u64("llama.context_length").unwrap_err(), vec!["missing metadata key", "llama.context_length"]),
        (gguf.get_u64("general.architecture").unwrap_err(), vec!["wrong type", "unsigned integer", "string"]),
        (gguf.get_str("llama.block_count").unwrap_err(), vec!["expected string, found u32"]),
        (gguf.get_f32("general.architecture").unwrap_err(), vec!["expected number"]),
        (gguf.get_str_array("x.nums").unwrap_err(), vec!["x.nums", "array whose element 0 is u32"]),
        (gguf.get_str_array("llama.block_count").unwrap_err(), vec!["array of strings", "found u32"]),
        (gguf.dequantize("nope").unwrap_err(), vec!["no tensor named \"nope\""]),
    ];
    for (err, parts) in cases {
        let msg = err.to_string();
        assert_contains(&msg, &[path.as_str()]);
        assert_contains(&msg, &parts);
    }
    assert_eq!(gguf.get_str_array("x.mixed").unwrap(), Vec::<&str>::new());
    assert_eq!(gguf.get_str_array("tokenizer.ggml.tokens").unwrap(), ["a", "bc"]);
    assert_eq!(gguf.get_f32("llama.block_count").unwrap(), 2.0);
}
