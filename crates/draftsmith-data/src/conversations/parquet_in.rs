//! Reads conversations from a Parquet file with `id` and `messages` columns.

use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::{unknown_role, Collector, Conversation, Message, ReadReport, Role, CHAT_NAMES};
use crate::arrow_util::{column, wrong_type, ListCol, StrCol};
use crate::error::DataError;

const MESSAGES_TYPE: &str = "List<Struct<role: Utf8, content: Utf8>>";

pub(super) fn read(path: &Path, limit: usize) -> Result<ReadReport, DataError> {
    let file = File::open(path).map_err(DataError::io(path))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(DataError::parquet(path))?;
    let has_id = builder.schema().column_with_name("id").is_some();
    let names = if has_id { vec!["id", "messages"] } else { vec!["messages"] };
    let mask = ProjectionMask::columns(builder.parquet_schema(), names);
    let reader = builder.with_projection(mask).build().map_err(DataError::parquet(path))?;
    let mut collector = Collector::new(limit);
    let mut row = 0;
    for batch in reader {
        let batch = batch.map_err(|e| DataError::Parquet { path: path.to_path_buf(), source: e.into() })?;
        let bad_schema = |problem| DataError::BadSchema { path: path.to_path_buf(), problem };
        add_batch(&batch, has_id, row, &mut collector).map_err(bad_schema)?;
        row += batch.num_rows();
        if collector.full() {
            break;
        }
    }
    Ok(collector.report)
}

/// Adds the rows of one batch (the first has index `first_row`) until the collector is full.
fn add_batch(batch: &RecordBatch, has_id: bool, first_row: usize, collector: &mut Collector) -> Result<(), String> {
    let ids = match has_id {
        true => {
            let array = column(batch, "id", "Utf8")?;
            Some(StrCol::new(array).ok_or_else(|| wrong_type("id", "Utf8", array))?)
        }
        false => None,
    };
    let array = column(batch, "messages", MESSAGES_TYPE)?;
    let messages = ListCol::new(array).ok_or_else(|| wrong_type("messages", MESSAGES_TYPE, array))?;
    let structs = messages.values.as_struct_opt().ok_or_else(|| wrong_type("messages", MESSAGES_TYPE, array))?;
    let field = |name: &str| {
        let a = structs.column_by_name(name).ok_or_else(|| format!("messages: missing struct field {name:?}"))?;
        StrCol::new(a.as_ref()).ok_or_else(|| wrong_type(&format!("messages.{name}"), "Utf8", a))
    };
    let (roles, contents) = (field("role")?, field("content")?);
    for i in 0..batch.num_rows() {
        let id = ids.as_ref().and_then(|c| c.get(i)).map_or_else(|| (first_row + i).to_string(), str::to_string);
        let range = messages.range(i).unwrap_or(0..0);
        let parsed: Result<Vec<Message>, String> = range
            .map(|j| {
                let name = roles.get(j).ok_or_else(|| format!("conversation `{id}`: a message has no role"))?;
                let role = Role::from_chat(name).ok_or_else(|| unknown_role(&id, name, "messages", &CHAT_NAMES))?;
                Ok(Message { role, content: contents.get(j).unwrap_or("").to_string() })
            })
            .collect();
        if collector.add(parsed.map(|messages| Conversation { id, messages })) {
            break;
        }
    }
    Ok(())
}
