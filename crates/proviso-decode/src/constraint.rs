//! Compiling a constraint (JSON Schema, Lark grammar, regular expression, choice list) into an
//! llguidance matcher over one tokenizer.
//!
//! Conform or refuse: a schema keyword the grammar cannot enforce is an error that names it,
//! before any token is generated. With [`CompileOptions::relax`] the grammar is compiled for a
//! superset instead, and the result lists exactly which keywords were only verified after
//! decoding, so the caller's gates can enforce them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llguidance::api::{ParserLimits, TopLevelGrammar};
use llguidance::earley::SlicedBiasComputer;
use llguidance::toktrie::TokEnv;
use llguidance::{JsonCompileOptions, Matcher, ParserFactory};
use serde_json::Value;

use crate::engine::{TokenId, Tokenizer};
use crate::tokenizer::ModelTokEnv;

/// What the output must match.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ConstraintSpec {
    /// A JSON Schema (Draft 2020-12).
    JsonSchema(Value),
    /// A Lark grammar in llguidance's dialect.
    Lark(String),
    /// A regular expression the whole output must match.
    Regex(String),
    /// One of these strings, exactly.
    Choice(Vec<String>),
}

/// How a constraint is compiled.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CompileOptions {
    /// Compile schemas whose keywords the grammar cannot enforce to a superset grammar
    /// instead of refusing them. The caller must then verify the output against the full
    /// schema; [`Compiled::verified_only`] lists what the grammar did not enforce.
    pub relax: bool,
    /// Whitespace in JSON output. `None` (the default) fixes it: `", "` between items,
    /// `": "` after keys, nothing else, so the model cannot loop on whitespace and all the
    /// punctuation between values is forced (fed in one batch, no sampling). `Some(n)` allows
    /// up to `n` whitespace characters in each gap instead, for pretty-printed output.
    pub max_json_whitespace: Option<usize>,
    /// Bounds on grammar size and per-token work, so that a pathological schema fails in
    /// bounded time instead of stalling generation. llguidance's own type, so not public:
    /// proviso's API does not carry its dependencies' types.
    pub(crate) limits: ParserLimits,
    /// Bounds on `$ref` chains in JSON schemas, checked before llguidance resolves them
    /// (in a JSON Schema constraint and in every `%json` block of a Lark grammar alike).
    pub schema_limits: proviso_json::refs::SchemaLimits,
    /// Most strings in a choice list. Checked before compiling: the compiler's work grows
    /// with the list and cannot be interrupted once started.
    pub max_choices: usize,
    /// Most bytes of a Lark grammar, a regular expression or a choice list (all strings).
    pub max_grammar_bytes: usize,
    /// Most rules and terminals in a Lark grammar. llguidance's compiler recurses along
    /// chains of rules: 20,000 chained rules (270 KB) overflow a 64 MiB stack.
    pub max_lark_rules: usize,
}

impl CompileOptions {
    /// Sets the largest grammar (in llguidance's grammar symbols) a constraint may compile
    /// to; a larger one is [`ConstraintError::Invalid`].
    #[must_use]
    pub fn max_grammar_size(mut self, symbols: usize) -> Self {
        self.limits.max_grammar_size = symbols;
        self
    }

    /// Sets the lexer work a compile may spend building the lexer before it is refused as
    /// [`ConstraintError::Invalid`].
    #[must_use]
    pub fn initial_lexer_fuel(mut self, fuel: u64) -> Self {
        self.limits.initial_lexer_fuel = fuel;
        self
    }
}

proviso_macros::setters!(CompileOptions {
    relax: bool,
    max_json_whitespace: Option<usize>,
    max_choices: usize,
    max_grammar_bytes: usize,
    max_lark_rules: usize,
    schema_limits: proviso_json::refs::SchemaLimits,
});

