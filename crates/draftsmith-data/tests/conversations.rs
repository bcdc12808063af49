//! Reading input conversations: ShareGPT JSON (complete and truncated), JSONL shapes, Parquet.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder, StructBuilder};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field};
use draftsmith_data::{read_conversations, Conversation, DataError, Message, Role};
use parquet::arrow::ArrowWriter;

fn write(name: &str, file: &str, text: &str) -> PathBuf {
    let path = common::fresh_dir(name).join(file);
    std::fs::write(&path, text).unwrap();
    path
}

fn msg(role: Role, content: &str) -> Message {
    Message { role, content: content.to_string() }
}

const SHAREGPT: &str = r#"[
  {"id": "a", "conversations": [
    {"from": "system", "value": "Be brief."},
    {"from": "human", "value": "Say \"hi\" {not a brace} \\"},
    {"from": "gpt", "value": "hi ]}"}]},
  {"id": "empty", "conversations": []},
  {"id": "odd", "conversations": [{"from": "robot", "value": "beep"}]},
  {"id": "b", "conversations": [{"from": "human", "value": "x"}, {"from": "bard", "value": "y"}]}
]"#;

#[test]
fn sharegpt_maps_roles_and_skips_empty_and_unknown() {
    let path = write("sharegpt", "data.json", SHAREGPT);
    let report = read_conversations(&path, None).unwrap();
    assert!(!report.truncated_tail);
    assert_eq!(report.skipped, 2);
    assert_eq!(report.first_skip.as_deref(), Some("conversation `empty` has no message with text"));
    let expected = vec![
        Conversation {
            id: "a".into(),
            messages: vec![
                msg(Role::System, "Be brief."),
                msg(Role::User, r#"Say "hi" {not a brace} \"#),
                msg(Role::Assistant, "hi ]}"),
            ],
        },
        Conversation { id: "b".into(), messages: vec![msg(Role::User, "x"), msg(Role::Assistant, "y")] },
    ];
    assert_eq!(report.conversations, expected);
}

#[test]
fn truncated_sharegpt_keeps_every_complete_record() {
    // Cut in the middle of record "b", inside a string containing an escaped quote.
    let cut = SHAREGPT.find(r#""value": "x"#).unwrap() + 5;
    let path = write("truncated", "data.json", &SHAREGPT[..cut]);
    let report = read_conversations(&path, None).unwrap();
    assert!(report.truncated_tail);
    let ids: Vec<_> = report.conversations.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a"]);
    assert_eq!(report.skipped, 2);

    // Cut between records (after a comma): still truncated, nothing lost.
    let cut = SHAREGPT.find(r#"{"id": "b""#).unwrap();
    let path = write("truncated-between", "data.json", &SHAREGPT[..cut]);
    let report = read_conversations(&path, None).unwrap();
    assert!(report.truncated_tail);
    assert_eq!(report.conversations.len(), 1);
}

#[test]
fn limit_stops_early() {
    let path = write("limit", "data.json", SHAREGPT);
    let report = read_conversations(&path, Some(1)).unwrap();
    assert_eq!(report.conversations.len(), 1);
    assert_eq!(report.conversations[0].id, "a");
    assert_eq!(report.skipped, 0);
}

#[test]
fn jsonl_record_shapes_and_id_fields() {
    let text = r#"{"question_id": 81, "category": "writing", "turns": ["one", "two"]}

{"task_id": "HumanEval/0", "prompt": "def f():"}
{"id": "m", "prompt": "ignored", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
{"id": "s", "conversations": [{"from": "human", "value": "h"}, {"from": "chatgpt", "value": "g"}]}
{"prompt": "no id"}
{"id": "bad-role", "messages": [{"role": "tool", "content": "q"}]}
"#;
    let path = write("jsonl", "data.jsonl", text);
    let report = read_conversations(&path, None).unwrap();
    assert_eq!(report.skipped, 1);
    assert_eq!(
        report.first_skip.as_deref(),
        Some("conversation `bad-role`: role `tool` is not one of system, user, assistant (`messages`)"),
        "the reason names the conversation and the roles read"
    );
    let sharegpt =
        write("jsonl-sharegpt", "sharegpt.jsonl", r#"{"id": "t", "conversations": [{"from": "tool", "value": "x"}]}"#);
    assert_eq!(
        read_conversations(&sharegpt, None).unwrap().first_skip.as_deref(),
        Some("conversation `t`: role `tool` is not one of system, human, gpt, chatgpt, bing, bard (`conversations`)")
    );
    let expected = vec![
        Conversation { id: "81".into(), messages: vec![msg(Role::User, "one"), msg(Role::User, "two")] },
        Conversation { id: "HumanEval/0".into(), messages: vec![msg(Role::User, "def f():")] },
        Conversation { id: "m".into(), messages: vec![msg(Role::User, "q"), msg(Role::Assistant, "a")] },
        Conversation { id: "s".into(), messages: vec![msg(Role::User, "h"), msg(Role::Assistant, "g")] },
        Conversation { id: "4".into(), messages: vec![msg(Role::User, "no id")] },
    ];
    assert_eq!(report.conversations, expected);
}

#[test]
fn jsonl_bad_line_names_path_and_line() {
    let path = write("jsonl-bad", "bad.jsonl", "{\"prompt\": \"ok\"}\n\n{\"prompt\": 3}\n");
    let err = read_conversations(&path, None).unwrap_err();
    assert!(matches!(err, DataError::BadRecord { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("bad.jsonl") && text.contains("line 3"), "{text}");

    let path = write("jsonl-nofield", "nofield.jsonl", "{\"text\": \"ok\"}\n");
    let text = read_conversations(&path, None).unwrap_err().to_string();
    assert!(text.contains("line 1") && text.contains("none of the fields"), "{text}");

    let path = write("jsonl-id", "id.jsonl", "{\"id\": 7, \"prompt\": \"ok\"}\n{\"id\": 1.5, \"prompt\": \"ok\"}\n");
    let text = read_conversations(&path, None).unwrap_err().to_string();
    assert!(text.contains("line 2") && text.contains("`id` must be a string or an integer, got 1.5"), "{text}");
}

#[test]
fn unknown_format_is_an_error() {
    let path = write("unknown", "data.txt", "hello");
    let err = read_conversations(&path, None).unwrap_err();
    assert!(matches!(err, DataError::UnknownFormat { .. }), "{err:?}");
    assert!(err.to_string().contains("data.txt"));
}

fn write_parquet(path: &Path, rows: &[(&str, &[(&str, &str)])]) {
    let fields = vec![Field::new("role", DataType::Utf8, false), Field::new("content", DataType::Utf8, false)];
    let mut messages = ListBuilder::new(StructBuilder::from_fields(fields, 0));
    for (_, turns) in rows {
        let structs = messages.values();
        for (role, content) in *turns {
            structs.field_builder::<StringBuilder>(0).unwrap().append_value(role);
            structs.field_builder::<StringBuilder>(1).unwrap().append_value(content);
            structs.append(true);
        }
        messages.append(true);
    }
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0)));
    let extra: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|_| "x")));
    let messages: ArrayRef = Arc::new(messages.finish());
    let batch = RecordBatch::try_from_iter([("source", extra), ("id", ids), ("messages", messages)]).unwrap();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

#[test]
fn parquet_messages() {
    let path = common::fresh_dir("parquet").join("data.parquet");
    write_parquet(
        &path,
        &[
            ("p0", &[("system", "s"), ("user", "u"), ("assistant", "a")]),
            ("p1", &[("user", "u"), ("tool", "t")]),
            ("p2", &[("user", "only")]),
            ("p3", &[]),
        ],
    );
    let report = read_conversations(&path, None).unwrap();
    assert_eq!(report.skipped, 2);
    assert_eq!(
        report.first_skip.as_deref(),
        Some("conversation `p1`: role `tool` is not one of system, user, assistant (`messages`)")
    );
    let expected = vec![
        Conversation {
            id: "p0".into(),
            messages: vec![msg(Role::System, "s"), msg(Role::User, "u"), msg(Role::Assistant, "a")],
        },
        Conversation { id: "p2".into(), messages: vec![msg(Role::User, "only")] },
    ];
    assert_eq!(report.conversations, expected);
    assert_eq!(read_conversations(&path, Some(1)).unwrap().conversations.len(), 1);
}

/// The public ShareGPT dump (`draftsmith fetch sharegpt`).
fn real_sharegpt() -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is set");
    let path = Path::new(&home).join(".cache/draftsmith/datasets/sharegpt/ShareGPT_V3_unfiltered_cleaned_split.json");
    assert!(path.exists(), "{} is missing: run `draftsmith fetch sharegpt`", path.display());
    path
}

#[test]
#[ignore = "needs `draftsmith fetch sharegpt` (126 MB); run with --ignored"]
fn real_sharegpt_first_100() {
    let path = real_sharegpt();
    let started = std::time::Instant::now();
    let report = read_conversations(&path, Some(100)).unwrap();
    assert_eq!(report.conversations.len(), 100);
    assert_eq!(report.conversations[0].id, "QWJhYvA_0");
    assert_eq!(report.conversations[0].messages[0].role, Role::User);
    assert!(report.conversations.iter().all(|c| c.messages.iter().any(|m| m.role == Role::Assistant)));
    // Streaming: a 100-record read must not parse the whole (>100 MB) file.
    assert!(started.elapsed().as_secs_f64() < 2.0, "took {:?}", started.elapsed());
}
