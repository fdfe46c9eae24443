//! One message of a conversation, as every layer passes it: the server's parsed request, the
//! harness's transcript, the proposer's prompt and the chat template's input are the same
//! type.

use serde::Serialize;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Role {
    /// System (or `developer`) instructions.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

impl Role {
    /// The role's name in a chat template and on the wire.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }

    /// Reads a role by its OpenAI name (`developer` is a system message); `None` for a name
    /// that is not a role.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "system" | "developer" => Some(Self::System),
            "user" => Some(Self::User),
            "assistant" => Some(Self::Assistant),
            "tool" => Some(Self::Tool),
            _ => None,
        }
    }
}

/// A tool call as a message carries it back to the model (arguments are JSON text, as the
/// client sent them; the judge parses them strictly before use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageToolCall {
    /// The call id.
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments, as JSON text.
    pub arguments: String,
}

/// One chat message, in the shape chat templates expect (`role`, `content`, and for a chat
/// that carries them, `tool_calls` and `tool_call_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
    /// Calls an assistant message made.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<MessageToolCall>,
    /// The call a tool message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message of `role` with `content` and nothing else.
    #[must_use]
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A system message.
    #[must_use]
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    #[must_use]
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    #[must_use]
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// A tool result.
    #[must_use]
    pub fn tool(content: impl Into<String>) -> Self {
        Self::new(Role::Tool, content)
    }

    /// Adds the calls an assistant message made.
    #[must_use]
    pub fn with_tool_calls(mut self, tool_calls: Vec<MessageToolCall>) -> Self {
        self.tool_calls = tool_calls;
        self
    }

    /// Names the call a tool message answers.
    #[must_use]
    pub fn with_tool_call_id(mut self, id: impl Into<String>) -> Self {
        self.tool_call_id = Some(id.into());
        self
    }
}
