//! Small accessors over Arrow arrays that accept every string and list encoding.

use std::ops::Range;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};

/// A string column in any of Arrow's three encodings.
pub(crate) enum StrCol<'a> {
    Utf8(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
}

impl<'a> StrCol<'a> {
    /// Views `array` as strings, or `None` when it is not a string array.
    pub(crate) fn new(array: &'a dyn Array) -> Option<Self> {
        if let Some(a) = array.as_string_opt::<i32>() {
            Some(StrCol::Utf8(a))
        } else if let Some(a) = array.as_string_opt::<i64>() {
            Some(StrCol::Large(a))
        } else {
            array.as_string_view_opt().map(StrCol::View)
        }
    }

    /// The string at row `i`, `None` when null.
    pub(crate) fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            StrCol::Utf8(a) => a.is_valid(i).then(|| a.value(i)),
            StrCol::Large(a) => a.is_valid(i).then(|| a.value(i)),
            StrCol::View(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }
}

/// A list column (32- or 64-bit offsets): its flat values and per-row offsets.
pub(crate) struct ListCol<'a> {
    array: &'a dyn Array,
    /// The concatenated elements of all rows.
    pub(crate) values: &'a ArrayRef,
    offsets: Vec<usize>,
}

impl<'a> ListCol<'a> {
    /// Views `array` as a list, or `None` when it is not a list array.
    pub(crate) fn new(array: &'a dyn Array) -> Option<Self> {
        if let Some(a) = array.as_list_opt::<i32>() {
            let offsets = a.value_offsets().iter().map(|&o| o as usize).collect();
            Some(ListCol { array, values: a.values(), offsets })
        } else if let Some(a) = array.as_list_opt::<i64>() {
            let offsets = a.value_offsets().iter().map(|&o| o as usize).collect();
            Some(ListCol { array, values: a.values(), offsets })
        } else {
            None
        }
    }

    /// The range of `values` holding row `i`, `None` when the row is null.
    pub(crate) fn range(&self, i: usize) -> Option<Range<usize>> {
        self.array.is_valid(i).then(|| self.offsets[i]..self.offsets[i + 1])
    }
}

/// The column called `name`, or an error message naming it and the expected type.
pub(crate) fn column<'a>(batch: &'a RecordBatch, name: &str, expected: &str) -> Result<&'a ArrayRef, String> {
    batch.column_by_name(name).ok_or_else(|| format!("missing column {name:?} ({expected})"))
}

/// A message for a column of the wrong type.
pub(crate) fn wrong_type(name: &str, expected: &str, array: &dyn Array) -> String {
    format!("column {name:?} has type {}, expected {expected}", array.data_type())
}
