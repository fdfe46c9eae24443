//! Errors in tool declarations. A proposed call that breaks a gate is not an error but a
//! [`proviso_contract::Rejection`] inside a verdict.

use proviso_contract::ContractError;

/// Why a tool declaration, registry or policy cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// A name that is not usable in every call format.
    #[error("tool name {name:?} is not usable: use letters, digits, `_`, `.` or `-`, starting with a letter or `_`, at most 64 bytes")]
    InvalidName {
        /// The name.
        name: String,
    },
    /// Two tools with one name.
    #[error("tool `{name}` is declared twice")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// A malformed declaration.
    #[error("{}{message}{}", if tool.is_empty() { String::new() } else { format!("tool `{tool}`: ") }, if pointer.is_empty() { String::new() } else { format!(" (at {pointer})") })]
    Declaration {
        /// The tool, when known.
        tool: String,
        /// JSON pointer into the declaration document.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// A BFCL type name with no JSON Schema equivalent.
    #[error("tool `{tool}`: type `{type_name}` at {pointer} has no JSON Schema equivalent")]
    UnsupportedType {
        /// The tool.
        tool: String,
        /// JSON pointer into the declaration.
        pointer: String,
        /// The type name.
        type_name: String,
    },
    /// The parameter schema does not compile.
    #[error("tool `{tool}`: {source}")]
    Schema {
        /// The tool.
        tool: String,
        /// Why.
        #[source]
        source: ContractError,
    },
    /// An argument policy or a permission/budget policy is malformed.
    #[error("{message}")]
    Policy {
        /// What is wrong.
        message: String,
    },
    /// An export dialect cannot express part of a schema or grammar.
    #[error("{dialect} cannot express {what}; nothing was exported rather than a grammar that silently drops it")]
    ExportUnsupported {
        /// The dialect (`gbnf`, `json-schema`, `strict json-schema`).
        dialect: &'static str,
        /// The keywords or construct.
        what: String,
    },
    /// A call format cannot express a tool's arguments.
    #[error("the {format} call format cannot enforce {what} (tool `{tool}`, at {pointer}); use the envelope, hermes or llama3 format")]
    FormatUnsupported {
        /// The format.
        format: &'static str,
        /// The tool.
        tool: String,
        /// JSON pointer into the parameter schema.
        pointer: String,
        /// The keyword or construct.
        what: String,
    },
}
