//! A contract and the pipeline that applies it.
//!
//! ```text
//! transport/stop reason → strict JSON parse → JSON Schema 2020-12 → application rules → evidence
//! ```
//!
//! Each gate runs only if every gate before it passed, and the first failure ends the check
//! with a [`Rejection`] that names it. Nothing here has a side effect; the verdict is data.

use std::collections::BTreeMap;
use std::sync::Arc;

use proviso_json::ParseOptions;
use serde_json::Value;

use crate::calls;
use crate::code::Code;
use crate::error::ContractError;
use crate::evidence::{EvidencePolicy, SourceStore};
use crate::intent::{self, Intent, IntentClass, ToolCall};
use crate::question::Question;
use crate::rejection::{Gate, Location, Rejection, Violation};
use crate::rules::{self, Rule};
use crate::schema::{CompiledSchema, SchemaOptions};
use crate::transport::{self, Payload, TransportedArguments};
use crate::verdict::{GateStatus, Progress, Verdict};

/// What an accepted output becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputKind {
    /// The whole output is the final answer; the contract's declaration is the explicit
    /// final-answer intent.
    Answer,
    /// The output is a proviso intent envelope whose `intent` field names the intent.
    Envelope,
}

/// A tool the contract accepts calls to.
#[derive(Debug, Clone)]
pub struct DeclaredTool {
    class: IntentClass,
    parameters: Option<CompiledSchema>,
}

impl DeclaredTool {
    /// A tool of `class` whose arguments must satisfy `parameters` (if given).
    #[must_use]
    pub fn new(class: IntentClass, parameters: Option<CompiledSchema>) -> Self {
        Self { class, parameters }
    }
}

/// Which versions of a versioned contract are understood.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VersionCheck {
    /// Pointer to the version label in the output.
    pub pointer: String,
    /// The labels this contract understands. Anything else is rejected, never guessed.
    pub known: Vec<String>,
}

/// A model-output contract: one schema plus what a schema cannot say.
#[derive(Debug, Clone)]
pub struct Contract {
    id: Option<String>,
    kind: OutputKind,
    schema: CompiledSchema,
    version: Option<VersionCheck>,
    rules: Vec<Arc<dyn Rule>>,
    evidence: Option<EvidencePolicy>,
    sources: Option<Arc<SourceStore>>,
    tools: BTreeMap<String, DeclaredTool>,
    parse: ParseOptions,
}

/// Builds a [`Contract`].
#[derive(Debug, Clone)]
pub struct ContractBuilder {
    id: Option<String>,
    kind: OutputKind,
    schema: Value,
    schema_options: SchemaOptions,
    version: Option<VersionCheck>,
    rules: Vec<Arc<dyn Rule>>,
    evidence: Option<EvidencePolicy>,
    sources: Option<Arc<SourceStore>>,
    skip_evidence: bool,
    tools: BTreeMap<String, (IntentClass, Option<Value>)>,
    parse: ParseOptions,
}

impl ContractBuilder {
    /// Sets an identifier used in messages.
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets what an accepted output becomes.
    #[must_use]
    pub fn kind(mut self, kind: OutputKind) -> Self {
        self.kind = kind;
        self
    }

    /// Sets schema compilation options.
    #[must_use]
    pub fn schema_options(mut self, options: SchemaOptions) -> Self {
        self.schema_options = options;
        self
    }

    /// Sets parser bounds.
    #[must_use]
    pub fn parse_options(mut self, options: ParseOptions) -> Self {
        self.parse = options;
        self
    }

    /// Rejects outputs whose version label (at `pointer`) is not one of `known`.
    #[must_use]
    pub fn versions(mut self, pointer: &str, known: &[&str]) -> Self {
        self.version = Some(VersionCheck {
            pointer: pointer.to_owned(),
            known: known.iter().map(|s| (*s).to_owned()).collect(),
        });
        self
    }

    /// Adds an application rule.
    #[must_use]
    pub fn rule(mut self, rule: impl Rule + 'static) -> Self {
        self.rules.push(Arc::new(rule));
        self
    }

    /// Sets the evidence policy.
    #[must_use]
    pub fn evidence(mut self, policy: EvidencePolicy) -> Self {
        self.evidence = Some(policy);
        self
    }

    /// Supplies the source store the evidence gate checks against.
    #[must_use]
    pub fn sources(mut self, store: Arc<SourceStore>) -> Self {
        self.sources = Some(store);
        self
    }

