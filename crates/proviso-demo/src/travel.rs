//! The versioned travel-policy knowledge base: a search tool over every version's lines, a
//! tool that reads a version, and the answer contract whose evidence gate checks each
//! citation against the version in force.

use std::sync::Arc;

use proviso_contract::{Contract, ContractError, IntentClass, SourceStore};
use proviso_harness::{ToolFailure, Toolbox};
use proviso_tools::{ToolError, ToolSpec};
use serde_json::{json, Value};

use crate::index::{TextIndex, VersionedLine};

const MANIFEST: &str = include_str!("../../../corpora/travel-policy/manifest.json");
const FILES: [(&str, &str); 2] = [
    (
        "travel-v1.txt",
        include_str!("../../../corpora/travel-policy/travel-v1.txt"),
    ),
    (
        "travel-v2.txt",
        include_str!("../../../corpora/travel-policy/travel-v2.txt"),
    ),
];

/// The answer contract's schema (with its `x-proviso` evidence declaration).
pub const TRAVEL_ANSWER: &str = include_str!("../contracts/travel-answer.schema.json");

/// One indexed line of one version.
#[derive(Debug, Clone)]
struct Line {
    version: String,
    in_force: bool,
    number: usize,
    text: String,
}

/// The policy versions, their lines indexed.
#[derive(Debug)]
pub struct PolicyBase {
    store: Arc<SourceStore>,
    lines: Vec<Line>,
    index: TextIndex,
    /// Per line, whether the version in force restates it ([`crate::index::restated`]).
    restated: Vec<bool>,
}

impl PolicyBase {
    /// Loads the bundled policy.
    ///
    /// # Errors
    ///
    /// [`ContractError`] if the bundled manifest is inconsistent (a test proves it is not).
    pub fn bundled() -> Result<Self, ContractError> {
        let store = SourceStore::from_manifest(MANIFEST, |file| {
            FILES
                .iter()
                .find(|(name, _)| *name == file)
                .map(|(_, text)| (*text).to_owned())
                .ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("{file} is not bundled"),
                    )
                })
        })?;
        let mut lines = Vec::new();
        for document in store.versions("travel-policy") {
            for (i, text) in document.lines().iter().enumerate() {
                lines.push(Line {
                    version: document.version().to_owned(),
                    in_force: document.in_force(),
                    number: i + 1,
                    text: text.clone(),
                });
            }
        }
        let texts: Vec<String> = lines.iter().map(|l| l.text.clone()).collect();
        let restated =
            crate::index::restated(&lines.iter().map(Self::versioned).collect::<Vec<_>>());
        Ok(Self {
            store: Arc::new(store),
            index: TextIndex::new(&texts),
            lines,
            restated,
        })
    }

    /// A line as the versioned search weighs it.
    fn versioned(line: &Line) -> VersionedLine<'_> {
        VersionedLine {
            source: "travel-policy",
            in_force: line.in_force,
            text: &line.text,
        }
    }

    /// The source store the evidence gate checks against.
    #[must_use]
    pub fn store(&self) -> &Arc<SourceStore> {
        &self.store
    }

    /// Re-ranks every later search's best lines with `rerank` ([`TextIndex::search_where`]).
    pub fn rerank_with(&self, rerank: std::sync::Arc<dyn crate::index::Rerank>) {
        self.index
            .rerank_sources(&self.store, rerank, |i| self.lines[i].text.as_str());
    }

    /// Ranked lines for `query` ([`TextIndex::search_versions`]: the version in force
    /// first, unless the query asks about an earlier one).
    #[must_use]
    pub fn search(&self, query: &str, limit: usize) -> Value {
        let hits: Vec<Value> = self
            .index
            .search_versions(query, limit, &self.store, &self.restated, |i| {
                Self::versioned(&self.lines[i])
            })
            .into_iter()
            .map(|h| {
                let l = &self.lines[h.index];
                json!({"source_id": "travel-policy", "version": l.version, "in_force": l.in_force,
                    "line": l.number, "text": l.text})
            })
            .collect();
        json!({"query": query, "results": hits})
    }

    /// Every numbered line of `version` (the one in force when `None`).
    ///
    /// # Errors
    ///
    /// `not_found` for an unknown version.
    pub fn read(&self, version: Option<&str>) -> Result<Value, ToolFailure> {
        let document = self
            .store
            .versions("travel-policy")
            .iter()
            .find(|d| version.map_or(d.in_force(), |v| d.version() == v))
            .ok_or_else(|| ToolFailure::new("not_found", "no such policy version"))?;
        Ok(document.read_result())
    }

    /// The answer contract, with the evidence gate bound to this base.
    ///
    /// # Errors
    ///
    /// [`ContractError`] if the bundled schema does not compile (a test proves it does).
    pub fn answer_contract(&self) -> Result<Contract, ContractError> {
        let document: Value =
            serde_json::from_str(TRAVEL_ANSWER).map_err(|e| ContractError::InvalidSources {
                message: e.to_string(),
            })?;
        Contract::from_document(&document)?
            .sources(self.store.clone())
            .build()
    }
}

