//! Grammar-constrained decoding.
//!
//! proviso owns the sampling loop. An [`Engine`] (llama.cpp in `proviso-llama`) turns tokens
//! into logits; a [`Constrainer`] compiles a JSON Schema, Lark grammar, regular expression or
//! choice list into an llguidance matcher over the model's own tokenizer; the [`Generator`]
//! masks, samples, feeds forced tokens in one batch and decides why generation stopped.
//! Malformed output is unreachable, not merely unlikely; the gates then confirm it.

mod chat;
mod constraint;
mod engine;
mod generate;
mod sample;
pub mod testing;
mod tokenizer;
mod wrap;

pub use chat::{ChatTemplate, Message, Rendered, Segment, TemplateError};
pub use constraint::{
    strip_extensions, CompileOptions, Compiled, Constrainer, ConstraintError, ConstraintSpec,
    TextChecker,
};
pub use engine::{log_probability, Engine, EngineError, TokenId, TokenInfo, Tokenizer};
pub use generate::{
    GenerateError, GenerateOptions, Generation, Generator, RepetitionLimit, Stats, StopReason,
    TokenLogprob,
};
pub use sample::{Dry, Sampler, Sampling};
pub use wrap::WrapUp;