impl Default for CompileOptions {
    fn default() -> Self {
        Self {
            relax: false,
            max_json_whitespace: None,
            limits: ParserLimits {
                max_grammar_size: 200_000,
                initial_lexer_fuel: 1_000_000,
                step_lexer_fuel: 200_000,
                step_max_items: 50_000,
                max_lexer_states: 100_000,
                verbose_errors: false,
                ..ParserLimits::default()
            },
            schema_limits: proviso_json::refs::SchemaLimits::default(),
            // 4,096 strings compile in well under a second; 100,000 took half a minute.
            max_choices: 4_096,
            max_grammar_bytes: 512 * 1024,
            // A chain of 5,000 rules compiles in 0.4 s on a few MiB of stack; real grammars
            // have a few hundred rules at most.
            max_lark_rules: 2_000,
        }
    }
}

/// Why a constraint cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConstraintError {
    /// The schema uses keywords the grammar cannot enforce (and `relax` is off).
    #[error("the grammar cannot enforce schema keyword{} {}; pass --relax to enforce {} after decoding instead",
        if keywords.len() == 1 { "" } else { "s" },
        keywords.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
        if keywords.len() == 1 { "it" } else { "them" })]
    Unsupported {
        /// The keywords, as llguidance names them.
        keywords: Vec<String>,
    },
    /// The grammar or schema is invalid, or exceeds the compile limits.
    #[error("cannot compile the constraint: {message}")]
    Invalid {
        /// llguidance's message.
        message: String,
    },
    /// The schema's `$ref`s chain too deep, loop without describing a value, or are too many;
    /// refused before the compiler recurses into them.
    #[error("cannot compile the constraint: {0}")]
    References(#[from] proviso_json::refs::LimitError),
    /// The constraint is larger than a compile limit allows; refused before compiling.
    #[error("cannot compile the constraint: {what} has {found}, more than the limit of {max}")]
    TooLarge {
        /// What was counted (`choices`, `bytes of the grammar`).
        what: &'static str,
        /// The limit.
        max: usize,
        /// What the constraint has.
        found: usize,
    },
    /// The tokenizer cannot be used for constraints.
    #[error("cannot build the constraint engine: {message}")]
    Tokenizer {
        /// What went wrong.
        message: String,
    },
}

/// A compiled constraint: a matcher in its start state, to be cloned per generation.
#[derive(Clone)]
pub struct Compiled {
    matcher: Matcher,
    verified_only: Vec<String>,
    compile_time: Duration,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("verified_only", &self.verified_only)
            .field("compile_time", &self.compile_time)
            .finish_non_exhaustive()
    }
}

impl Compiled {
    /// A fresh matcher in the start state.
    pub(crate) fn matcher(&self) -> Matcher {
        self.matcher.clone()
    }

    /// Whether the grammar accepts `tokens` as a complete output, walking them token by
    /// token as generation does: the mask is computed before each token (`on_mask` is given
    /// the time each took) and the token must be allowed by it.
    pub fn accepts(&self, tokens: &[TokenId], on_mask: &mut dyn FnMut(Duration)) -> bool {
        let mut matcher = self.matcher();
        for &token in tokens {
            if matcher.is_stopped() {
                return false;
            }
            let start = Instant::now();
            let Ok(mask) = matcher.compute_mask() else {
                return false;
            };
            on_mask(start.elapsed());
            if !mask.is_allowed(token) || matcher.consume_token(token).is_err() {
                return false;
            }
        }
        matcher.is_stopped() || matcher.is_accepting().unwrap_or(false)
    }

    /// Schema keywords the grammar did not enforce during decoding (only under `relax`); the
    /// output must be verified against them afterwards.
    #[must_use]
    pub fn verified_only(&self) -> &[String] {
        &self.verified_only
    }

    /// How long compilation took.
    #[must_use]
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }
}

/// Compiles constraints for one tokenizer. Build it once; compiling is then a fraction of a
/// millisecond for typical schemas.
#[derive(Clone)]
pub struct Constrainer {
    factory: Arc<ParserFactory>,
    tok_env: TokEnv,
}

