//! Prompt sets: JSONL files with one object per line carrying an id (`id`, `question_id` or
//! `task_id`, string or integer) and either `prompt` (a string) or `turns` (a list of user
//! messages, of which the first is used: MT-Bench first turns). The MT-Bench `question.jsonl`
//! and HumanEval `HumanEval.jsonl` files are read by the same rules.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use draftsmith_model::{ChatMessage, TextTokenizer};
use serde_json::Value;

use crate::error::EvalError;

/// Keys accepted as a prompt's id, in order of preference.
pub const ID_KEYS: &[&str] = &["id", "question_id", "task_id"];

/// One prompt as written in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub id: String,
    /// The user message (or the raw text without the chat template).
    pub text: String,
}

/// A prompts file, read and hashed.
#[derive(Debug, Clone)]
pub struct PromptSet {
    pub path: PathBuf,
    /// sha256 of the whole file (hex), for the manifest.
    pub sha256: String,
    pub prompts: Vec<Prompt>,
}

/// A prompt as token ids, ready for the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPrompt {
    pub id: String,
    pub ids: Vec<u32>,
}

/// Reads `path` and keeps the first `limit` prompts (all when `None`).
pub fn read_prompts(path: &Path, limit: Option<usize>) -> Result<PromptSet, EvalError> {
    let bytes = std::fs::read(path).map_err(EvalError::io(path))?;
    let text = String::from_utf8(bytes.clone()).map_err(|e| EvalError::PromptLine {
        path: path.to_path_buf(),
        // The line holding the first byte that is not UTF-8.
        line: 1 + bytes[..e.utf8_error().valid_up_to()].iter().filter(|&&b| b == b'\n').count(),
        problem: format!("not UTF-8: {e}"),
    })?;
    // A byte-order mark (some editors write one) is not part of the first line's JSON.
    let mut prompts = parse_prompts(path, text.strip_prefix('\u{feff}').unwrap_or(&text))?;
    if let Some(k) = limit {
        prompts.truncate(k);
    }
    if prompts.is_empty() {
        return Err(EvalError::NoPrompts { path: path.to_path_buf() });
    }
    let sha256 = draftsmith_core::digest::sha256_hex(&bytes);
    Ok(PromptSet { path: path.to_path_buf(), sha256, prompts })
}

/// Parses the text of a prompts file; `path` only names the file in errors. Blank lines are
/// skipped; ids must be unique (records are keyed by them).
pub fn parse_prompts(path: &Path, text: &str) -> Result<Vec<Prompt>, EvalError> {
    let mut prompts = Vec::new();
    let mut seen = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |problem: String| EvalError::PromptLine { path: path.to_path_buf(), line: i + 1, problem };
        let prompt = parse_line(line).map_err(bad)?;
        if !seen.insert(prompt.id.clone()) {
            return Err(bad(format!("duplicate id `{}`", prompt.id)));
        }
        prompts.push(prompt);
    }
    Ok(prompts)
}

fn parse_line(line: &str) -> Result<Prompt, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("invalid JSON: {e}"))?;
    let object = value.as_object().ok_or("expected a JSON object")?;
    let id = match ID_KEYS.iter().find_map(|k| object.get(*k)) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err("the id must be a string or an integer".into()),
        None => return Err(format!("no id (expected one of {})", ID_KEYS.join(", "))),
    };
    let text = match (object.get("prompt"), object.get("turns")) {
        (Some(Value::String(p)), _) => p.clone(),
        (Some(_), _) => return Err(format!("`{id}`: `prompt` must be a string")),
        (None, Some(Value::Array(turns))) => match turns.first() {
            Some(Value::String(t)) => t.clone(),
            _ => return Err(format!("`{id}`: `turns` must be a non-empty list of strings")),
        },
        (None, Some(_)) => return Err(format!("`{id}`: `turns` must be a list of strings")),
        (None, None) => return Err(format!("`{id}`: expected `prompt` or `turns`")),
    };
    Ok(Prompt { id, text })
}