    /// Builds the contract without a source store even though it declares evidence. The
    /// evidence gate is then reported as `skipped` in every verdict, never as passed.
    #[must_use]
    pub fn skip_evidence(mut self) -> Self {
        self.skip_evidence = true;
        self
    }

    /// Declares a tool whose calls this contract accepts.
    #[must_use]
    pub fn tool(mut self, name: &str, class: IntentClass, parameters: Option<Value>) -> Self {
        self.tools.insert(name.to_owned(), (class, parameters));
        self
    }

    /// Compiles the contract.
    ///
    /// # Errors
    ///
    /// [`ContractError`] for an invalid schema, an unknown keyword, or evidence without
    /// sources (unless [`ContractBuilder::skip_evidence`]).
    pub fn build(self) -> Result<Contract, ContractError> {
        if self.evidence.is_some() && self.sources.is_none() && !self.skip_evidence {
            return Err(ContractError::MissingSources);
        }
        let schema = CompiledSchema::compile(&self.schema, &self.schema_options)?;
        let tools = self
            .tools
            .into_iter()
            .map(|(name, (class, parameters))| {
                let parameters = parameters
                    .map(|p| CompiledSchema::compile(&p, &self.schema_options))
                    .transpose()?;
                Ok((name, DeclaredTool { class, parameters }))
            })
            .collect::<Result<_, ContractError>>()?;
        Ok(Contract {
            id: self.id,
            kind: self.kind,
            schema,
            version: self.version,
            rules: self.rules,
            evidence: self.evidence,
            sources: self.sources,
            tools,
            parse: self.parse,
        })
    }
}