impl std::fmt::Debug for Constrainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constrainer").finish_non_exhaustive()
    }
}

impl Constrainer {
    /// A constrainer for generating with `tokenizer`, the model's own: its tokenization is
    /// canonical, so the grammar may force tokens (fed in one batch, not sampled).
    ///
    /// # Errors
    ///
    /// [`ConstraintError::Tokenizer`] if llguidance rejects the tokenizer.
    pub fn new(
        tokenizer: Arc<dyn Tokenizer>,
        options: &CompileOptions,
    ) -> Result<Self, ConstraintError> {
        Self::over(ModelTokEnv::canonical(tokenizer), options)
    }

    /// A constrainer for walking arbitrary token sequences of `tokenizer` (benchmarks and
    /// suites, never generation): masks allow every tokenization of the allowed bytes, and
    /// nothing is forced.
    ///
    /// # Errors
    ///
    /// [`ConstraintError::Tokenizer`] if llguidance rejects the tokenizer.
    pub fn any_tokenization(
        tokenizer: Arc<dyn Tokenizer>,
        options: &CompileOptions,
    ) -> Result<Self, ConstraintError> {
        Self::over(ModelTokEnv::any_tokenization(tokenizer), options)
    }

    fn over(tok_env: TokEnv, options: &CompileOptions) -> Result<Self, ConstraintError> {
        let mut factory = ParserFactory::new(
            &tok_env,
            llguidance::toktrie::InferenceCapabilities {
                // Forcing tokens needs the model's canonical tokenization.
                ff_tokens: tok_env.tokenize_is_canonical(),
                ..Default::default()
            },
            &SlicedBiasComputer::general_slices(),
        )
        .map_err(|e| ConstraintError::Tokenizer {
            message: e.to_string(),
        })?;
        factory.quiet();
        *factory.limits_mut() = options.limits.clone();
        Ok(Self {
            factory: Arc::new(factory),
            tok_env,
        })
    }

    /// `text` in the tokenizer's tokens.
    #[must_use]
    pub fn tokenize(&self, text: &[u8]) -> Vec<TokenId> {
        self.tok_env.tokenize_bytes(text)
    }

