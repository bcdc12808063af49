//! Long public-domain texts for TokenSwift (they stand in for PG-19): the Project Gutenberg
//! directory of `draftsmith fetch gutenberg` (one `*_gut.txt` file per book) and the King James
//! Bible of `draftsmith fetch kjv` (one file, one book).
//!
//! The split is by whole book and explicit: the books named in [`EVAL_BOOKS`] are never used for
//! training, and long-generation prompts are taken from them only. A book's name is its file
//! name without `_gut.txt` (`hamlet`), or `kjv`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::DataError;

/// Books held out of training; eval prompts come from these. Four works of different kinds:
/// two tragedies, a comedy and an epic poem (Milton).
pub const EVAL_BOOKS: &[&str] = &["hamlet", "macbeth", "tempest", "paradise_lost_(no_introduction)"];

/// One book: its name, where it came from and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Book {
    pub name: String,
    pub path: PathBuf,
    pub text: String,
}

/// Which books a run trained on and which it held out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookSplit {
    pub train: Vec<String>,
    pub eval: Vec<String>,
}

/// Reads the books of `sources`: a directory (every `*.txt` in it, sorted by name) or a file
/// (one book). Books of a directory shorter than `min_chars` are skipped; a file named on its
/// own that short is an error. Names must be unique.
pub fn read_books(sources: &[PathBuf], min_chars: usize) -> Result<Vec<Book>, DataError> {
    let mut books = Vec::new();
    for source in sources {
        let named = !source.is_dir();
        let files = if source.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(source)
                .map_err(|e| DataError::Io { path: source.clone(), source: e })?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "txt"))
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(DataError::Books {
                    path: source.clone(),
                    problem: "the directory has no .txt files".into(),
                });
            }
            files
        } else {
            vec![source.clone()]
        };
        for path in files {
            let bytes = std::fs::read(&path).map_err(|e| DataError::Io { path: path.clone(), source: e })?;
            let text = String::from_utf8(bytes)
                .map_err(|e| DataError::Books { path: path.clone(), problem: format!("not UTF-8 text ({e})") })?;
            let chars = text.chars().count();
            if chars < min_chars && named {
                let problem = format!("{chars} characters, shorter than the {min_chars} a book needs");
                return Err(DataError::Books { path, problem });
            }
            if chars < min_chars {
                continue;
            }
            let name = book_name(&path);
            if books.iter().any(|b: &Book| b.name == name) {
                return Err(DataError::Books { path, problem: format!("a second book named `{name}`") });
            }
            books.push(Book { name, path, text: normalize(&text) });
        }
    }
    Ok(books)
}

/// `hamlet_gut.txt` → `hamlet`; `kjv.txt` → `kjv`.
pub fn book_name(path: &Path) -> String {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    stem.strip_suffix("_gut").unwrap_or(&stem).to_string()
}

/// Unix newlines, no trailing spaces, at most one blank line in a row (Gutenberg files pad with many).
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.replace("\r\n", "\n").lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Splits `books` by [`EVAL_BOOKS`] (or `eval_names` when given). Every eval name must be one of
/// the books, and at least one book must remain for training.
pub fn split_books(
    books: Vec<Book>,
    eval_names: Option<&[String]>,
) -> Result<(Vec<Book>, Vec<Book>, BookSplit), DataError> {
    let eval_names: Vec<String> =
        eval_names.map_or_else(|| EVAL_BOOKS.iter().map(|s| s.to_string()).collect(), <[String]>::to_vec);
    if let Some(missing) = eval_names.iter().find(|n| !books.iter().any(|b| &b.name == *n)) {
        let known: Vec<&str> = books.iter().map(|b| b.name.as_str()).collect();
        return Err(DataError::BookSplit(format!(
            "eval book `{missing}` is not among the books read ({}; a directory's books too short to train on are skipped)",
            known.join(", ")
        )));
    }
    let (eval, train): (Vec<Book>, Vec<Book>) = books.into_iter().partition(|b| eval_names.contains(&b.name));
    if train.is_empty() {
        return Err(DataError::BookSplit("every book is held out for eval; none is left to train on".into()));
    }
    let split = BookSplit {
        train: train.iter().map(|b| b.name.clone()).collect(),
        eval: eval.iter().map(|b| b.name.clone()).collect(),
    };
    Ok((train, eval, split))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("draftsmith-books-{}-{}", std::process::id(), files.len()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn books_are_named_normalized_and_split_by_name() {
        let dir = dir_with(&[
            ("hamlet_gut.txt", "To be,  \r\n\r\n\r\n\r\nor not."),
            ("lear_gut.txt", "Nothing will come of nothing."),
            ("notes.md", "skipped"),
            ("tiny_gut.txt", "x"),
        ]);
        let kjv = std::env::temp_dir().join(format!("draftsmith-books-{}", std::process::id())).join("kjv.txt");
        std::fs::create_dir_all(kjv.parent().unwrap()).unwrap();
        std::fs::write(&kjv, "In the beginning.").unwrap();
        let books = read_books(&[dir.clone(), kjv], 5).unwrap();
        let names: Vec<&str> = books.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["hamlet", "lear", "kjv"], "sorted per directory, short books skipped, non-.txt ignored");
        assert_eq!(books[0].text, "To be,\n\nor not.\n");
        let (train, eval, split) = split_books(books.clone(), Some(&["hamlet".to_string()])).unwrap();
        assert_eq!((train.len(), eval.len()), (2, 1));
        assert_eq!(split, BookSplit { train: vec!["lear".into(), "kjv".into()], eval: vec!["hamlet".into()] });
        assert!(split.train.iter().all(|t| !split.eval.contains(t)), "no book on both sides");
        let err = split_books(books.clone(), Some(&["othello".to_string()])).unwrap_err().to_string();
        assert!(err.contains("othello") && err.contains("hamlet, lear, kjv"), "{err}");
        let all: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        assert!(split_books(books, Some(&all)).unwrap_err().to_string().contains("none is left"));
    }

    #[test]
    fn a_missing_or_empty_source_names_the_path() {
        let empty = dir_with(&[]);
        let err = read_books(std::slice::from_ref(&empty), 1).unwrap_err().to_string();
        assert!(err.contains(&empty.display().to_string()) && err.contains("no .txt"), "{err}");
        let short = empty.join("short.txt");
        std::fs::write(&short, "too short").unwrap();
        let err = read_books(std::slice::from_ref(&short), 100).unwrap_err().to_string();
        assert!(err.contains("short.txt") && err.contains("9 characters, shorter than the 100"), "{err}");
        std::fs::remove_file(&short).unwrap();
        let missing = empty.join("nope.txt");
        assert!(read_books(std::slice::from_ref(&missing), 1)
            .unwrap_err()
            .to_string()
            .contains(&missing.display().to_string()));
    }
}
