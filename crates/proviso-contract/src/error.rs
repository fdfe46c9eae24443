//! Errors in declaring a contract (as opposed to rejections of model output).

/// A contract that cannot be built. These are the author's mistakes, reported before any
/// model output is checked: proviso conforms or refuses, it never ignores part of a contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// The schema is not a valid Draft 2020-12 schema, or a reference cannot be resolved.
    #[error("invalid schema at {schema_path:?}: {message}")]
    InvalidSchema {
        /// What is wrong.
        message: String,
        /// JSON pointer into the schema.
        schema_path: String,
    },
    /// The schema uses a keyword that Draft 2020-12 does not define, so it would constrain
    /// nothing. Prefix extensions with `x-`.
    #[error("unknown schema keyword `{keyword}` at {schema_path:?}: it would be silently ignored")]
    UnknownKeyword {
        /// The keyword.
        keyword: String,
        /// JSON pointer into the schema.
        schema_path: String,
    },
    /// The schema's `$ref`s chain deeper than the limit, loop without describing a value, or
    /// are too many (`proviso_json::refs`); refused before any compiler recurses into them.
    #[error("schema refused: {0}")]
    References(#[from] proviso_json::refs::LimitError),
    /// The `x-proviso` declaration is malformed.
    #[error("invalid contract declaration at {path:?}: {message}")]
    InvalidDeclaration {
        /// What is wrong.
        message: String,
        /// JSON pointer into the contract file.
        path: String,
    },
    /// The contract checks evidence but no source store was given.
    #[error("the contract checks citations against sources, but no source store was given")]
    MissingSources,
    /// The source store could not be built.
    #[error("invalid source store: {message}")]
    InvalidSources {
        /// What is wrong.
        message: String,
    },
}

impl ContractError {
    pub(crate) fn declaration(path: &str, message: impl Into<String>) -> Self {
        Self::InvalidDeclaration {
            message: message.into(),
            path: path.to_owned(),
        }
    }
}
