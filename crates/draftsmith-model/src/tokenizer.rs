//! Text ↔ token ids. Either a `tokenizer.json` (Hugging Face directory) or a tokenizer built
//! from the vocabulary, merges and special tokens a GGUF file embeds.

use std::path::{Path, PathBuf};

use draftsmith_gguf::GgufFile;
use serde_json::{json, Value};

use crate::chat::ChatTemplate;
use crate::error::ModelError;

/// GPT-2's pre-tokenizer regex (`'s|'t|…| ?\p{L}+| ?\p{N}+|…`), applied by `ByteLevel(use_regex)`.
const QWEN2_REGEX: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A tokenizer plus what generation needs to know about it.
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
    source: PathBuf,
    bos: Option<u32>,
    eos: Vec<u32>,
    add_bos: bool,
    chat_template: Option<ChatTemplate>,
}

impl TextTokenizer {
    /// Loads a `tokenizer.json` file.
    pub fn read_json(path: &Path) -> Result<tokenizers::Tokenizer, ModelError> {
        tokenizers::Tokenizer::from_file(path)
            .map_err(|e| ModelError::Tokenizer { path: path.to_path_buf(), problem: e.to_string() })
    }

    /// Wraps a loaded tokenizer with its generation settings.
    pub fn new(
        inner: tokenizers::Tokenizer,
        source: &Path,
        bos: Option<u32>,
        eos: Vec<u32>,
        add_bos: bool,
        chat_template: Option<ChatTemplate>,
    ) -> Self {
        Self { inner, source: source.to_path_buf(), bos, eos, add_bos, chat_template }
    }

    /// Builds the tokenizer a GGUF file describes (`tokenizer.ggml.*` keys).
    pub fn from_gguf(file: &GgufFile) -> Result<Self, ModelError> {
        let path = file.path();
        let err = |problem: String| ModelError::Tokenizer { path: path.to_path_buf(), problem };
        let model = file.get_str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(err(format!("tokenizer model `{model}` is not supported (only byte-level BPE, `gpt2`)")));
        }
        let tokens = file.get_str_array("tokenizer.ggml.tokens")?;
        let merges = file.get_str_array("tokenizer.ggml.merges")?;
        let types: Vec<u64> = match file.get("tokenizer.ggml.token_type").and_then(|v| v.as_array()) {
            Some(a) => a.iter().map(|v| v.as_u64().unwrap_or(1)).collect(),
            None => vec![1; tokens.len()],
        };
        let pre = file.get("tokenizer.ggml.pre").and_then(|v| v.as_str()).unwrap_or("default");
        let spec = tokenizer_json(&tokens, &merges, &types, pre).map_err(err)?;
        let inner = tokenizers::Tokenizer::from_bytes(spec.to_string().as_bytes()).map_err(|e| err(e.to_string()))?;
        let ids = special_ids(file, tokens.len())?;
        let id = |key: &str| ids.iter().find(|(k, _)| k == key).map(|&(_, id)| id);
        let text = |id: u32| tokens.get(id as usize).copied().unwrap_or_default().to_string();
        let add_bos = file.get("tokenizer.ggml.add_bos_token").and_then(|v| v.as_bool()).unwrap_or(false);
        let template = file.get("tokenizer.chat_template").and_then(|v| v.as_str()).map(|t| {
            ChatTemplate::new(
                path,
                t,
                id("tokenizer.ggml.bos_token_id").map(text),
                id("tokenizer.ggml.eos_token_id").map(text),
            )
        });
        let mut eos: Vec<u32> = id("tokenizer.ggml.eos_token_id").into_iter().collect();
        if let Some(eot) = id("tokenizer.ggml.eot_token_id") {
            eos.push(eot);
        }
        Ok(Self {
            inner,
            source: path.to_path_buf(),
            bos: id("tokenizer.ggml.bos_token_id"),
            eos,
            add_bos,
            chat_template: template,
        })
    }

    /// Where the tokenizer came from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Tokens including added/special tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.chat_template.as_ref()
    }

    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    /// Encodes raw text the way the model's metadata says (BOS only where `add_bos_token`).
    /// Special-token text such as `<|im_start|>` becomes the special token.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| ModelError::Tokenizer { path: self.source.clone(), problem: e.to_string() })?;
        let mut ids = Vec::with_capacity(encoding.len() + 1);
        if self.add_bos {
            ids.extend(self.bos);
        }
        ids.extend_from_slice(encoding.get_ids());
        Ok(ids)
    }

    /// Decodes ids to text (special tokens kept, so chat markers stay visible).
    pub fn decode(&self, ids: &[u32]) -> Result<String, ModelError> {
        self.inner
            .decode(ids, false)
            .map_err(|e| ModelError::Tokenizer { path: self.source.clone(), problem: e.to_string() })
    }

    /// Serialized `tokenizer.json`, used to fingerprint the tokenizer.
    pub fn to_json(&self) -> String {
        self.inner.to_string(false).unwrap_or_default()
    }
}

