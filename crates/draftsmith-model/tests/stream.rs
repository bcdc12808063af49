//! Streaming detokenization: the pieces add up to the whole decoded text (multi-byte characters
//! split over byte-level tokens included), and the decoding work per token stays flat as the
//! output grows (it was quadratic: the whole output re-decoded for every token).

mod common;

use common::B;
use draftsmith_model::{load_model, LoadOptions, MatmulWeights, TextStream, TextTokenizer};

fn tokenizer() -> TextTokenizer {
    let dir = common::fixtures().join("tiny-llama");
    load_model::<B>(&dir, LoadOptions::new(MatmulWeights::Dense), &Default::default()).unwrap().tokenizer
}

/// Streams `ids`; returns the concatenated pieces and the decoder's work.
fn stream(tokenizer: &TextTokenizer, ids: &[u32]) -> (String, usize) {
    let mut s = TextStream::default();
    let text: String = ids.iter().map(|&t| s.push(tokenizer, t).unwrap()).collect();
    (text, s.decoded_tokens())
}

#[test]
fn pieces_add_up_to_the_decoded_text() {
    let tokenizer = tokenizer();
    let ids = tokenizer.encode("the cat — naïve café, 日本語 🙂 and the dog.\nNew line.").unwrap();
    let (text, _) = stream(&tokenizer, &ids);
    assert_eq!(text, tokenizer.decode(&ids).unwrap());
}

#[test]
fn work_per_token_does_not_grow_with_the_output_length() {
    let tokenizer = tokenizer();
    let unit = tokenizer.encode("the cat sat on the mat, naïve 日本 🙂 ").unwrap();
    let ids: Vec<u32> = unit.iter().copied().cycle().take(8192).collect();
    let (text, work_8k) = stream(&tokenizer, &ids);
    assert_eq!(text, tokenizer.decode(&ids).unwrap());
    let (_, work_512) = stream(&tokenizer, &ids[..512]);
    let (per_8k, per_512) = (work_8k as f64 / 8192.0, work_512 as f64 / 512.0);
    assert!(
        per_8k < 8.0 && per_8k < 1.5 * per_512,
        "decoded tokens per pushed token: {per_512:.1} at 512, {per_8k:.1} at 8K"
    );
}