    /// Compiles `spec`.
    ///
    /// # Errors
    ///
    /// [`ConstraintError::Unsupported`] naming the keywords the grammar cannot enforce (unless
    /// `relax`), or [`ConstraintError::Invalid`].
    pub fn compile(
        &self,
        spec: &ConstraintSpec,
        options: &CompileOptions,
    ) -> Result<Compiled, ConstraintError> {
        let start = Instant::now();
        check_size(spec, options)?;
        let grammar = match spec {
            ConstraintSpec::JsonSchema(schema) => {
                // llguidance resolves references recursively: bound them first.
                proviso_json::refs::check_limits(schema, &options.schema_limits)?;
                let mut schema = strip_extensions(schema);
                if !schema.is_object() {
                    // `true`/`false` schemas: wrap so that options can be attached.
                    schema = match schema {
                        Value::Bool(true) => serde_json::json!({}),
                        _ => serde_json::json!({"not": {}}),
                    };
                }
                let json_options = match options.max_json_whitespace {
                    None => JsonCompileOptions {
                        whitespace_flexible: false,
                        item_separator: ", ".into(),
                        key_separator: ": ".into(),
                        lenient: options.relax,
                        ..JsonCompileOptions::default()
                    },
                    Some(n) => JsonCompileOptions {
                        whitespace_pattern: Some(format!(r"[\x20\x0A\x0D\x09]{{1,{}}}", n.max(1))),
                        lenient: options.relax,
                        ..JsonCompileOptions::default()
                    },
                };
                json_options.apply_to(&mut schema);
                TopLevelGrammar::from_json_schema(schema)
            }
            ConstraintSpec::Lark(lark) => {
                // `%json {...}` embeds a schema, which llguidance resolves recursively like
                // any other: the same bounds apply, before it recurses.
                for schema in embedded_schemas(lark)? {
                    proviso_json::refs::check_limits(&schema, &options.schema_limits)?;
                }
                TopLevelGrammar::from_lark(lark.clone())
            }
            ConstraintSpec::Regex(regex) => TopLevelGrammar::from_regex(regex),
            ConstraintSpec::Choice(choices) => {
                if choices.is_empty() {
                    return Err(ConstraintError::Invalid {
                        message: "an empty choice list matches nothing".into(),
                    });
                }
                let alternatives: Vec<String> = choices
                    .iter()
                    .map(|c| serde_json::to_string(c).unwrap_or_default())
                    .collect();
                TopLevelGrammar::from_lark(format!("start: {}\n", alternatives.join(" | ")))
            }
        };
        // The limits are per compile, so one constrainer serves callers with different bounds.
        let parser = self.factory.create_parser_from_init_ext(
            llguidance::api::GrammarInit::Serialized(grammar),
            llguidance::Logger::new(0, 0),
            llguidance::toktrie::InferenceCapabilities {
                ff_tokens: self.tok_env.tokenize_is_canonical(),
                ..Default::default()
            },
            options.limits.clone(),
        );
        let mut matcher = Matcher::new(parser);
        if let Some(error) = matcher.get_error() {
            return Err(classify(&error));
        }
        // Some grammars compile but fail on their first step (a row over llguidance's item
        // limit, a schema with no way to start): found here, they are the request's fault
        // and refused before generation, instead of failing a worker mid-request.
        let mut probe = matcher.clone();
        if let Err(e) = probe.compute_mask() {
            return Err(classify(&e.to_string()));
        }
        let verified_only = if options.relax {
            matcher
                .grammar_warnings()
                .iter()
                .flat_map(|w| unimplemented_keys(w).unwrap_or_else(|| vec![w.clone()]))
                .collect()
        } else {
            Vec::new()
        };
        Ok(Compiled {
            matcher,
            verified_only,
            compile_time: start.elapsed(),
        })
    }
}

/// A constraint that judges finished text, independent of any model: compiled over a
/// byte-level tokenizer, so text from elsewhere (an upstream server's output) is held to the
/// same grammar, by the same engine, as the local decoder enforces token by token.
#[derive(Clone)]
pub struct TextChecker {
    compiled: Compiled,
}

impl std::fmt::Debug for TextChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextChecker").finish_non_exhaustive()
    }
}

impl TextChecker {
    /// Compiles `spec` for checking text.
    ///
    /// # Errors
    ///
    /// [`ConstraintError`] as [`Constrainer::compile`] gives it.
    pub fn new(spec: &ConstraintSpec, options: &CompileOptions) -> Result<Self, ConstraintError> {
        // The byte-level tokenizer and its parser factory are the same for every check:
        // built once. Limits are passed per compile, so `options` still apply.
        static BYTES: std::sync::OnceLock<Result<Constrainer, ConstraintError>> =
            std::sync::OnceLock::new();
        let constrainer = BYTES
            .get_or_init(|| {
                Constrainer::over(
                    llguidance::toktrie::ApproximateTokEnv::single_byte_env(),
                    &CompileOptions::default(),
                )
            })
            .as_ref()
            .map_err(Clone::clone)?;
        Ok(Self {
            compiled: constrainer.compile(spec, options)?,
        })
    }

    /// Whether `text`, whole, is in the constraint's language; `Err` gives the byte offset
    /// where it leaves the grammar (the text's length when it stops short of an end).
    ///
    /// # Errors
    ///
    /// The offset of the first byte the grammar does not allow.
    pub fn check(&self, text: &str) -> Result<(), usize> {
        let mut matcher = self.compiled.matcher();
        // One token per byte: the single-byte vocabulary numbers each byte as itself.
        let tokens: Vec<u32> = text.bytes().map(u32::from).collect();
        let valid = matcher.validate_tokens(&tokens).map_err(|_| 0usize)?;
        if valid < tokens.len() {
            return Err(valid);
        }
        matcher.consume_tokens(&tokens).map_err(|_| tokens.len())?;
        match matcher.is_accepting() {
            Ok(true) => Ok(()),
            _ => Err(tokens.len()),
        }
    }
}

