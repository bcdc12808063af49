//! What a TokenSwift run writes about its held-out books, beside the heads: `split.json` and
//! `eval-prompts.jsonl` (long prefixes of held-out books only, for `eval --no-chat-template`
//! and `generate`).

use std::path::Path;

use draftsmith_data::books::{Book, BookSplit};

use crate::error::TrainError;

/// `split.json`: which books trained and which are held out, with their token counts.
pub fn write_split(dir: &Path, split: &BookSplit, train: &[Vec<u32>], eval: &[Vec<u32>]) -> Result<(), TrainError> {
    let tokens = |s: &[Vec<u32>]| s.iter().map(Vec::len).collect::<Vec<_>>();
    let value = serde_json::json!({ "train": split.train, "eval": split.eval, "train_tokens": tokens(train), "eval_tokens": tokens(eval) });
    let path = dir.join("split.json");
    let text = serde_json::to_string_pretty(&value).expect("a JSON value serializes") + "\n";
    std::fs::write(&path, text).map_err(TrainError::io(&path))
}

/// `per_book` prefixes of `tokens` tokens from each held-out book, evenly spaced through it:
/// `{"id": "<book>@<token offset>", "prompt": <text>}` per line.
pub fn write_eval_prompts(
    path: &Path,
    books: &[Book],
    streams: &[Vec<u32>],
    per_book: usize,
    tokens: usize,
    tokenizer: &draftsmith_model::TextTokenizer,
) -> Result<(), TrainError> {
    let mut out = String::new();
    for (book, ids) in books.iter().zip(streams) {
        if ids.len() < tokens {
            continue;
        }
        let room = ids.len() - tokens;
        for k in 0..per_book {
            let start = room * k / per_book.max(1);
            let text = tokenizer.decode(&ids[start..start + tokens])?;
            out += &serde_json::json!({ "id": format!("{}@{start}", book.name), "prompt": text }).to_string();
            out.push('\n');
        }
    }
    if out.is_empty() {
        return Err(TrainError::NoEvalPrompts { tokens });
    }
    std::fs::write(path, out).map_err(TrainError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_records_each_books_token_count() {
        let dir = std::env::temp_dir().join(format!("draftsmith-heldout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let split = BookSplit { train: vec!["a".into(), "b".into()], eval: vec!["c".into()] };
        write_split(&dir, &split, &[vec![1; 3], vec![2; 5]], &[vec![3; 7]]).unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("split.json")).unwrap()).unwrap();
        assert_eq!(written["train_tokens"], serde_json::json!([3, 5]));
        assert_eq!(written["eval"], serde_json::json!(["c"]));
        assert_eq!(written["eval_tokens"], serde_json::json!([7]));
    }
}
