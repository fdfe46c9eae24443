//! A local model ready for constrained generation: the GGUF loaded, its tokenizer wrapped for
//! llguidance, its chat template compiled. Building this is the one place that knows how the
//! pieces fit; the CLI, the harness and the server all start here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proviso_decode::{
    ChatTemplate, CompileOptions, Compiled, Constrainer, ConstraintError, ConstraintSpec, Message,
    ModelTokEnv, TokenId, Tokenizer,
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
        let tok_env = ModelTokEnv::canonical(tokenizer.clone());
        let constrainer = Constrainer::new(tok_env, &CompileOptions::default())?;
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

    /// The prompt tokens for `messages`, rendered with the model's chat template (or, for a
    /// model without one, the messages' contents joined by blank lines).
    ///
    /// # Errors
    ///
    /// [`LocalError::Llama`] if the template fails to render.
    pub fn prompt(&self, messages: &[Message]) -> Result<Vec<TokenId>, LocalError> {
        let text = match &self.template {
            Some(template) => template
                .render(messages, true)
                .map_err(|e| LocalError::Llama(LlamaError::Template(e)))?,
            None => messages
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n\n"),
        };
        let mut tokens: Vec<TokenId> = self.tokenizer.bos().into_iter().collect();
        tokens.extend(self.tokenizer.tokenize(text.as_bytes(), true));
        Ok(tokens)
    }
}
