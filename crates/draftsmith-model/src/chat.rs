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

/// A chat template, compiled when the model loads. One that does not compile (a Jinja feature
/// minijinja lacks) keeps its error for [`ChatTemplate::check`] and [`ChatTemplate::render`]:
/// the model still loads, and runs on raw text (`--no-chat-template`).
pub struct ChatTemplate {
    env: Environment<'static>,
    source: PathBuf,
    bos_token: String,
    eos_token: String,
    /// Why the template did not compile.
    broken: Option<String>,
}

impl ChatTemplate {
    /// Compiles `template`; `source` is the file it came from (for errors).
    pub fn new(source: &Path, template: &str, bos_token: Option<String>, eos_token: Option<String>) -> Self {
        let mut env = Environment::new();
        minijinja_contrib::add_to_environment(&mut env);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        let broken = env.add_template_owned("chat", template.to_string()).err().map(|e| e.to_string());
        Self {
            env,
            source: source.to_path_buf(),
            bos_token: bos_token.unwrap_or_default(),
            eos_token: eos_token.unwrap_or_default(),
            broken,
        }
    }

    /// `Err` naming the file when the template did not compile.
    pub fn check(&self) -> Result<(), ModelError> {
        match &self.broken {
            Some(problem) => Err(ModelError::ChatTemplate {
                path: self.source.clone(),
                problem: format!("{problem} (--no-chat-template runs the model on raw text)"),
            }),
            None => Ok(()),
        }
    }

    /// Renders `messages`; with `add_generation_prompt` the assistant turn is opened.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String, ModelError> {
        self.check()?;
        let template = self.env.get_template("chat").expect("a template that compiled is there");
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
        let t = ChatTemplate::new(Path::new("t.gguf"), CHATML, None, None);
        let out = t.render(&[ChatMessage::new("user", "Hi")], true).unwrap();
        assert_eq!(out, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn template_errors_name_the_file() {
        let broken = ChatTemplate::new(Path::new("/m/x.gguf"), "{% for %}", None, None);
        let err = broken.check().unwrap_err().to_string();
        assert!(err.contains("/m/x.gguf") && err.contains("--no-chat-template"), "{err}");
        assert_eq!(broken.render(&[], false).unwrap_err().to_string(), err);
        let t = ChatTemplate::new(Path::new("/m/x.gguf"), "{{ raise_exception('no system role') }}", None, None);
        let err = t.render(&[], false).unwrap_err().to_string();
        assert!(err.contains("no system role"), "{err}");
    }
}
