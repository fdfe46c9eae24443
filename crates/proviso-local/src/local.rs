//! A local model ready for constrained generation: the GGUF loaded, its tokenizer wrapped for
//! llguidance, its chat template compiled. Building this is the one place that knows how the
//! pieces fit; the CLI, the harness and the server all start here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proviso_contract::{Contract, Verdict};
use proviso_decode::{
    ChatTemplate, CompileOptions, Compiled, Constrainer, ConstraintError, ConstraintSpec,
    GenerateError, GenerateOptions, Generation, Generator, Message, Rendered, Segment, StopReason,
    TokenId, Tokenizer,
};
use proviso_llama::{LlamaEngine, LlamaError, Model, RunOptions};
use proviso_model::{FetchError, FetchEvent, DEFAULT_MODEL};

/// Why a local model is not available.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The default model could not be fetched.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// llama.cpp could not load or run the model.
    #[error(transparent)]
    Llama(#[from] LlamaError),
    /// The tokenizer cannot carry constraints.
    #[error(transparent)]
    Constraint(#[from] ConstraintError),
    /// Generation failed.
    #[error(transparent)]
    Generate(#[from] GenerateError),
}

/// A generation the contract's gates have judged.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CheckedGeneration {
    /// The last generation.
    pub generation: Generation,
    /// Its verdict.
    pub verdict: Verdict,
    /// Which attempt it was (1-based).
    pub attempt: usize,
}

/// Judges a finished generation exactly as a provider response: a generation cut by the token
/// budget is `incomplete_response` at the transport gate and is never parsed.
#[must_use]
pub fn judge(contract: &Contract, generation: &Generation) -> Verdict {
    let envelope = serde_json::json!({"choices": [{"index": 0,
        "message": {"role": "assistant", "content": generation.text()},
        "finish_reason": generation.stop_reason.finish_reason()}]});
    contract.check_envelope(envelope.to_string().as_bytes())
}

/// A loaded model with everything constrained generation needs.
#[derive(Debug, Clone)]
pub struct LocalModel {
    path: PathBuf,
    model: Model,
    tokenizer: Arc<dyn Tokenizer>,
    constrainer: Constrainer,
    template: Option<Arc<ChatTemplate>>,
}

impl LocalModel {
    /// Opens `path`, or the default model (fetched on first use) when `path` is `None`.
    ///
    /// # Errors
    ///
    /// [`LocalError`] when the model cannot be fetched, loaded or wrapped.
    pub fn open(
        path: Option<&Path>,
        progress: &mut dyn FnMut(FetchEvent),
    ) -> Result<Self, LocalError> {
        let path = match path {
            Some(path) => path.to_path_buf(),
            None => proviso_model::ensure(&DEFAULT_MODEL, progress)?,
        };
        let model = Model::load(&path)?;
        let tokenizer = model.tokenizer();
        let constrainer = Constrainer::new(tokenizer.clone(), &CompileOptions::default())?;
        // A model without a usable template is still usable with raw prompts.
        let template = model.chat_template().ok().map(Arc::new);
        Ok(Self {
            path,
            model,
            tokenizer,
            constrainer,
            template,
        })
    }

    /// The GGUF's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The llama.cpp model.
    #[must_use]
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The model's tokenizer.
    #[must_use]
    pub fn tokenizer(&self) -> &Arc<dyn Tokenizer> {
        &self.tokenizer
    }

    /// The constraint compiler for this model's tokenizer.
    #[must_use]
    pub fn constrainer(&self) -> &Constrainer {
        &self.constrainer
    }

    /// Compiles a constraint for this model.
    ///
    /// # Errors
    ///
    /// [`ConstraintError`], naming any keyword the grammar cannot enforce.
    pub fn compile(
        &self,
        spec: &ConstraintSpec,
        options: &CompileOptions,
    ) -> Result<Compiled, ConstraintError> {
        self.constrainer.compile(spec, options)
    }

    /// A fresh engine.
    ///
    /// # Errors
    ///
    /// [`LocalError::Llama`] when the context cannot be created.
    pub fn engine(&self, options: RunOptions) -> Result<LlamaEngine, LocalError> {
        Ok(self.model.engine(options)?)
    }

    /// Generates under `compiled` until `contract`'s gates accept, at most `attempts` times.
    /// A retry after a rejected complete output shows the model that output and the gate's
    /// reason as a new user turn; a retry after a `repetition` stop regenerates from the same
    /// prompt with penalties against repetition on and the output steered to close if it
    /// loops again; an output cut by the token limit is regenerated once, steered to close
    /// within the same budget (see [`proviso_decode::WrapUp`]). This is how `relax` stays safe: the grammar enforced a superset, the gates enforce
    /// the rest, and nothing that fails the full contract is returned as accepted.
    /// `on_attempt` sees every generation and its verdict.
    ///
    /// # Errors
    ///
    /// [`LocalError`] when the prompt cannot be rendered or generation fails.
    #[allow(clippy::too_many_arguments)] // Each argument is a separate, required choice.
    pub fn generate_checked<E: proviso_decode::Engine>(
        &self,
        generator: &mut Generator<E>,
        contract: &Contract,
        compiled: &Compiled,
        messages: &[Message],
        options: &GenerateOptions,
        attempts: usize,
        on_attempt: &mut dyn FnMut(usize, &Generation, &Verdict),
    ) -> Result<CheckedGeneration, LocalError> {
        let mut messages = messages.to_vec();
        let mut options = options.clone();
        let attempts = attempts.max(1);
        let mut attempt = 1;
        loop {
            let prompt = self.prompt(&messages)?;
            let generation = generator.generate(&prompt, Some(compiled), &options)?;
            let verdict = judge(contract, &generation);
            on_attempt(attempt, &generation, &verdict);
            let rejection = match verdict.rejection() {
                Some(rejection) if attempt < attempts => rejection,
                _ => {
                    return Ok(CheckedGeneration {
                        generation,
                        verdict,
                        attempt,
                    })
                }
            };
            match generation.stop_reason {
                // A loop is retried from the same prompt with penalties against repetition:
                // showing the model its own loop would only prime it to loop again.
                StopReason::Repetition => {
                    options = options.after_loop(&generation);
                }
                // The same budget would cut the same output again, unless it is steered to
                // close within it; an output already steered is returned as it is.
                StopReason::Length if options.wrap_up.is_none() => {
                    options = options.after_cut();
                }
                StopReason::Length => {
                    return Ok(CheckedGeneration {
                        generation,
                        verdict,
                        attempt,
                    })
                }
                _ => {
                    let feedback = format!(
                        "That output was rejected by the {} gate ({}): {}. Answer again.",
                        rejection.gate(),
                        rejection.code(),
                        rejection.message()
                    );
                    messages.push(Message::assistant(generation.text()));
                    messages.push(Message::user(feedback));
                }
            }
            attempt += 1;
        }
    }

    /// The prompt tokens for `messages`, rendered with the model's chat template (or, for a
    /// model without one, the messages' contents joined by blank lines).
    ///
    /// Data never becomes control: only the template's own markup is tokenized with
    /// special-token parsing; every string a message carries (content, tool calls, call ids)
    /// is tokenized as text, so `<|im_start|>` written in a tool result stays text.
    ///
    /// # Errors
    ///
    /// [`LocalError::Llama`] if the template fails to render, or if it transforms messages
    /// so that their data cannot be traced while some message holds control-token text.
    pub fn prompt(&self, messages: &[Message]) -> Result<Vec<TokenId>, LocalError> {
        let mut tokens: Vec<TokenId> = self.tokenizer.bos().into_iter().collect();
        let template_error = |e| LocalError::Llama(LlamaError::Template(e));
        let Some(template) = &self.template else {
            let text = messages
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n\n");
            tokens.extend(self.tokenizer.tokenize(text.as_bytes(), false));
            return Ok(tokens);
        };
        match template
            .render_traced(messages, true)
            .map_err(template_error)?
        {
            Rendered::Segments(segments) => {
                for segment in segments {
                    match segment {
                        Segment::Markup(text) => {
                            tokens.extend(self.tokenizer.tokenize(text.as_bytes(), true));
                        }
                        Segment::Data(text) => {
                            tokens.extend(self.tokenizer.tokenize(text.as_bytes(), false));
                        }
                    }
                }
            }
            Rendered::Untraced(text) => {
                let holds_control =
                    messages.iter().any(|m| {
                        std::iter::once(m.content.as_str())
                            .chain(m.tool_call_id.as_deref())
                            .chain(m.tool_calls.iter().flat_map(|c| {
                                [c.id.as_str(), c.name.as_str(), c.arguments.as_str()]
                            }))
                            .any(|s| {
                                self.tokenizer.tokenize(s.as_bytes(), true)
                                    != self.tokenizer.tokenize(s.as_bytes(), false)
                            })
                    });
                if holds_control {
                    return Err(template_error(proviso_decode::TemplateError(
                        "the chat template transforms message text, so its data cannot be kept apart from its markup, and a message holds control-token text".into(),
                    )));
                }
                tokens.extend(self.tokenizer.tokenize(text.as_bytes(), true));
            }
        }
        Ok(tokens)
    }
}
