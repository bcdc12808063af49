//! ggml tensor types: ids as stored in GGUF, block geometry, and which ones we can dequantize.

use std::fmt;

/// Number of values in a K-quant super-block.
pub const QK_K: usize = 256;

/// A ggml tensor element type, as identified in a GGUF tensor info.
///
/// Every type ggml currently defines is listed so that files can be opened and sized; only those
/// for which [`GgmlType::is_supported`] is true can be dequantized.
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum GgmlType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE half float.
    F16,
    /// Blocks of 32: f16 scale, 4-bit signed values (offset 8).
    Q4_0,
    /// Blocks of 32: f16 scale and min, 4-bit unsigned values.
    Q4_1,
    /// Blocks of 32: f16 scale, 5-bit signed values (offset 16).
    Q5_0,
    /// Blocks of 32: f16 scale and min, 5-bit unsigned values.
    Q5_1,
    /// Blocks of 32: f16 scale, 8-bit signed values.
    Q8_0,
    /// Blocks of 32 with f32 scale and sum (unsupported).
    Q8_1,
    /// K-quant, 2 bits (unsupported).
    Q2_K,
    /// K-quant, 3 bits (unsupported).
    Q3_K,
    /// K-quant super-blocks of 256: f16 d/dmin, 6-bit scales and mins, 4-bit values.
    Q4_K,
    /// K-quant super-blocks of 256: f16 d/dmin, 6-bit scales and mins, 5-bit values.
    Q5_K,
    /// K-quant super-blocks of 256: 6-bit values, 8-bit signed scales, f16 d.
    Q6_K,
    /// K-quant, 8 bits, used for intermediate products (unsupported).
    Q8_K,
    /// i-quant (unsupported).
    IQ2_XXS,
    /// i-quant (unsupported).
    IQ2_XS,
    /// i-quant (unsupported).
    IQ3_XXS,
    /// i-quant (unsupported).
    IQ1_S,
    /// i-quant (unsupported).
    IQ4_NL,
    /// i-quant (unsupported).
    IQ3_S,
    /// i-quant (unsupported).
    IQ2_S,
    /// i-quant (unsupported).
    IQ4_XS,
    /// 8-bit integer (unsupported).
    I8,
    /// 16-bit integer (unsupported).
    I16,
    /// 32-bit integer (unsupported).
    I32,
    /// 64-bit integer (unsupported).
    I64,
    /// 64-bit float (unsupported).
    F64,
    /// i-quant (unsupported).
    IQ1_M,
    /// bfloat16 (the top 16 bits of an f32).
    BF16,
    /// Ternary quant (unsupported).
    TQ1_0,
    /// Ternary quant (unsupported).
    TQ2_0,
    /// Microscaling FP4 (unsupported).
    MXFP4,
    /// NVIDIA FP4 (unsupported).
    NVFP4,
    /// 1-bit quant (unsupported).
    Q1_0,
}

