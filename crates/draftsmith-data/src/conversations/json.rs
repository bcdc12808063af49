//! Streaming readers for JSON-array (ShareGPT) and JSONL conversation files.
//!
//! The array reader never parses the whole document: [`ArrayScanner`] finds each element's
//! object boundaries (respecting strings and escapes) and only that element is handed to
//! serde_json, so reading stops cheaply at a limit and survives a file cut off mid-record.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::{parse_record, Collector, ReadReport};
use crate::error::DataError;

/// Reads a JSON array or JSONL file, choosing by the first non-blank byte.
pub(super) fn read(path: &Path, limit: usize) -> Result<ReadReport, DataError> {
    let file = File::open(path).map_err(DataError::io(path))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let first = skip_blank(&mut reader).map_err(DataError::io(path))?;
    match first {
        Some(b'[') => {
            reader.consume(1);
            read_array(path, reader, limit)
        }
        Some(b'{') => read_jsonl(path, reader, limit),
        Some(other) => Err(DataError::UnknownFormat {
            path: path.to_path_buf(),
            problem: format!("first non-blank character is {:?}", other as char),
        }),
        None => Err(DataError::UnknownFormat { path: path.to_path_buf(), problem: "the file is empty".into() }),
    }
}

/// Skips whitespace and a UTF-8 byte-order mark; returns the next byte without consuming it.
fn skip_blank(reader: &mut impl BufRead) -> std::io::Result<Option<u8>> {
    let bom = reader.fill_buf()?.starts_with(b"\xEF\xBB\xBF");
    if bom {
        reader.consume(3);
    }
    loop {
        let chunk = reader.fill_buf()?;
        let Some(&b) = chunk.first() else {
            return Ok(None);
        };
        if !b.is_ascii_whitespace() {
            return Ok(Some(b));
        }
        reader.consume(1);
    }
}

fn read_array(path: &Path, reader: impl BufRead, limit: usize) -> Result<ReadReport, DataError> {
    let mut collector = Collector::new(limit);
    let mut scanner = ArrayScanner { reader, offset: 1 };
    let mut record = Vec::new();
    let mut index = 0;
    while !collector.full() {
        let start = match scanner.next(&mut record) {
            Ok(Scan::Record(start)) => start,
            Ok(Scan::End) => break,
            Ok(Scan::Truncated) => {
                collector.report.truncated_tail = true;
                break;
            }
            Err(ScanError::Io(e)) => return Err(DataError::io(path)(e)),
            Err(ScanError::Syntax(problem)) => {
                let location = format!("after record {index}");
                return Err(DataError::BadRecord { path: path.to_path_buf(), location, problem });
            }
        };
        let conversation = parse_record(&record, index).map_err(|problem| {
            let location = format!("record {index} at byte {start}");
            DataError::BadRecord { path: path.to_path_buf(), location, problem }
        })?;
        collector.add(conversation);
        index += 1;
    }
    Ok(collector.report)
}

fn read_jsonl(path: &Path, mut reader: impl BufRead, limit: usize) -> Result<ReadReport, DataError> {
    let mut collector = Collector::new(limit);
    let mut line = Vec::new();
    let (mut line_no, mut index) = (0, 0);
    while !collector.full() {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(DataError::io(path))? == 0 {
            break;
        }
        line_no += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let conversation = parse_record(&line, index).map_err(|problem| DataError::BadRecord {
            path: path.to_path_buf(),
            location: format!("line {line_no}"),
            problem,
        })?;
        collector.add(conversation);
        index += 1;
    }
    Ok(collector.report)
}

/// What [`ArrayScanner::next`] found.
enum Scan {
    /// A complete `{…}` element, copied into the buffer; the value is its byte offset.
    Record(u64),
    /// The closing `]`.
    End,
    /// End of file before the closing `]` (possibly inside an element).
    Truncated,
}

enum ScanError {
    Io(std::io::Error),
    Syntax(String),
}

impl From<std::io::Error> for ScanError {
    fn from(e: std::io::Error) -> Self {
        ScanError::Io(e)
    }
}

/// Splits the elements of a JSON array of objects, positioned just after the opening `[`.
struct ArrayScanner<R> {
    reader: R,
    /// Bytes consumed so far, for error messages.
    offset: u64,
}

impl<R: BufRead> ArrayScanner<R> {
    fn consume(&mut self, n: usize) {
        self.reader.consume(n);
        self.offset += n as u64;
    }

    /// Copies the next element into `out` (cleared first).
    fn next(&mut self, out: &mut Vec<u8>) -> Result<Scan, ScanError> {
        out.clear();
        loop {
            let Some(&b) = self.reader.fill_buf()?.first() else {
                return Ok(Scan::Truncated);
            };
            match b {
                b',' => self.consume(1),
                b']' => return Ok(Scan::End),
                b'{' => break,
                _ if b.is_ascii_whitespace() => self.consume(1),
                _ => {
                    return Err(ScanError::Syntax(format!(
                        "expected '{{', ',' or ']' at byte {}, found {:?}",
                        self.offset, b as char
                    )))
                }
            }
        }
        let start = self.offset;
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        loop {
            let chunk = self.reader.fill_buf()?;
            if chunk.is_empty() {
                return Ok(Scan::Truncated);
            }
            let mut end = None;
            for (i, &b) in chunk.iter().enumerate() {
                if in_string {
                    match b {
                        _ if escaped => escaped = false,
                        b'\\' => escaped = true,
                        b'"' => in_string = false,
                        _ => {}
                    }
                    continue;
                }
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let n = end.unwrap_or(chunk.len());
            out.extend_from_slice(&chunk[..n]);
            self.consume(n);
            if end.is_some() {
                return Ok(Scan::Record(start));
            }
        }
    }
}