/// Every special token id in the metadata (`tokenizer.ggml.*_token_id`: bos, eos, eot, padding,
/// …) as (key, id), each checked to be an unsigned integer below the vocabulary size `n_tokens`:
/// an id past the vocabulary would never match a sampled token (generation would not stop) or
/// index past the embeddings.
///
/// Ids this engine never reads (padding, unknown, separator, mask, …) are left out instead:
/// exporters set those loosely, and llama.cpp only warns about them.
fn special_ids(file: &GgufFile, n_tokens: usize) -> Result<Vec<(String, u32)>, ModelError> {
    const READ: [&str; 3] =
        ["tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"];
    let keys = file.metadata().keys().filter(|k| k.starts_with("tokenizer.ggml.") && k.ends_with("_token_id"));
    keys.filter_map(|key| {
        let read = READ.contains(&key.as_str());
        let id = match file.get_u64(key) {
            Ok(id) => id,
            Err(e) => return read.then(|| Err(e.into())),
        };
        match u32::try_from(id) {
            Ok(small) if id < n_tokens as u64 => Some(Ok((key.clone(), small))),
            _ if !read => None,
            _ => Some(Err(ModelError::Tokenizer {
                path: file.path().to_path_buf(),
                problem: format!("{key} is {id}, outside the vocabulary of {n_tokens} tokens"),
            })),
        }
    })
    .collect()
}

/// The pre-tokenizer sequence llama.cpp uses for `tokenizer.ggml.pre`.
fn pre_tokenizer(pre: &str) -> Result<Value, String> {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    let split =
        |regex: &str| json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false});
    Ok(match pre {
        "default" | "gpt2" | "gpt-2" => byte_level(true),
        "smollm" => {
            json!({"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, byte_level(true)]})
        }
        "qwen2" => json!({"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX), byte_level(false)]}),
        "llama-bpe" | "llama3" => {
            json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX), byte_level(false)]})
        }
        other => {
            return Err(format!("pre-tokenizer `{other}` is not supported (default, gpt2, smollm, qwen2, llama-bpe)"))
        }
    })
}

/// A `tokenizer.json` document for a byte-level BPE vocabulary.
fn tokenizer_json(tokens: &[&str], merges: &[&str], types: &[u64], pre: &str) -> Result<Value, String> {
    const CONTROL: u64 = 3;
    const USER_DEFINED: u64 = 4;
    let vocab: serde_json::Map<String, Value> =
        tokens.iter().enumerate().map(|(i, t)| (t.to_string(), json!(i))).collect();
    let added: Vec<Value> = tokens
        .iter()
        .zip(types)
        .enumerate()
        .filter(|(_, (_, &ty))| ty == CONTROL || ty == USER_DEFINED)
        .map(|(id, (t, &ty))| json!({"id": id, "content": t, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": ty == CONTROL}))
        .collect();
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer(pre)?,
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": pre == "llama-bpe" || pre == "llama3",
                  "vocab": vocab, "merges": merges},
    }))
}