/// One row of the type table: (type, GGUF id, name, values per block, bytes per block, supported).
type Row = (GgmlType, u32, &'static str, usize, usize, bool);

/// The ggml type table (ids and sizes follow ggml.h / gguf-py `GGML_QUANT_SIZES`).
#[rustfmt::skip]
const TABLE: &[Row] = &[
    (GgmlType::F32, 0, "F32", 1, 4, true),
    (GgmlType::F16, 1, "F16", 1, 2, true),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 2 + 16, true),
    (GgmlType::Q4_1, 3, "Q4_1", 32, 2 + 2 + 16, true),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 2 + 4 + 16, true),
    (GgmlType::Q5_1, 7, "Q5_1", 32, 2 + 2 + 4 + 16, true),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 2 + 32, true),
    (GgmlType::Q8_1, 9, "Q8_1", 32, 4 + 4 + 32, false),
    (GgmlType::Q2_K, 10, "Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4, false),
    (GgmlType::Q3_K, 11, "Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, false),
    (GgmlType::Q4_K, 12, "Q4_K", QK_K, 2 + 2 + 12 + QK_K / 2, true),
    (GgmlType::Q5_K, 13, "Q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2, true),
    (GgmlType::Q6_K, 14, "Q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, true),
    (GgmlType::Q8_K, 15, "Q8_K", QK_K, 4 + QK_K + QK_K / 8, false),
    (GgmlType::IQ2_XXS, 16, "IQ2_XXS", QK_K, 2 + QK_K / 4, false),
    (GgmlType::IQ2_XS, 17, "IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32, false),
    (GgmlType::IQ3_XXS, 18, "IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8, false),
    (GgmlType::IQ1_S, 19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, false),
    (GgmlType::IQ4_NL, 20, "IQ4_NL", 32, 2 + 16, false),
    (GgmlType::IQ3_S, 21, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, false),
    (GgmlType::IQ2_S, 22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, false),
    (GgmlType::IQ4_XS, 23, "IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, false),
    (GgmlType::I8, 24, "I8", 1, 1, false),
    (GgmlType::I16, 25, "I16", 1, 2, false),
    (GgmlType::I32, 26, "I32", 1, 4, false),
    (GgmlType::I64, 27, "I64", 1, 8, false),
    (GgmlType::F64, 28, "F64", 1, 8, false),
    (GgmlType::IQ1_M, 29, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false),
    (GgmlType::BF16, 30, "BF16", 1, 2, true),
    (GgmlType::TQ1_0, 34, "TQ1_0", QK_K, 2 + 4 * 13, false),
    (GgmlType::TQ2_0, 35, "TQ2_0", QK_K, 2 + 64, false),
    (GgmlType::MXFP4, 39, "MXFP4", 32, 1 + 16, false),
    (GgmlType::NVFP4, 40, "NVFP4", 64, 4 + 32, false),
    (GgmlType::Q1_0, 41, "Q1_0", 128, 2 + 16, false),
];

impl GgmlType {
    /// The type with GGUF/ggml id `id`, or `None` for ids ggml does not (or no longer) define.
    pub fn from_id(id: u32) -> Option<Self> {
        TABLE.iter().find(|row| row.1 == id).map(|row| row.0)
    }

    /// The type's GGUF/ggml id.
    pub fn id(self) -> u32 {
        self.row().1
    }

    /// The type's name as ggml spells it (e.g. `"Q4_K"`).
    pub fn name(self) -> &'static str {
        self.row().2
    }

    /// Number of values in one block (1 for plain float and integer types).
    pub fn block_size(self) -> usize {
        self.row().3
    }

    /// Number of bytes in one block.
    pub fn type_size(self) -> usize {
        self.row().4
    }

    /// Whether values are stored as plain floats, one per element (F32, F16, BF16, F64), rather
    /// than in quantized blocks or as integers. llama.cpp keeps 1-D tensors (norm weights,
    /// biases) in such a type.
    pub fn is_float(self) -> bool {
        matches!(self, Self::F32 | Self::F16 | Self::BF16 | Self::F64)
    }

    /// Whether [`crate::dequant::dequantize`] supports this type.
    pub fn is_supported(self) -> bool {
        self.row().5
    }

    /// The table row; the enum's variants are declared in table order.
    fn row(self) -> &'static Row {
        &TABLE[self as usize]
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_variant_order_and_ids_round_trip() {
        for (index, row) in TABLE.iter().enumerate() {
            assert_eq!(row.0 as usize, index, "{:?} is out of table order", row.0);
            assert_eq!(GgmlType::from_id(row.1), Some(row.0));
            assert_eq!(row.0.id(), row.1);
            assert_eq!(row.0.name(), format!("{:?}", row.0));
            assert_eq!(row.0.to_string(), row.2);
        }
    }

    #[test]
    fn removed_and_unknown_ids_are_none() {
        for id in [4, 5, 31, 32, 33, 36, 37, 38, 42, 1000, u32::MAX] {
            assert_eq!(GgmlType::from_id(id), None, "id {id}");
        }
    }

    #[test]
    fn sizes_of_supported_types() {
        let expect = [
            (GgmlType::F32, 1, 4),
            (GgmlType::F16, 1, 2),
            (GgmlType::BF16, 1, 2),
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q4_1, 32, 20),
            (GgmlType::Q5_0, 32, 22),
            (GgmlType::Q5_1, 32, 24),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q4_K, 256, 144),
            (GgmlType::Q5_K, 256, 176),
            (GgmlType::Q6_K, 256, 210),
        ];
        for (t, bs, ts) in expect {
            assert_eq!((t.block_size(), t.type_size(), t.is_supported()), (bs, ts, true), "{t}");
        }
        let supported = TABLE.iter().filter(|row| row.5).count();
        assert_eq!(supported, expect.len());
    }

    #[test]
    fn float_types() {
        let floats: Vec<GgmlType> = TABLE.iter().map(|row| row.0).filter(|t| t.is_float()).collect();
        assert_eq!(floats, [GgmlType::F32, GgmlType::F16, GgmlType::F64, GgmlType::BF16]);
    }
}