/// The answer schema for the grammar: the contract's schema without its `x-proviso` block.
#[must_use]
pub fn answer_schema() -> Value {
    crate::without_extensions(TRAVEL_ANSWER)
}

/// The two tools over `base`: `search_policy` and `read_policy`.
///
/// # Errors
///
/// [`ToolError`] if a declaration is invalid (never for these).
pub fn toolbox(base: Arc<PolicyBase>) -> Result<Toolbox, ToolError> {
    let search = base.clone();
    Toolbox::new()
        .bind(
            ToolSpec::new(
                "search_policy",
                "Full-text search over every version of the travel policy. Returns matching lines with their version, line number and whether that version is in force.",
                IntentClass::Read,
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "minLength": 2, "maxLength": 200}},
                    "required": ["query"], "additionalProperties": false}),
            ),
            move |a| Ok(search.search(a.get("query").and_then(Value::as_str).unwrap_or_default(), 4)),
        )?
        .bind(
            ToolSpec::new(
                "read_policy",
                "Reads every numbered line of one policy version (the version in force when no version is given). Quote lines exactly as read.",
                IntentClass::Read,
                json!({"type": "object", "properties": {
                    "version": {"enum": ["v1", "v2"]}},
                    "additionalProperties": false}),
            ),
            move |a| base.read(a.get("version").and_then(Value::as_str)),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proviso_contract::Gate;

    #[test]
    fn evidence_gate_checks_the_cited_answer() {
        let base = PolicyBase::bundled().unwrap();
        let contract = base.answer_contract().unwrap();
        let good = json!({"answer": "The lodging limit is 750 yuan.", "amount_yuan": 750,
            "citations": [{"source_id": "travel-policy", "version": "v2", "line_start": 3, "line_end": 3,
                "quote": "The lodging limit is 750 yuan."}]});
        let verdict = contract.check_text(good.to_string().as_bytes());
        assert!(
            verdict.accepted(),
            "{}",
            serde_json::to_string(&verdict).unwrap()
        );
        let stale = json!({"answer": "The lodging limit is 600 yuan.", "amount_yuan": 600,
            "citations": [{"source_id": "travel-policy", "version": "v1", "line_start": 3, "line_end": 3,
                "quote": "The lodging limit is 600 yuan."}]});
        let verdict = contract.check_text(stale.to_string().as_bytes());
        assert_eq!(verdict.gate(), Some(Gate::Evidence));
    }

    #[test]
    fn search_finds_the_limit_lines() {
        let base = PolicyBase::bundled().unwrap();
        let result = base.search("lodging limit", 4);
        let versions: Vec<&str> = result["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["version"].as_str().unwrap())
            .collect();
        assert!(
            versions.contains(&"v2") && versions.contains(&"v1"),
            "{result}"
        );
        assert_eq!(base.read(None).unwrap()["version"], "v2");
    }
}