/// A model output to check.
#[derive(Debug, Clone, Copy)]
pub enum Output<'a> {
    /// The model's text as it came back.
    Text(&'a [u8]),
    /// A provider response envelope (an OpenAI-style chat completion, or a message) as JSON.
    Envelope(&'a [u8]),
}

impl Contract {
    /// Starts a contract from a schema.
    #[must_use]
    pub fn builder(schema: Value) -> ContractBuilder {
        ContractBuilder {
            id: None,
            kind: OutputKind::Answer,
            schema,
            schema_options: SchemaOptions::default(),
            version: None,
            rules: Vec::new(),
            evidence: None,
            sources: None,
            skip_evidence: false,
            tools: BTreeMap::new(),
            parse: ParseOptions::default(),
        }
    }

    /// Starts a contract from a schema document that may carry an `x-proviso` declaration:
    ///
    /// ```json
    /// {"x-proviso": {
    ///    "id": "ka-answer-v1",
    ///    "output": "answer" | "envelope",
    ///    "versions": {"pointer": "/schema_version", "known": ["ka-answer-v1"]},
    ///    "rules": [{"rule": "ordered", "each": "/citations", "lower": "/line_start",
    ///               "upper": "/line_end", "code": "reversed_line_range"}],
    ///    "evidence": {"citations": "/citations", "units": ["yuan"],
    ///                 "claims": [{"text": "/answer"}, {"amount": "/amount_yuan", "unit": "yuan"}]},
    ///    "tools": {"get_arm": {"class": "read", "parameters": {...}}}
    /// }}
    /// ```
    ///
    /// # Errors
    ///
    /// [`ContractError::InvalidDeclaration`] for a malformed or unknown part of the
    /// declaration: nothing in it is ignored.
    pub fn from_document(document: &Value) -> Result<ContractBuilder, ContractError> {
        let mut builder = Self::builder(document.clone());
        let Some(declaration) = document.get("x-proviso") else {
            return Ok(builder);
        };
        let root = "/x-proviso";
        let Some(declaration) = declaration.as_object() else {
            return Err(ContractError::declaration(
                root,
                "`x-proviso` must be an object",
            ));
        };
        for (key, value) in declaration {
            let path = format!("{root}/{key}");
            match key.as_str() {
                "id" => {
                    builder.id = Some(
                        value
                            .as_str()
                            .ok_or_else(|| {
                                ContractError::declaration(&path, "`id` must be a string")
                            })?
                            .to_owned(),
                    );
                }
                "output" => {
                    builder.kind = match value.as_str() {
                        Some("answer") => OutputKind::Answer,
                        Some("envelope") => OutputKind::Envelope,
                        _ => {
                            return Err(ContractError::declaration(
                                &path,
                                "`output` is `answer` or `envelope`",
                            ))
                        }
                    };
                }
                "versions" => {
                    let pointer = value.get("pointer").and_then(Value::as_str);
                    let known = value.get("known").and_then(Value::as_array).and_then(|k| {
                        k.iter()
                            .map(|v| v.as_str().map(str::to_owned))
                            .collect::<Option<Vec<_>>>()
                    });
                    let (Some(pointer), Some(known)) = (pointer, known) else {
                        return Err(ContractError::declaration(
                            &path,
                            "`versions` needs `pointer` and `known`, an array of labels",
                        ));
                    };
                    builder.version = Some(VersionCheck {
                        pointer: pointer.to_owned(),
                        known,
                    });
                }
                "rules" => builder.rules.extend(rules::from_declaration(value)?),
                "evidence" => builder.evidence = Some(EvidencePolicy::from_declaration(value)?),
                "tools" => {
                    let Some(tools) = value.as_object() else {
                        return Err(ContractError::declaration(
                            &path,
                            "`tools` must be an object",
                        ));
                    };
                    for (name, tool) in tools {
                        let class = tool
                            .get("class")
                            .and_then(Value::as_str)
                            .and_then(IntentClass::parse)
                            .ok_or_else(|| {
                                ContractError::declaration(
                                    &format!("{path}/{name}/class"),
                                    "`class` is read, compute, mutate or submit",
                                )
                            })?;
                        builder
                            .tools
                            .insert(name.clone(), (class, tool.get("parameters").cloned()));
                    }
                }
                other => {
                    return Err(ContractError::declaration(
                        &path,
                        format!("unknown declaration `{other}`"),
                    ))
                }
            }
        }
        Ok(builder)
    }

    /// The contract's identifier, if it has one.
    #[must_use]
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The compiled schema.
    #[must_use]
    pub fn schema(&self) -> &CompiledSchema {
        &self.schema
    }

    /// Whether this contract checks evidence.
    #[must_use]
    pub fn checks_evidence(&self) -> bool {
        self.evidence.is_some()
    }

    /// Where the answer's citations and claims are, when the contract checks evidence.
    #[must_use]
    pub fn evidence_policy(&self) -> Option<&EvidencePolicy> {
        self.evidence.as_ref()
    }

    /// This contract checking evidence against `store` instead (a run's store, grown by
    /// what its tools returned).
    #[must_use]
    pub fn with_sources(&self, store: Arc<SourceStore>) -> Self {
        let mut contract = self.clone();
        contract.sources = Some(store);
        contract
    }

    /// The source store the evidence gate checks against, if one was supplied.
    #[must_use]
    pub fn source_store(&self) -> Option<&Arc<SourceStore>> {
        self.sources.as_ref()
    }

    /// Checks raw model text.
    #[must_use]
    pub fn check_text(&self, text: &[u8]) -> Verdict {
        self.check(Output::Text(text))
    }

    /// Checks a provider response envelope.
    #[must_use]
    pub fn check_envelope(&self, envelope: &[u8]) -> Verdict {
        self.check(Output::Envelope(envelope))
    }

    /// Runs every gate on `output`.
    #[must_use]
    pub fn check(&self, output: Output<'_>) -> Verdict {
        self.check_with(output, None)
    }

    /// Runs every gate on `output` as the answer to `question`: the evidence gate then also
    /// applies the answer-relevance rule (code `off_question`: the cited lines are about
    /// the question's subject, the answer states its qualifiers and the kind of fact it
    /// asks for), and admits a superseded version when the question asks about one and the
    /// answer names it.
    #[must_use]
    pub fn check_answer(&self, output: Output<'_>, question: &Question) -> Verdict {
        self.check_with(output, Some(question))
    }

    fn check_with(&self, output: Output<'_>, question: Option<&Question>) -> Verdict {
        let mut progress = Progress::new();
        // Gate 1: transport.
        let payload = match output {
            Output::Text(text) => {
                progress.mark(Gate::Transport, GateStatus::NotApplicable);
                return self.check_text_payload(text, progress, question);
            }
            Output::Envelope(bytes) => {
                let envelope = match proviso_json::parse(bytes, &self.parse) {
                    Ok(envelope) => envelope,
                    Err(e) => {
                        return progress.reject(Rejection::new(
                            Gate::Transport,
                            Code::MalformedEnvelope,
                            format!("the envelope is not strict JSON: {e}"),
                            Location::at(e.position()),
                        ))
                    }
                };
                match transport::open_envelope(&envelope) {
                    Ok(payload) => payload,
                    Err(rejection) => {
                        return progress.reject(rejection.with_text_position(bytes));
                    }
                }
            }
        };
        progress.mark(Gate::Transport, GateStatus::Passed);
        self.check_payload(payload, progress, question)
    }

    fn check_payload(
        &self,
        payload: Payload,
        mut progress: Progress,
        question: Option<&Question>,
    ) -> Verdict {
        let text = payload
            .text
            .filter(|t| !t.bytes().all(|b| b.is_ascii_whitespace()));
        if payload.tool_calls.is_empty() {
            let Some(text) = text else {
                return progress.reject(Rejection::new(
                    Gate::Parse,
                    Code::EmptyInput,
                    "the response carries neither text nor tool calls",
                    Location::default(),
                ));
            };
            return self.check_text_payload(text.as_bytes(), progress, question);
        }
        // Native tool calls: each call's arguments pass parse and schema.
        let mut calls = Vec::with_capacity(payload.tool_calls.len());
        let mut arguments = Vec::with_capacity(payload.tool_calls.len());
        for call in &payload.tool_calls {
            let value = match &call.arguments {
                TransportedArguments::Value(v) => v.clone(),
                TransportedArguments::Text(text) => {
                    match proviso_json::parse(text.as_bytes(), &self.parse) {
                        Ok(v) => v,
                        Err(e) => {
                            return progress.reject(
                                Rejection::from_parse_error(&e).with_instance_path(&format!(
                                    "{}/function/arguments",
                                    call.pointer
                                )),
                            )
                        }
                    }
                }
            };
            arguments.push(value);
        }
        progress.mark(Gate::Parse, GateStatus::Passed);
        for (call, value) in payload.tool_calls.iter().zip(arguments) {
            match self.tool_call(call.id.clone(), &call.name, value, &call.pointer) {
                Ok(c) => calls.push(c),
                Err(r) => return progress.reject(r),
            }
        }
        progress.mark(Gate::Schema, GateStatus::Passed);
        progress.mark(Gate::Application, GateStatus::NotApplicable);
        progress.mark(Gate::Evidence, GateStatus::NotApplicable);
        // Priority rule 3: text beside tool calls never becomes an answer; an abort or a
        // clarification in the text outranks the calls.
        let mut candidates = vec![Intent::ToolRequest {
            calls,
            rationale: None,
        }];
        if let Some(text) = text {
            if self.kind == OutputKind::Envelope {
                if let Ok(value) = proviso_json::parse(text.as_bytes(), &self.parse) {
                    if let Ok(intent) = intent::from_envelope(&value, &|n| self.class_of(n)) {
                        candidates.push(intent);
                    }
                }
            }
            if candidates.len() == 1 {
                candidates.push(Intent::FinalAnswer {
                    answer: Arc::new(Value::String(text)),
                    reasoning: None,
                });
            }
        }
        match intent::resolve(candidates) {
            Some(intent) => progress.accept(intent),
            None => progress.reject(Rejection::new(
                Gate::Application,
                Code::MissingIntent,
                "no intent",
                Location::default(),
            )),
        }
    }

    fn class_of(&self, name: &str) -> Option<IntentClass> {
        self.tools.get(name).map(|t| t.class)
    }

    fn tool_call(
        &self,
        id: Option<String>,
        name: &str,
        arguments: Value,
        pointer: &str,
    ) -> Result<ToolCall, Rejection> {
        let Some(tool) = self.tools.get(name) else {
            let known: Vec<&str> = self.tools.keys().map(String::as_str).collect();
            let v = calls::unknown_tool(name, &known, Location::instance(pointer));
            return Err(Rejection::new(Gate::Schema, v.code, v.message, v.location));
        };
        let at = format!("{pointer}/arguments");
        let arguments = calls::checked_arguments(name, tool.parameters.as_ref(), arguments, &at)
            .map_err(|violations| Rejection::from_violations(Gate::Schema, violations))?;
        Ok(ToolCall::new(id, name.to_owned(), arguments, tool.class))
    }

    fn check_text_payload(
        &self,
        text: &[u8],
        mut progress: Progress,
        question: Option<&Question>,
    ) -> Verdict {
        // Gate 2: parse.
        let value = match proviso_json::parse(text, &self.parse) {
            Ok(value) => value,
            Err(e) => return progress.reject(Rejection::from_parse_error(&e)),
        };
        progress.mark(Gate::Parse, GateStatus::Passed);
        let locate = |violation: Violation| {
            let location = violation.location.clone().with_text_position(text);
            Violation {
                location,
                ..violation
            }
        };
        // Gate 3: schema, starting with the version label so that an unknown version is
        // named as such rather than as a pile of mismatches.
        if let Some(version) = &self.version {
            let label = value.pointer(&version.pointer);
            if !label
                .and_then(Value::as_str)
                .is_some_and(|l| version.known.iter().any(|k| k == l))
            {
                let shown = label.map_or_else(|| "nothing".to_owned(), Value::to_string);
                return progress.reject(Rejection::from_violations(
                    Gate::Schema,
                    vec![locate(Violation {
                        code: Code::UnknownSchemaVersion,
                        keyword: None,
                        message: format!(
                            "{} is {shown}; this contract understands {}; an unknown version is rejected, never guessed",
                            version.pointer,
                            version.known.join(", ")
                        ),
                        location: Location::instance(version.pointer.clone()),
                    })],
                ));
            }
        }
        if !self.schema.is_valid(&value) {
            let violations = self
                .schema
                .violations(&value)
                .into_iter()
                .map(locate)
                .collect();
            return progress.reject(Rejection::from_violations(Gate::Schema, violations));
        }
        // Intents of an envelope are read before the rules, so that a call to an undeclared
        // tool is a schema-gate failure like any other unknown name.
        let intent = match self.kind {
            OutputKind::Answer => Intent::FinalAnswer {
                answer: Arc::new(value.clone()),
                reasoning: None,
            },
            OutputKind::Envelope => match intent::from_envelope(&value, &|n| self.class_of(n)) {
                Ok(intent) => intent,
                Err(v) => {
                    let gate = if v.code == Code::UnknownTool {
                        Gate::Schema
                    } else {
                        Gate::Application
                    };
                    return progress.reject(Rejection::from_violations(gate, vec![locate(v)]));
                }
            },
        };
        if let Intent::ToolRequest { calls, .. } = &intent {
            for (i, call) in calls.iter().enumerate() {
                let base = if value.get("calls").is_some() {
                    format!("/calls/{i}")
                } else {
                    String::new()
                };
                if let Err(r) = self.tool_call(
                    None,
                    call.name(),
                    Value::Object(call.arguments().clone()),
                    &base,
                ) {
                    return progress.reject(r.with_text_position(text));
                }
            }
        }
        progress.mark(Gate::Schema, GateStatus::Passed);
        // Gate 4: application rules.
        if self.rules.is_empty() {
            progress.mark(Gate::Application, GateStatus::NotApplicable);
        } else {
            let mut violations = Vec::new();
            for rule in &self.rules {
                rule.check(&value, &mut violations);
            }
            if !violations.is_empty() {
                let violations = violations.into_iter().map(locate).collect();
                return progress.reject(Rejection::from_violations(Gate::Application, violations));
            }
            progress.mark(Gate::Application, GateStatus::Passed);
        }
        // Gate 5: evidence, on the answer (the whole output, or an envelope's `answer`).
        match (&self.evidence, &self.sources) {
            (None, _) => progress.mark(Gate::Evidence, GateStatus::NotApplicable),
            (Some(_), None) => progress.mark(Gate::Evidence, GateStatus::Skipped),
            (Some(policy), Some(store)) => {
                let (answer, prefix) = match (&intent, self.kind) {
                    (Intent::FinalAnswer { answer, .. }, OutputKind::Envelope) => {
                        (Some(answer.as_ref()), "/answer")
                    }
                    (Intent::FinalAnswer { answer, .. }, _) => (Some(answer.as_ref()), ""),
                    _ => (None, ""),
                };
                match answer {
                    None => progress.mark(Gate::Evidence, GateStatus::NotApplicable),
                    Some(answer) => {
                        let violations = policy.check_for(answer, store, question);
                        if !violations.is_empty() {
                            let violations = violations
                                .into_iter()
                                .map(|mut v| {
                                    v.location.instance_path =
                                        v.location.instance_path.map(|p| format!("{prefix}{p}"));
                                    locate(v)
                                })
                                .collect();
                            return progress
                                .reject(Rejection::from_violations(Gate::Evidence, violations));
                        }
                        progress.mark(Gate::Evidence, GateStatus::Passed);
                    }
                }
            }
        }
        progress.accept(intent)
    }
}
