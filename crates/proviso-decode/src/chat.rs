//! Chat templates: the model's own Jinja template from its GGUF, rendered with minijinja.

use minijinja::{context, Environment, Error, ErrorKind};

pub use proviso_contract::Message;

/// Why a template could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("chat template: {0}")]
pub struct TemplateError(pub String);

/// A compiled chat template.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl ChatTemplate {
    /// Compiles `source` (Jinja, as Hugging Face chat templates are written). `bos` and `eos`
    /// are the texts of the special tokens that templates may refer to.
    ///
    /// # Errors
    ///
    /// [`TemplateError`] if the template does not compile.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        // Python string methods (`.strip()`, `.startswith()`) are common in chat templates.
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<String, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        env.add_template_owned("chat", source.to_owned())
            .map_err(|e| TemplateError(e.to_string()))?;
        Ok(Self {
            env,
            bos: bos.to_owned(),
            eos: eos.to_owned(),
        })
    }

    /// Renders `messages`, ending with the assistant's turn opened when
    /// `add_generation_prompt`.
    ///
    /// # Errors
    ///
    /// [`TemplateError`] if rendering fails (the template may raise on unsupported roles).
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| TemplateError(e.to_string()))?;
        template
            .render(context! {
                messages => minijinja::value::Serde(messages),
                add_generation_prompt => add_generation_prompt,
                bos_token => &self.bos,
                eos_token => &self.eos,
            })
            .map_err(|e| TemplateError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-Instruct's template, as stored in its GGUF.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn renders_chatml() {
        let template = ChatTemplate::new(SMOLLM2, "<|im_start|>", "<|im_end|>").unwrap();
        let text = template.render(&[Message::user("Hi")], true).unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn python_methods_and_raise_exception_work() {
        let template = ChatTemplate::new(
            "{% if messages[0].role == 'tool' %}{{ raise_exception('no tools') }}{% endif %}{{ messages[0].content.strip() }}",
            "",
            "",
        )
        .unwrap();
        assert_eq!(
            template.render(&[Message::user("  x ")], false).unwrap(),
            "x"
        );
        assert!(template.render(&[Message::tool("x")], false).is_err());
    }
}
