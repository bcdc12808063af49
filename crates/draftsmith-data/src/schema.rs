//! The Parquet layout of a distilled shard, and conversion between records and Arrow batches.
//!
//! | column                  | type                       | null when            |
//! |-------------------------|----------------------------|----------------------|
//! | `id`                    | `Utf8`                     | never                |
//! | `tokens`                | `List<UInt32>`             | never                |
//! | `loss_mask`             | `List<Boolean>`            | never                |
//! | `source`                | `Utf8` (`self_distilled`, `ground_truth`) | never |
//! | `teacher`               | `List<UInt32>`             | not stored           |
//! | `teacher_topk_ids`      | `List<UInt32>`             | not stored           |
//! | `teacher_topk_logprobs` | `List<Float32>`            | not stored           |

use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float32Builder, ListBuilder, StringBuilder, UInt32Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, UInt32Type};
use arrow_array::{ArrayRef, ArrowPrimitiveType, PrimitiveArray, RecordBatch};
use arrow_schema::ArrowError;

use crate::arrow_util::{column, wrong_type, ListCol, StrCol};
use crate::record::{DistillRecord, RecordSource};

/// Builds one batch holding `records` in order.
pub(crate) fn to_batch(records: &[DistillRecord]) -> Result<RecordBatch, ArrowError> {
    let mut ids = StringBuilder::new();
    let mut sources = StringBuilder::new();
    let mut tokens = ListBuilder::new(UInt32Builder::new());
    let mut masks = ListBuilder::new(BooleanBuilder::new());
    let mut teacher = ListBuilder::new(UInt32Builder::new());
    let mut topk_ids = ListBuilder::new(UInt32Builder::new());
    let mut topk_logprobs = ListBuilder::new(Float32Builder::new());
    for r in records {
        ids.append_value(&r.id);
        sources.append_value(r.source.as_str());
        tokens.values().append_slice(&r.tokens);
        tokens.append(true);
        masks.values().append_slice(&r.loss_mask);
        masks.append(true);
        append_optional(&mut teacher, r.teacher.as_deref());
        append_optional(&mut topk_ids, r.teacher_topk_ids.as_deref());
        append_optional(&mut topk_logprobs, r.teacher_topk_logprobs.as_deref());
    }
    let columns: [(&str, ArrayRef); 7] = [
        ("id", Arc::new(ids.finish())),
        ("tokens", Arc::new(tokens.finish())),
        ("loss_mask", Arc::new(masks.finish())),
        ("source", Arc::new(sources.finish())),
        ("teacher", Arc::new(teacher.finish())),
        ("teacher_topk_ids", Arc::new(topk_ids.finish())),
        ("teacher_topk_logprobs", Arc::new(topk_logprobs.finish())),
    ];
    RecordBatch::try_from_iter(columns)
}

fn append_optional<T: ArrowPrimitiveType>(
    builder: &mut ListBuilder<arrow_array::builder::PrimitiveBuilder<T>>,
    values: Option<&[T::Native]>,
) {
    match values {
        Some(v) => {
            builder.values().append_slice(v);
            builder.append(true);
        }
        None => builder.append(false),
    }
}

/// A `List<primitive>` column.
struct PrimList<'a, T: ArrowPrimitiveType> {
    list: ListCol<'a>,
    values: &'a PrimitiveArray<T>,
}

impl<'a, T: ArrowPrimitiveType> PrimList<'a, T> {
    fn new(batch: &'a RecordBatch, name: &str, expected: &str) -> Result<Self, String> {
        let array = column(batch, name, expected)?;
        let wrong = || wrong_type(name, expected, array);
        let list = ListCol::new(array).ok_or_else(wrong)?;
        let values = list.values.as_primitive_opt::<T>().ok_or_else(wrong)?;
        Ok(PrimList { list, values })
    }

    fn get(&self, row: usize) -> Option<Vec<T::Native>> {
        self.list.range(row).map(|r| self.values.values()[r].to_vec())
    }
}

/// Appends the records of one batch to `out`; returns what is wrong with the layout otherwise.
/// Lengths are not checked here (see [`DistillRecord::check`]).
pub(crate) fn from_batch(batch: &RecordBatch, out: &mut Vec<DistillRecord>) -> Result<(), String> {
    let strings = |name: &str| {
        let array = column(batch, name, "Utf8")?;
        StrCol::new(array).ok_or_else(|| wrong_type(name, "Utf8", array))
    };
    let (ids, sources) = (strings("id")?, strings("source")?);
    let tokens = PrimList::<UInt32Type>::new(batch, "tokens", "List<UInt32>")?;
    let masks_array = column(batch, "loss_mask", "List<Boolean>")?;
    let wrong_mask = || wrong_type("loss_mask", "List<Boolean>", masks_array);
    let masks = ListCol::new(masks_array).ok_or_else(wrong_mask)?;
    let mask_values = masks.values.as_boolean_opt().ok_or_else(wrong_mask)?;
    let teacher = PrimList::<UInt32Type>::new(batch, "teacher", "List<UInt32>")?;
    let topk_ids = PrimList::<UInt32Type>::new(batch, "teacher_topk_ids", "List<UInt32>")?;
    let topk_logprobs = PrimList::<Float32Type>::new(batch, "teacher_topk_logprobs", "List<Float32>")?;
    for row in 0..batch.num_rows() {
        let null = |name: &str| format!("row {row}: {name} is null");
        let id = ids.get(row).ok_or_else(|| null("id"))?.to_string();
        let source_name = sources.get(row).ok_or_else(|| null("source"))?;
        let source = RecordSource::parse(source_name)
            .ok_or_else(|| format!("row {row} ({id}): unknown source {source_name:?}"))?;
        let mask_range = masks.range(row).ok_or_else(|| null("loss_mask"))?;
        out.push(DistillRecord {
            tokens: tokens.get(row).ok_or_else(|| null("tokens"))?,
            loss_mask: mask_range.map(|j| mask_values.value(j)).collect(),
            source,
            teacher: teacher.get(row),
            teacher_topk_ids: topk_ids.get(row),
            teacher_topk_logprobs: topk_logprobs.get(row),
            id,
        });
    }
    Ok(())
}
