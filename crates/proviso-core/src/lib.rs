//! The words every layer of proviso shares, below the contract and the decoder: one
//! message of a conversation ([`Message`], written by a [`Role`]) and how an output ended
//! ([`Finish`], read once from the stop reason a provider or the decoder wrote).
//!
//! The contract crate re-exports all of them, and gives a [`Finish`] its meaning at the
//! transport gate (`proviso_contract::transport_gate`); the decoder needs only these words,
//! so it does not depend on the contract.

mod message;

pub use message::{Message, MessageToolCall, Role};

/// Why an output ended, read once from the stop reason a provider or the decoder wrote: the
/// meaning of a stop reason, for every envelope, every call format and every backend.
// Exhaustive on purpose: a new way to end must be given its meaning at every gate that
// matches on it, never fall into a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// A natural end (end of sequence, a stop sequence, the grammar completed, a call).
    Stop,
    /// A budget ran out (tokens, the context window, a paused turn): the text is a
    /// fragment.
    Length,
    /// A content filter removed output.
    ContentFilter,
    /// The decoder stopped the output because it degenerated into repetition: the text is
    /// a fragment, as under `Length`, but a larger budget would not help.
    Repetition,
    /// The generation was stopped by its caller (a client went away, a deadline passed):
    /// the text is a fragment, and nothing is retried.
    Cancelled,
    /// No stop reason: the output may be unfinished.
    Missing,
    /// A stop reason proviso does not know: the output may be unfinished.
    Unknown,
}

/// Stop reasons that mean the output is complete.
const COMPLETE: &[&str] = &[
    "stop",
    "tool_calls",
    "function_call",
    "end_turn",
    "stop_sequence",
    "tool_use",
];
/// Stop reasons that mean the output was cut short.
const TRUNCATED: &[&str] = &[
    "length",
    "max_tokens",
    "model_context_window_exceeded",
    "pause_turn",
];

impl Finish {
    /// Reads a stop reason as a provider or the decoder spells it.
    #[must_use]
    pub fn read(reason: Option<&str>) -> Self {
        match reason {
            None => Self::Missing,
            Some(r) if COMPLETE.contains(&r) => Self::Stop,
            Some(r) if TRUNCATED.contains(&r) => Self::Length,
            Some("repetition") => Self::Repetition,
            Some("content_filter") => Self::ContentFilter,
            Some("cancelled") => Self::Cancelled,
            Some(_) => Self::Unknown,
        }
    }

    /// The end as an OpenAI-style `finish_reason` (`stop`, `length`, `content_filter`,
    /// `repetition`, `cancelled`; `unknown` for a missing or unknown one).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
            Self::Repetition => "repetition",
            Self::Cancelled => "cancelled",
            Self::Missing | Self::Unknown => "unknown",
        }
    }
}
