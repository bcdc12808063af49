//! Streaming detokenization: generated ids in, printable text pieces out, with work per token
//! that does not grow with the output length.
//!
//! A token's text depends on its neighbours (byte-level pieces of one UTF-8 character, a
//! leading-space marker the decoder strips at the start of a sequence), so the stream decodes a
//! short window: the tokens of the last emitted piece (context) plus the ones not yet emitted.
//! The new text is what that window decodes to beyond what its context part decodes to, held
//! back while it ends in an incomplete character.

use crate::error::ModelError;
use crate::tokenizer::TextTokenizer;

/// Turns a stream of token ids into text pieces, holding back incomplete UTF-8.
#[derive(Debug, Default)]
pub struct TextStream {
    tokens: Vec<u32>,
    /// Start of the decoding window (the previous piece's first token).
    prefix: usize,
    /// First token not yet emitted.
    read: usize,
    /// Tokens passed to the decoder so far (what the window bounds).
    decoded: usize,
}

impl TextStream {
    /// Appends `token`; returns the text it completes (empty while a character is incomplete).
    pub fn push(&mut self, tokenizer: &TextTokenizer, token: u32) -> Result<String, ModelError> {
        self.tokens.push(token);
        let context = tokenizer.decode(&self.tokens[self.prefix..self.read])?;
        let window = tokenizer.decode(&self.tokens[self.prefix..])?;
        self.decoded += 2 * (self.read - self.prefix) + (self.tokens.len() - self.read);
        if window.len() <= context.len() || window.ends_with('\u{FFFD}') || !window.is_char_boundary(context.len()) {
            return Ok(String::new());
        }
        self.prefix = self.read;
        self.read = self.tokens.len();
        Ok(window[context.len()..].to_string())
    }

    /// Tokens given to the decoder so far: bounded by a small multiple of the tokens pushed.
    pub fn decoded_tokens(&self) -> usize {
        self.decoded
    }
}
