//! GGUF metadata values and their typed accessors.

/// A GGUF metadata value. Arrays may nest (GGUF allows arrays of arrays).
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataValue {
    /// `GGUF_TYPE_UINT8` (id 0).
    U8(u8),
    /// `GGUF_TYPE_INT8` (id 1).
    I8(i8),
    /// `GGUF_TYPE_UINT16` (id 2).
    U16(u16),
    /// `GGUF_TYPE_INT16` (id 3).
    I16(i16),
    /// `GGUF_TYPE_UINT32` (id 4).
    U32(u32),
    /// `GGUF_TYPE_INT32` (id 5).
    I32(i32),
    /// `GGUF_TYPE_UINT64` (id 10).
    U64(u64),
    /// `GGUF_TYPE_INT64` (id 11).
    I64(i64),
    /// `GGUF_TYPE_FLOAT32` (id 6).
    F32(f32),
    /// `GGUF_TYPE_FLOAT64` (id 12).
    F64(f64),
    /// `GGUF_TYPE_BOOL` (id 7).
    Bool(bool),
    /// `GGUF_TYPE_STRING` (id 8).
    String(String),
    /// `GGUF_TYPE_ARRAY` (id 9).
    Array(Vec<MetadataValue>),
}

impl MetadataValue {
    /// The value as an unsigned integer: any integer type holding a non-negative value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Self::U8(v) => Some(v.into()),
            Self::U16(v) => Some(v.into()),
            Self::U32(v) => Some(v.into()),
            Self::U64(v) => Some(v),
            Self::I8(v) => u64::try_from(v).ok(),
            Self::I16(v) => u64::try_from(v).ok(),
            Self::I32(v) => u64::try_from(v).ok(),
            Self::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer: any integer type whose value fits in an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Self::I8(v) => Some(v.into()),
            Self::I16(v) => Some(v.into()),
            Self::I32(v) => Some(v.into()),
            Self::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a float: either float type, or any integer type (converted).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::F32(v) => Some(v.into()),
            Self::F64(v) => Some(v),
            Self::U64(v) => Some(v as f64),
            Self::I64(v) => Some(v as f64),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The value as a boolean (only for `Bool`).
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Self::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a string slice (only for `String`).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(v) => Some(v),
            _ => None,
        }
    }

    /// The value's elements (only for `Array`).
    pub fn as_array(&self) -> Option<&[MetadataValue]> {
        match self {
            Self::Array(v) => Some(v),
            _ => None,
        }
    }

    /// A short name of the value's type for error messages (`"u32"`, `"string"`, `"array"`…).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::U8(_) => "u8",
            Self::I8(_) => "i8",
            Self::U16(_) => "u16",
            Self::I16(_) => "i16",
            Self::U32(_) => "u32",
            Self::I32(_) => "i32",
            Self::U64(_) => "u64",
            Self::I64(_) => "i64",
            Self::F32(_) => "f32",
            Self::F64(_) => "f64",
            Self::Bool(_) => "bool",
            Self::String(_) => "string",
            Self::Array(_) => "array",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MetadataValue as V;

    #[test]
    fn integer_conversions_respect_sign_and_range() {
        assert_eq!(V::U32(7).as_u64(), Some(7));
        assert_eq!(V::I32(-1).as_u64(), None);
        assert_eq!(V::I32(-1).as_i64(), Some(-1));
        assert_eq!(V::U64(u64::MAX).as_i64(), None);
        assert_eq!(V::F32(1.0).as_u64(), None);
        assert_eq!(V::Bool(true).as_u64(), None);
    }

    #[test]
    fn float_string_bool_array_accessors() {
        assert_eq!(V::F32(0.5).as_f64(), Some(0.5));
        assert_eq!(V::U16(3).as_f64(), Some(3.0));
        assert_eq!(V::String("x".into()).as_f64(), None);
        assert_eq!(V::String("x".into()).as_str(), Some("x"));
        assert_eq!(V::Bool(false).as_bool(), Some(false));
        let arr = V::Array(vec![V::U8(1)]);
        assert_eq!(arr.as_array().map(<[V]>::len), Some(1));
        assert_eq!(arr.type_name(), "array");
        assert_eq!(V::U8(1).as_array(), None);
    }
}
