//! Files written by the test writer read back exactly: every metadata value type, nested
//! arrays, versions 2 and 3, tensor infos and layout.

mod common;

use common::{write_temp, GgufBuilder, Value};
use draftsmith_gguf::{GgmlType, GgufFile, MetadataValue as M, TensorInfo};

#[test]
fn every_metadata_type_reads_back() {
    let builder = GgufBuilder::new()
        .kv("u8", Value::U8(200))
        .kv("i8", Value::I8(-100))
        .kv("u16", Value::U16(60000))
        .kv("i16", Value::I16(-30000))
        .kv("u32", Value::U32(4_000_000_000))
        .kv("i32", Value::I32(-2_000_000_000))
        .kv("u64", Value::U64(u64::MAX))
        .kv("i64", Value::I64(i64::MIN))
        .kv("f32", Value::F32(1e-5))
        .kv("f64", Value::F64(-2.5e300))
        .kv("bool", Value::Bool(true))
        .kv("str", Value::Str("héllo ✓".into()))
        .kv("empty", Value::Str(String::new()))
        .kv("nested", Value::Array(9, vec![Value::strs(&["a"]), Value::Array(0, vec![Value::U8(7)])]))
        .kv("floats", Value::Array(6, vec![Value::F32(0.5), Value::F32(-1.0)]));
    let file = write_temp("all-types", &builder.build());
    let g = GgufFile::open(&file.path).unwrap();
    let expect = [
        ("u8", M::U8(200)),
        ("i8", M::I8(-100)),
        ("u16", M::U16(60000)),
        ("i16", M::I16(-30000)),
        ("u32", M::U32(4_000_000_000)),
        ("i32", M::I32(-2_000_000_000)),
        ("u64", M::U64(u64::MAX)),
        ("i64", M::I64(i64::MIN)),
        ("f32", M::F32(1e-5)),
        ("f64", M::F64(-2.5e300)),
        ("bool", M::Bool(true)),
        ("str", M::String("héllo ✓".into())),
        ("empty", M::String(String::new())),
    ];
    for (key, value) in &expect {
        assert_eq!(g.get(key), Some(value), "{key}");
    }
    let nested = M::Array(vec![M::Array(vec![M::String("a".into())]), M::Array(vec![M::U8(7)])]);
    assert_eq!(g.get("nested"), Some(&nested));
    assert_eq!(g.metadata().len(), expect.len() + 2);
    assert_eq!(g.get_u64("u64").unwrap(), u64::MAX);
    assert_eq!(g.get_i64("i64").unwrap(), i64::MIN);
    assert!(g.get_u64("i8").is_err());
    assert_eq!(g.get_f32("f32").unwrap(), 1e-5);
    assert!(g.get_bool("bool").unwrap());
    assert_eq!(g.get_f32_array("floats").unwrap(), [0.5, -1.0]);
    assert_eq!(g.get_array("nested").unwrap().len(), 2);
    assert!(g.tensors().is_empty());
}

#[test]
fn tensor_infos_and_layout() {
    let mut builder = GgufBuilder::new().kv("general.architecture", Value::Str("tiny".into()));
    builder = builder
        .tensor("a", &[3], GgmlType::F32.id(), vec![0; 12]) // 12 bytes: next tensor is padded
        .tensor("b", &[2, 2], GgmlType::F16.id(), half_bytes(&[1.0, -2.0, 0.5, 65504.0]))
        .tensor("c", &[4, 1, 1, 1], GgmlType::BF16.id(), vec![0x80, 0x3F, 0, 0xC0, 0, 0, 0x80, 0xFF]);
    for version in [2, 3] {
        builder.version = version;
        let file = write_temp("layout", &builder.build());
        let g = GgufFile::open(&file.path).unwrap();
        assert_eq!(g.version(), version);
        assert_eq!(g.alignment(), 32);
        assert_eq!(g.data_offset() % 32, 0);
        let names: Vec<_> = g.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        let b = g.tensor("b").unwrap();
        let want = TensorInfo { name: "b".into(), dims: vec![2, 2], dtype: GgmlType::F16, offset: 32 };
        assert_eq!(b, &want);
        assert_eq!((b.n_elements(), b.n_bytes(), b.shape()), (4, 8, vec![2, 2]));
        assert_eq!(g.dequantize("b").unwrap(), [1.0, -2.0, 0.5, 65504.0]);
        assert_eq!(g.dequantize("c").unwrap(), [1.0, -2.0, 0.0, f32::NEG_INFINITY]);
        assert_eq!(g.tensor_bytes(g.tensor("a").unwrap()).len(), 12);
        assert!(g.tensor("missing").is_none());
        assert!(format!("{g:?}").contains("tensors: 3"));
    }
}

fn half_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|&v| half::f16::from_f32(v).to_bits().to_le_bytes()).collect()
}
