//! Dequantization compared bit for bit with gguf-py (`gguf.quants.dequantize`) on the fixtures
//! written by `scripts/reference/make_dequant_fixtures.py`.

mod common;

use common::{assert_bits_eq, load_fixture, write_temp, GgufBuilder};
use draftsmith_gguf::{dequant, GgmlType, GgufFile};

/// All supported types with their fixture names.
const TYPES: &[(GgmlType, &str)] = &[
    (GgmlType::F32, "f32"),
    (GgmlType::F16, "f16"),
    (GgmlType::BF16, "bf16"),
    (GgmlType::Q4_0, "q4_0"),
    (GgmlType::Q4_1, "q4_1"),
    (GgmlType::Q5_0, "q5_0"),
    (GgmlType::Q5_1, "q5_1"),
    (GgmlType::Q8_0, "q8_0"),
    (GgmlType::Q4_K, "q4_k"),
    (GgmlType::Q5_K, "q5_k"),
    (GgmlType::Q6_K, "q6_k"),
];

/// Checks one type through `dequantize`, `dequantize_into` and the per-type kernel.
fn check(dtype: GgmlType, name: &str, kernel: fn(&[u8], &mut [f32])) {
    let fx = load_fixture(name);
    assert_eq!((fx.type_name.as_str(), fx.type_id), (dtype.name(), dtype.id()));
    assert!(fx.expected.len() >= 3 * dtype.block_size(), "fixture covers several blocks");
    let got = dequant::dequantize(dtype, &fx.bytes, fx.expected.len()).unwrap();
    assert_bits_eq(&format!("{dtype} dequantize"), &got, &fx.expected);
    let mut into = vec![f32::NAN; fx.expected.len()];
    dequant::dequantize_into(dtype, &fx.bytes, &mut into).unwrap();
    assert_bits_eq(&format!("{dtype} dequantize_into"), &into, &fx.expected);
    let mut direct = vec![f32::NAN; fx.expected.len()];
    kernel(&fx.bytes, &mut direct);
    assert_bits_eq(&format!("{dtype} kernel"), &direct, &fx.expected);
}

#[test]
fn f32_matches_gguf_py() {
    check(GgmlType::F32, "f32", dequant::dequantize_f32);
}

#[test]
fn f16_matches_gguf_py() {
    check(GgmlType::F16, "f16", dequant::dequantize_f16);
}

#[test]
fn bf16_matches_gguf_py() {
    check(GgmlType::BF16, "bf16", dequant::dequantize_bf16);
}

#[test]
fn q4_0_matches_gguf_py() {
    check(GgmlType::Q4_0, "q4_0", dequant::dequantize_q4_0);
}

#[test]
fn q4_1_matches_gguf_py() {
    check(GgmlType::Q4_1, "q4_1", dequant::dequantize_q4_1);
}

#[test]
fn q5_0_matches_gguf_py() {
    check(GgmlType::Q5_0, "q5_0", dequant::dequantize_q5_0);
}

#[test]
fn q5_1_matches_gguf_py() {
    check(GgmlType::Q5_1, "q5_1", dequant::dequantize_q5_1);
}

#[test]
fn q8_0_matches_gguf_py() {
    check(GgmlType::Q8_0, "q8_0", dequant::dequantize_q8_0);
}

#[test]
fn q4_k_matches_gguf_py() {
    check(GgmlType::Q4_K, "q4_k", dequant::dequantize_q4_k);
}

#[test]
fn q5_k_matches_gguf_py() {
    check(GgmlType::Q5_K, "q5_k", dequant::dequantize_q5_k);
}

#[test]
fn q6_k_matches_gguf_py() {
    check(GgmlType::Q6_K, "q6_k", dequant::dequantize_q6_k);
}

/// The fixtures also pass through a GGUF file: writer → open → `GgufFile::dequantize`, with
/// each tensor 2-D (rows of one block) and a non-default alignment.
#[test]
fn fixtures_round_trip_through_a_gguf_file() {
    let mut builder = GgufBuilder::new();
    builder.alignment = 64;
    builder = builder.kv("general.alignment", common::Value::U32(64));
    for &(dtype, name) in TYPES {
        let fx = load_fixture(name);
        let row = dtype.block_size().max(32) as u64;
        let dims = [row, fx.expected.len() as u64 / row];
        builder = builder.tensor(&format!("t.{name}"), &dims, dtype.id(), fx.bytes);
    }
    let file = write_temp("fixtures", &builder.build());
    let gguf = GgufFile::open(&file.path).unwrap();
    assert_eq!(gguf.alignment(), 64);
    assert_eq!(gguf.data_offset() % 64, 0);
    for &(dtype, name) in TYPES {
        let fx = load_fixture(name);
        let info = gguf.tensor(&format!("t.{name}")).unwrap();
        assert_eq!(info.dtype, dtype);
        assert_eq!(info.offset % 64, 0);
        assert_eq!(gguf.tensor_bytes(info), &fx.bytes[..]);
        let got = gguf.dequantize(&info.name).unwrap();
        assert_bits_eq(&format!("{dtype} via GgufFile"), &got, &fx.expected);
    }
}