/// Refuses a constraint whose size alone would make compiling slow, before any work starts.
fn check_size(spec: &ConstraintSpec, options: &CompileOptions) -> Result<(), ConstraintError> {
    let too_large = |what, max, found| ConstraintError::TooLarge { what, max, found };
    let bytes = match spec {
        ConstraintSpec::JsonSchema(_) => return Ok(()),
        ConstraintSpec::Lark(text) => {
            let rules = text.lines().filter(|line| defines_rule(line)).count();
            if rules > options.max_lark_rules {
                return Err(too_large(
                    "the grammar's rules and terminals",
                    options.max_lark_rules,
                    rules,
                ));
            }
            text.len()
        }
        ConstraintSpec::Regex(text) => text.len(),
        ConstraintSpec::Choice(choices) => {
            if choices.len() > options.max_choices {
                return Err(too_large(
                    "the choice list",
                    options.max_choices,
                    choices.len(),
                ));
            }
            choices.iter().map(String::len).sum()
        }
    };
    if bytes > options.max_grammar_bytes {
        return Err(too_large(
            "the grammar (in bytes)",
            options.max_grammar_bytes,
            bytes,
        ));
    }
    Ok(())
}

/// Whether a Lark line starts a rule or terminal definition (`name:`, `?name:`, `!name:`,
/// `NAME.2:`), as opposed to an alternative (`| ...`), a directive or a comment.
fn defines_rule(line: &str) -> bool {
    let line = line.trim_start();
    let line = line.strip_prefix(['?', '!']).unwrap_or(line);
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(line.len());
    if name_end == 0 || line.starts_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    let rest = line[name_end..].trim_start();
    // A priority (`.2`, `.-1`) may stand between the name and the colon.
    let rest = match rest.strip_prefix('.') {
        Some(priority) => priority
            .trim_start_matches(|c: char| c == '-' || c.is_ascii_digit())
            .trim_start(),
        None => rest,
    };
    rest.starts_with(':')
}

/// The schemas a Lark grammar embeds with `%json { ... }`, parsed (serde_json's own depth
/// limit bounds the parse).
fn embedded_schemas(lark: &str) -> Result<Vec<Value>, ConstraintError> {
    let mut schemas = Vec::new();
    for (at, _) in lark.match_indices("%json") {
        let rest = lark[at + "%json".len()..].trim_start();
        if !rest.starts_with('{') {
            continue;
        }
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        match values.next() {
            Some(Ok(schema)) => schemas.push(schema),
            Some(Err(e)) => {
                return Err(ConstraintError::Invalid {
                    message: format!("the schema after `%json` is not JSON: {e}"),
                })
            }
            None => {}
        }
    }
    Ok(schemas)
}

