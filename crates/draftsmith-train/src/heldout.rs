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

/// Refuses settings that would write no eval prompt (no held-out book has `tokens` tokens);
/// `per_book == 0` asks for none. Checked before training as well as when writing.
pub fn check_eval_prompts(streams: &[Vec<u32>], per_book: usize, tokens: usize) -> Result<(), TrainError> {
    if per_book > 0 && !streams.iter().any(|ids| ids.len() >= tokens) {
        return Err(TrainError::NoEvalPrompts { tokens });
    }
    Ok(())
}

/// `per_book` prefixes of `tokens` tokens from each held-out book, evenly spaced through it:
/// `{"id": "<book>@<token offset>", "prompt": <text>}` per line. `per_book == 0` writes nothing.
pub fn write_eval_prompts(
    path: &Path,
    books: &[Book],
    streams: &[Vec<u32>],
    per_book: usize,
    tokens: usize,
    tokenizer: &draftsmith_model::TextTokenizer,
) -> Result<(), TrainError> {
    check_eval_prompts(streams, per_book, tokens)?;
    if per_book == 0 {
        return Ok(());
    }
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
    std::fs::write(path, out).map_err(TrainError::io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_prompts_need_a_long_enough_book_unless_none_are_asked_for() {
        let streams = [vec![1; 10], vec![2; 40]];
        assert!(check_eval_prompts(&streams, 2, 40).is_ok());
        assert!(check_eval_prompts(&streams, 0, 64).is_ok(), "--prompts-per-book 0 writes none");
        let err = check_eval_prompts(&streams, 2, 64).unwrap_err().to_string();
        assert!(err.contains("no held-out book has 64 tokens") && err.contains("--prompts-per-book 0"), "{err}");
    }

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
