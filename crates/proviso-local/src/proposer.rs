//! The local model as a [`Proposer`] for the harness: each step is generated in-process under
//! the call format's grammar, compiled once per grammar.

use proviso_decode::{
    CompileOptions, Compiled, ConstraintSpec, Engine, GenerateOptions, Generator, Sampling, Stats,
};
use proviso_harness::{ProposeRequest, Proposed, Proposer, ProposerError};
use proviso_tools::{CallGrammar, Grammar};

use crate::local::LocalModel;

/// Generates harness steps on a [`LocalModel`].
#[derive(Debug)]
pub struct LocalProposer<'m> {
    model: &'m LocalModel,
    generator: Generator<Box<dyn Engine>>,
    sampling: Sampling,
    compile: CompileOptions,
    /// Compiled grammars, most recent first (an agent alternates between at most a few).
    compiled: Vec<(Grammar, Compiled)>,
    last: Option<Stats>,
    name: String,
}

impl<'m> LocalProposer<'m> {
    /// A proposer over `model` with its own engine: a context of its own
    /// ([`LocalModel::engine`]) or a slot of a batched one ([`proviso_llama::Batcher::slot`]),
    /// so several agents can share forward passes. `compile.relax` decides whether schema
    /// keywords the grammar cannot enforce are refused (the default) or left to the gates.
    #[must_use]
    pub fn new(
        model: &'m LocalModel,
        engine: impl Engine + 'static,
        sampling: Sampling,
        compile: CompileOptions,
    ) -> Self {
        let name = model
            .path()
            .file_stem()
            .map_or_else(|| "local".to_owned(), |s| s.to_string_lossy().into_owned());
        Self {
            generator: Generator::new(Box::new(engine), model.tokenizer()),
            model,
            sampling,
            compile,
            compiled: Vec::new(),
            last: None,
            name,
        }
    }

    /// Compiles `grammar` now (it is otherwise compiled on the first step), so a grammar the
    /// decoder cannot enforce is reported before the run starts.
    ///
    /// # Errors
    ///
    /// [`ProposerError`] with code `unsupported_constraint` or `invalid_constraint`.
    pub fn prepare(&mut self, grammar: &CallGrammar) -> Result<&Compiled, ProposerError> {
        let index = match self
            .compiled
            .iter()
            .position(|(g, _)| *g == grammar.grammar)
        {
            Some(i) => i,
            None => {
                let spec = match &grammar.grammar {
                    Grammar::JsonSchema(schema) => ConstraintSpec::JsonSchema(schema.clone()),
                    Grammar::Lark(lark) => ConstraintSpec::Lark(lark.clone()),
                };
                let compiled =
                    self.model
                        .compile(&spec, &self.compile)
                        .map_err(|e| ProposerError {
                            code: match e {
                                proviso_decode::ConstraintError::Unsupported { .. } => {
                                    "unsupported_constraint"
                                }
                                _ => "invalid_constraint",
                            }
                            .into(),
                            message: e.to_string(),
                        })?;
                self.compiled.truncate(3);
                self.compiled.insert(0, (grammar.grammar.clone(), compiled));
                0
            }
        };
        Ok(&self.compiled[index].1)
    }

    /// Statistics of the last step.
    #[must_use]
    pub fn last_stats(&self) -> Option<&Stats> {
        self.last.as_ref()
    }
}

/// `messages` with the oldest tool result not yet left out replaced by a short note (its
/// call id kept), or `None` when every tool result already is.
fn elide_oldest_result(
    messages: &[proviso_contract::Message],
) -> Option<Vec<proviso_contract::Message>> {
    const NOTE: &str = "elided";
    let (index, parsed) = messages.iter().enumerate().find_map(|(i, m)| {
        if m.role != proviso_contract::Role::Tool {
            return None;
        }
        let parsed = serde_json::from_str::<serde_json::Value>(&m.content).ok();
        let elided = parsed.as_ref().is_some_and(|v| v.get(NOTE).is_some());
        (!elided).then_some((i, parsed))
    })?;
    let call_id = parsed
        .and_then(|v| v.get("call_id").cloned())
        .unwrap_or(serde_json::Value::Null);
    let mut out = messages.to_vec();
    let old = &out[index].content;
    out[index].content = serde_json::json!({
        "call_id": call_id,
        NOTE: format!("an earlier result of {} characters, left out so that the conversation fits the model's context", old.len()),
    })
    .to_string();
    Some(out)
}

impl Proposer for LocalProposer<'_> {
    fn propose(&mut self, request: &ProposeRequest<'_>) -> Result<Proposed, ProposerError> {
        // The harness's transcript is already in the chat template's message type. When it
        // does not fit the context with room for the step, the oldest tool results are left
        // out first (the harness keeps them: what they returned can still be cited).
        let room = self
            .generator
            .engine_mut()
            .capacity()
            .saturating_sub(request.max_tokens.max(1));
        let mut messages = std::borrow::Cow::Borrowed(request.messages);
        let prompt = loop {
            let prompt = self.model.prompt(&messages).map_err(|e| ProposerError {
                code: "prompt_failed".into(),
                message: e.to_string(),
            })?;
            if prompt.len() <= room {
                break prompt;
            }
            match elide_oldest_result(&messages) {
                Some(shorter) => messages = std::borrow::Cow::Owned(shorter),
                // Nothing left to leave out: the generator reports the prompt too long.
                None => break prompt,
            }
        };
        let compiled = self.prepare(request.grammar)?.clone();
        // A rejected greedy step would come back unchanged: retries sample instead, except
        // after a loop, where greedy decoding with penalties against repetition is the
        // better remedy (sampling a small model's loop mostly yields noise).
        let sampling =
            if request.retry > 0 && self.sampling.temperature == 0.0 && !request.against_repetition
            {
                self.sampling
                    .temperature(0.7)
                    .top_p(0.95)
                    .seed(self.sampling.seed.wrapping_add(u64::from(request.retry)))
            } else {
                self.sampling
            };
        let options = GenerateOptions::default()
            .max_tokens(request.max_tokens)
            .sampling(sampling)
            .avoid(request.avoid.to_vec());
        let options = if request.against_repetition {
            options.against_repetition()
        } else {
            options
        };
        let generation = self
            .generator
            .generate(&prompt, Some(&compiled), &options)
            .map_err(|e| ProposerError {
                code: "generation_failed".into(),
                message: e.to_string(),
            })?;
        let proposed = Proposed {
            text: generation.text(),
            finish: generation.stop_reason.finish(),
            input_tokens: prompt.len() as u64,
            output_tokens: generation.tokens.len() as u64,
        };
        self.last = Some(generation.stats);
        Ok(proposed)
    }

    fn model_name(&self) -> &str {
        &self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proviso_contract::{Message, Role};

    #[test]
    fn the_oldest_tool_results_are_left_out_first_and_only_once() {
        let messages = vec![
            Message::system("s"),
            Message::user("q"),
            Message::tool(r#"{"call_id":"c1","outcome":{"lines":["a long result"]}}"#),
            Message::tool(r#"{"call_id":"c2","outcome":{"lines":["another"]}}"#),
        ];
        let once = elide_oldest_result(&messages).unwrap();
        assert!(
            once[2].content.contains("\"elided\""),
            "{}",
            once[2].content
        );
        assert!(once[2].content.contains("\"c1\""));
        assert_eq!(once[3], messages[3]);
        let twice = elide_oldest_result(&once).unwrap();
        assert!(twice[3].content.contains("\"elided\""));
        assert!(elide_oldest_result(&twice).is_none());
        assert!(twice.iter().filter(|m| m.role == Role::Tool).count() == 2);
    }
}