/// Token ids of every prompt: the text as the user message of the model's chat template
/// (with the generation prompt), or the raw text when `chat_template` is false.
pub fn encode_prompts(
    tokenizer: &TextTokenizer,
    prompts: &[Prompt],
    chat_template: bool,
) -> Result<Vec<EncodedPrompt>, EvalError> {
    let template = match chat_template {
        true => Some(
            tokenizer
                .chat_template()
                .ok_or_else(|| EvalError::NoChatTemplate { path: tokenizer.source().to_path_buf() })?,
        ),
        false => None,
    };
    prompts
        .iter()
        .map(|p| {
            let wrap = |source| EvalError::Prompt { id: p.id.clone(), source: Box::new(source) };
            let text = match template {
                Some(t) => t.render(&[ChatMessage::new("user", &p.text)], true).map_err(wrap)?,
                None => p.text.clone(),
            };
            Ok(EncodedPrompt { id: p.id.clone(), ids: tokenizer.encode(&text).map_err(wrap)? })
        })
        .collect()
}

/// Every prompt must leave room for at least one new token in a context of `context` tokens.
pub fn check_context(prompts: &[EncodedPrompt], context: usize) -> Result<(), EvalError> {
    if let Some(p) = prompts.iter().find(|p| p.ids.is_empty()) {
        return Err(EvalError::EmptyPrompt { id: p.id.clone() });
    }
    match prompts.iter().find(|p| p.ids.len() + 1 > context) {
        Some(p) => Err(EvalError::PromptTooLong { id: p.id.clone(), len: p.ids.len(), context }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_shapes_and_the_dataset_id_keys() {
        let text = concat!(
            "{\"id\": \"a\", \"prompt\": \"hello\"}\n",
            "\n",
            "{\"question_id\": 81, \"category\": \"writing\", \"turns\": [\"first\", \"second\"]}\n",
            "{\"task_id\": \"HumanEval/0\", \"prompt\": \"def f():\\n\", \"entry_point\": \"f\"}\n",
        );
        let p = parse_prompts(Path::new("p.jsonl"), text).unwrap();
        let got: Vec<(&str, &str)> = p.iter().map(|p| (p.id.as_str(), p.text.as_str())).collect();
        assert_eq!(got, [("a", "hello"), ("81", "first"), ("HumanEval/0", "def f():\n")]);
    }

    #[test]
    fn bad_lines_name_the_file_and_line() {
        let cases = [
            ("{\"id\": \"a\", \"prompt\": \"x\"}\n{\"id\": \"b\"}\n", 2, "expected `prompt` or `turns`"),
            ("not json\n", 1, "invalid JSON"),
            ("{\"prompt\": \"x\"}\n", 1, "no id"),
            ("{\"id\": 1, \"turns\": []}\n", 1, "non-empty list"),
            ("{\"id\": 1, \"prompt\": \"x\"}\n\n{\"id\": \"1\", \"prompt\": \"y\"}\n", 3, "duplicate id"),
            ("[1, 2]\n", 1, "JSON object"),
        ];
        for (text, line, problem) in cases {
            let err = parse_prompts(Path::new("dir/p.jsonl"), text).unwrap_err().to_string();
            assert!(err.starts_with(&format!("dir/p.jsonl:{line}: ")) && err.contains(problem), "{err}");
        }
    }

    #[test]
    fn too_long_and_empty_prompts_are_named() {
        let prompts =
            [EncodedPrompt { id: "ok".into(), ids: vec![1; 7] }, EncodedPrompt { id: "long".into(), ids: vec![1; 8] }];
        assert!(check_context(&prompts[..1], 8).is_ok());
        let err = check_context(&prompts, 8).unwrap_err().to_string();
        assert!(err.contains("`long`") && err.contains("8 tokens"), "{err}");
        let empty = [EncodedPrompt { id: "blank".into(), ids: vec![] }];
        let dir = std::env::temp_dir().join(format!("draftsmith-eval-prompts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A byte-order mark is skipped; bytes that are not UTF-8 are named by their line.
        let bom = dir.join("bom.jsonl");
        std::fs::write(&bom, "\u{feff}{\"id\": \"a\", \"prompt\": \"hi\"}\n").unwrap();
        assert_eq!(read_prompts(&bom, None).unwrap().prompts[0].id, "a");
        let latin1 = dir.join("latin1.jsonl");
        std::fs::write(&latin1, b"{\"id\": \"a\", \"prompt\": \"hi\"}\n{\"id\": \"b\", \"prompt\": \"caf\xe9\"}\n")
            .unwrap();
        let err = read_prompts(&latin1, None).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}:2: not UTF-8", latin1.display())), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        let err = check_context(&empty, 8).unwrap_err().to_string();
        assert_eq!(err, "prompt `blank` is empty: it has no tokens to decode from");
    }
}
