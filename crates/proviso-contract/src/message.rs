//! One message of a conversation, as every layer passes it: the harness's transcript, the
//! proposer's prompt and the chat template's input are the same type.

use serde::Serialize;

/// One chat message, in the shape chat templates expect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A message.
    #[must_use]
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        Self {
            role: role.to_owned(),
            content: content.into(),
        }
    }
}
