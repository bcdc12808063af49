//! Typed metadata accessors of [`GgufFile`] whose errors name the file and the key.

use crate::error::GgufError;
use crate::file::GgufFile;
use crate::metadata::MetadataValue;

impl GgufFile {
    /// The value for `key`, or [`GgufError::MissingKey`].
    pub fn require(&self, key: &str) -> Result<&MetadataValue, GgufError> {
        self.get(key).ok_or_else(|| GgufError::MissingKey { path: self.path().to_path_buf(), key: key.to_string() })
    }

    /// `key` as an unsigned integer (any integer type with a non-negative value).
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        let value = self.require(key)?;
        value.as_u64().ok_or_else(|| self.wrong_type(key, "unsigned integer", value.type_name()))
    }

    /// `key` as a signed integer (any integer type whose value fits in an `i64`).
    pub fn get_i64(&self, key: &str) -> Result<i64, GgufError> {
        let value = self.require(key)?;
        value.as_i64().ok_or_else(|| self.wrong_type(key, "signed integer", value.type_name()))
    }

    /// `key` as an `f32` (either float type or any integer type, converted).
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        let value = self.require(key)?;
        let number = value.as_f64().ok_or_else(|| self.wrong_type(key, "number", value.type_name()))?;
        Ok(number as f32)
    }

    /// `key` as a boolean.
    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        let value = self.require(key)?;
        value.as_bool().ok_or_else(|| self.wrong_type(key, "bool", value.type_name()))
    }

    /// `key` as a string.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let value = self.require(key)?;
        value.as_str().ok_or_else(|| self.wrong_type(key, "string", value.type_name()))
    }

    /// `key` as an array of any element type.
    pub fn get_array(&self, key: &str) -> Result<&[MetadataValue], GgufError> {
        let value = self.require(key)?;
        value.as_array().ok_or_else(|| self.wrong_type(key, "array", value.type_name()))
    }

    /// `key` as an array of strings (e.g. `tokenizer.ggml.tokens`).
    pub fn get_str_array(&self, key: &str) -> Result<Vec<&str>, GgufError> {
        self.get_array_of(key, "array of strings", MetadataValue::as_str)
    }

    /// `key` as an array of numbers converted to `f32` (e.g. `tokenizer.ggml.scores`).
    pub fn get_f32_array(&self, key: &str) -> Result<Vec<f32>, GgufError> {
        self.get_array_of(key, "array of numbers", |v| v.as_f64().map(|x| x as f32))
    }

    /// `key` as an array of signed integers (e.g. `tokenizer.ggml.token_type`).
    pub fn get_i64_array(&self, key: &str) -> Result<Vec<i64>, GgufError> {
        self.get_array_of(key, "array of integers", MetadataValue::as_i64)
    }

    /// `key` as an array whose every element `convert` accepts.
    fn get_array_of<'a, T>(
        &'a self,
        key: &str,
        expected: &'static str,
        convert: impl Fn(&'a MetadataValue) -> Option<T>,
    ) -> Result<Vec<T>, GgufError> {
        let value = self.require(key)?;
        let items = value.as_array().ok_or_else(|| self.wrong_type(key, expected, value.type_name()))?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                convert(item).ok_or_else(|| {
                    self.wrong_type(key, expected, &format!("array whose element {i} is {}", item.type_name()))
                })
            })
            .collect()
    }

    /// Builds a [`GgufError::WrongType`] for `key`.
    fn wrong_type(&self, key: &str, expected: &'static str, found: &str) -> GgufError {
        GgufError::WrongType {
            path: self.path().to_path_buf(),
            key: key.to_string(),
            expected,
            found: found.to_string(),
        }
    }
}
