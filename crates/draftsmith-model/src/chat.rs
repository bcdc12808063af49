//! Chat templates (the Jinja template a model ships) rendered with minijinja.

use std::path::{Path, PathBuf};

use minijinja::{context, Environment, Error, ErrorKind};
use serde::{Deserialize, Serialize};

use crate::error::ModelError;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.to_string(), content: content.to_string() }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    source: PathBuf,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    /// Compiles `template`; `source` is the file it came from (for errors).
    pub fn new(
        source: &Path,
        template: &str,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Result<Self, ModelError> {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned("chat", template.to_string())
            .map_err(|e| ModelError::ChatTemplate { path: source.to_path_buf(), problem: e.to_string() })?;
        Ok(Self {
            env,
            source: source.to_path_buf(),
            bos_token: bos_token.unwrap_or_default(),
            eos_token: eos_token.unwrap_or_default(),
        })
    }

    /// Renders `messages`; with `add_generation_prompt` the assistant turn is opened.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String, ModelError> {
        let template = self.env.get_template("chat").expect("template added at construction");
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(|e| ModelError::ChatTemplate { path: self.source.clone(), problem: e.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn chatml_renders_like_transformers() {
        let t = ChatTemplate::new(Path::new("t.gguf"), CHATML, None, None).unwrap();
        let out = t.render(&[ChatMessage::new("user", "Hi")], true).unwrap();
        assert_eq!(out, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn template_errors_name_the_file() {
        let err = ChatTemplate::new(Path::new("/m/x.gguf"), "{% for %}", None, None).err().unwrap().to_string();
        assert!(err.contains("/m/x.gguf"), "{err}");
        let t =
            ChatTemplate::new(Path::new("/m/x.gguf"), "{{ raise_exception('no system role') }}", None, None).unwrap();
        let err = t.render(&[], false).unwrap_err().to_string();
        assert!(err.contains("no system role"), "{err}");
    }
}