/// Drops proviso's own `x-proviso` declaration (and other `x-` extensions) at the root: they
/// are instructions for the gates, not constraints on the text, and other grammar compilers
/// (llama.cpp's, for one) do not know them.
#[must_use]
pub fn strip_extensions(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with("x-"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn classify(error: &str) -> ConstraintError {
    let unsupported = |keyword: String| ConstraintError::Unsupported {
        keywords: vec![keyword],
    };
    if let Some(keywords) = unimplemented_keys(error) {
        return ConstraintError::Unsupported { keywords };
    }
    if let Some(rest) = error.split("Unknown format: ").nth(1) {
        let name = rest.split_whitespace().next().unwrap_or("");
        return unsupported(format!("format:{name}"));
    }
    // Keywords llguidance understands but can enforce only in some shapes.
    for (needle, keyword) in [
        ("oneOf constraints are not supported", "oneOf"),
        (
            "min/maxProperties only supported",
            "minProperties/maxProperties",
        ),
        ("lookarounds not supported", "pattern:lookaround"),
        ("patternProperty regexes", "patternProperties:overlapping"),
        (
            "circular references with sibling keys",
            "$ref:with-siblings",
        ),
    ] {
        if error.contains(needle) {
            return unsupported(keyword.to_owned());
        }
    }
    let message = error.lines().next().unwrap_or(error);
    ConstraintError::Invalid {
        message: message.to_owned(),
    }
}

/// Reads llguidance's `Unimplemented keys: ["not", "uniqueItems"]`.
fn unimplemented_keys(message: &str) -> Option<Vec<String>> {
    let start = message.find("Unimplemented keys: ")? + "Unimplemented keys: ".len();
    let rest = &message[start..];
    let end = rest.find(']')? + 1;
    serde_json::from_str(&rest[..end]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_schemas_a_lark_grammar_embeds() {
        let lark = "start: a | b\na: %json {\"type\": \"integer\"}\nb: %json{\"$ref\": \"#\"}\n";
        assert_eq!(
            embedded_schemas(lark).unwrap(),
            vec![
                serde_json::json!({"type": "integer"}),
                serde_json::json!({"$ref": "#"})
            ]
        );
        assert!(embedded_schemas("start: %json {\"type\": ").is_err());
        // A `%json` that is not followed by an object is llguidance's to judge.
        assert!(embedded_schemas("// %json mentioned\nstart: \"x\"")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn oversized_constraints_are_refused_before_compiling() {
        let options = CompileOptions::default();
        let many = ConstraintSpec::Choice((0..5_000).map(|i| i.to_string()).collect());
        assert!(matches!(
            check_size(&many, &options),
            Err(ConstraintError::TooLarge { found: 5_000, .. })
        ));
        let long = ConstraintSpec::Regex("a".repeat(600 * 1024));
        assert!(matches!(
            check_size(&long, &options),
            Err(ConstraintError::TooLarge { .. })
        ));
        assert!(check_size(&ConstraintSpec::Regex("a+".into()), &options).is_ok());
        let mut chained = String::from("start: r0\n");
        for i in 0..2_500 {
            chained.push_str(&format!("r{i}: r{} | \"b\"\n", i + 1));
        }
        assert!(matches!(
            check_size(&ConstraintSpec::Lark(chained), &options),
            Err(ConstraintError::TooLarge { found: 2_501, .. })
        ));
    }

    #[test]
    fn rule_definitions_are_told_from_other_lines() {
        for line in [
            "start: a",
            "?expr: a | b",
            "!kw : \"x\"",
            "NUMBER.2: /[0-9]+/",
            "  item.-1: x",
        ] {
            assert!(defines_rule(line), "{line}");
        }
        for line in [
            "    | b",
            "%import common.WS",
            "// a: comment",
            "%json {\"a\": 1}",
            "",
        ] {
            assert!(!defines_rule(line), "{line}");
        }
    }

    #[test]
    fn a_text_checker_holds_text_to_a_lark_grammar() {
        let checker = TextChecker::new(
            &ConstraintSpec::Lark("start: \"SELECT \" COL \" FROM t\"\nCOL: /[a-z]+/\n".into()),
            &CompileOptions::default(),
        )
        .unwrap();
        assert_eq!(checker.check("SELECT name FROM t"), Ok(()));
        assert_eq!(checker.check("DROP TABLE users; --"), Err(0));
        assert_eq!(checker.check("SELECT name"), Err(11));
        assert!(checker.check("SELECT name FROM t; DROP").is_err());
    }

    #[test]
    fn reads_unimplemented_keys() {
        assert_eq!(
            unimplemented_keys("error: Unimplemented keys: [\"not\", \"uniqueItems\"] at x"),
            Some(vec!["not".to_owned(), "uniqueItems".to_owned()])
        );
        assert_eq!(unimplemented_keys("other"), None);
    }
}
