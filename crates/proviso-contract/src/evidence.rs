//! The evidence gate: citations and numeric claims checked against versioned, line-numbered
//! source documents.
//!
//! Structure cannot certify truth. An answer that claims 600 yuan while citing lines that say
//! 750 passes parsing, the schema and every rule; it fails here. For each citation the gate
//! checks that the source exists, that the cited version is the one in force, that the line
//! range lies inside the document and that the quote equals those lines exactly. Then every
//! numeric claim of the answer (number, and unit where the contract names units) must appear
//! in the quoted lines.
//!
//! The store does no I/O: [`SourceStore::from_manifest`] takes a function that reads files,
//! so the caller decides where documents come from.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use crate::code::Code;
use crate::error::ContractError;
use crate::rejection::{Location, Violation};

/// One version of one source document, split into lines (line 1 is the first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDocument {
    source_id: String,
    version: String,
    in_force: bool,
    lines: Vec<String>,
    /// Whether the first line names the document (a prose document's title) rather than
    /// being one record among others.
    titled: bool,
    /// The years this version applied in, when its manifest says (`effective`, `until`):
    /// (first, last), `None` at an open end.
    years: (Option<u32>, Option<u32>),
}

impl SourceDocument {
    /// A document from its text. A final newline does not start an extra empty line.
    #[must_use]
    pub fn new(source_id: &str, version: &str, in_force: bool, text: &str) -> Self {
        let text = text.strip_suffix('\n').unwrap_or(text);
        Self {
            source_id: source_id.to_owned(),
            version: version.to_owned(),
            in_force,
            lines: text
                .split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
                .collect(),
            titled: true,
            years: (None, None),
        }
    }

    /// The same document with the dates it applied from and until (ISO dates, `2024-01-08`,
    /// or years), as a manifest gives them: "what did it cost in 2024?" asks about the
    /// version that applied then.
    /// Without either date, the dates its own opening lines state (`Effective from
    /// 2024-01-01 until 2025-12-31.`): a folder without a manifest, or a manifest without
    /// dates, still dates a policy that says when it applied.
    #[must_use]
    pub fn applied(mut self, effective: Option<&str>, until: Option<&str>) -> Self {
        let year = |date: Option<&str>| {
            date.and_then(|d| d.get(..4))
                .and_then(|y| y.parse::<u32>().ok())
        };
        self.years = match (year(effective), year(until)) {
            (None, None) => stated_validity(&self.lines),
            years => years,
        };
        self
    }

    /// Whether this version applied in `year`, as far as its dates say: a version without
    /// dates says nothing (`None`).
    #[must_use]
    pub fn applied_in(&self, year: u32) -> Option<bool> {
        match self.years {
            (None, None) => None,
            (from, to) => Some(from.is_none_or(|f| f <= year) && to.is_none_or(|t| year <= t)),
        }
    }

    /// The same document read as records (a JSON Lines file's): each line stands alone, and
    /// the first is no title that the others inherit.
    #[must_use]
    pub fn records(mut self) -> Self {
        self.titled = false;
        self
    }

    /// The line that names the whole document: its first non-empty line, unless the
    /// document is records ([`SourceDocument::records`]). Every line of a titled document is
    /// about what its title names (a press release titled by a branch answers who builds
    /// there in a line that never names the branch); a record is about what it states.
    #[must_use]
    pub fn title(&self) -> Option<&str> {
        if !self.titled {
            return None;
        }
        self.lines
            .iter()
            .map(String::as_str)
            .find(|l| !l.trim().is_empty())
    }

    /// What the whole document is about: its title ([`SourceDocument::title`]) and, when
    /// the lines that head it (before its first sentence of prose) include a memo's or
    /// notice's `Subject:` or `Re:` line, or lines saying where it applies (`Affected
    /// area:`), their text too. A notice titled by its series number (`SERVICE NOTICE
    /// FN-2025-09`) names the branch it is about only there, and every sentence under it
    /// is about that branch.
    #[must_use]
    pub fn about(&self) -> Option<String> {
        let title = self.title()?;
        let subjects: Vec<&str> = self
            .heading_lines()
            .filter_map(|l| {
                let (key, value) = l.split_once(':')?;
                let key = key.trim().to_lowercase();
                // `Affected area:` as well as `Area:`: the key's last word says what it is.
                let last = key.rsplit(' ').next().unwrap_or_default();
                (SUBJECT_KEYS.contains(&key.as_str())
                    || SCOPE_KEYS.contains(&last)
                    || NOTICE_KEYS.contains(&last))
                .then(|| value.trim())
                .filter(|v| !v.is_empty())
            })
            .collect();
        Some(if subjects.is_empty() {
            title.to_owned()
        } else {
            format!("{title} {}", subjects.join(" "))
        })
    }

    /// What the document's heading says it applies to (`Applies to: Kettleby Wharf
    /// Maritime Museum`, `Applies to Larkspan Server 3.2.x on Linux`): the places, products
    /// or people every line of it is about, though few of them say so again.
    #[must_use]
    pub fn scope(&self) -> Option<String> {
        self.title()?;
        let scopes: Vec<&str> = self
            .heading_lines()
            .filter_map(|l| {
                // Compared on the line as written: lower-casing may change its length.
                let opening = SCOPE_OPENINGS.iter().find(|opening| {
                    l.get(..opening.len())
                        .is_some_and(|head| head.eq_ignore_ascii_case(opening))
                })?;
                Some(l[opening.len()..].trim_start_matches(':').trim())
            })
            .filter(|v| !v.is_empty())
            .collect();
        (!scopes.is_empty()).then(|| scopes.join(" "))
    }

    /// The lines of the document's heading after its title: those before its first
    /// sentence of prose, trimmed, blank ones left out.
    fn heading_lines(&self) -> impl Iterator<Item = &str> {
        self.lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .skip(1)
            .take_while(|l| !is_prose(l))
    }

    /// The source's id.
    #[must_use]
    pub fn source_id(&self) -> &str {
        &self.source_id
    }

    /// This document's version label.
    #[must_use]
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Whether this version is the one in force.
    #[must_use]
    pub fn in_force(&self) -> bool {
        self.in_force
    }

    /// The lines, 1-based in citations and 0-based here.
    #[must_use]
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The document as a read tool returns it: `{"source_id", "version", "in_force",
    /// "lines": [{"line", "text"}]}`, lines numbered from 1, the shape the harness reads
    /// citable lines from.
    #[must_use]
    pub fn read_result(&self) -> serde_json::Value {
        let lines: Vec<serde_json::Value> = self
            .lines
            .iter()
            .enumerate()
            .map(|(i, t)| serde_json::json!({"line": i + 1, "text": t}))
            .collect();
        serde_json::json!({"source_id": self.source_id(), "version": self.version(),
            "in_force": self.in_force(), "lines": lines})
    }

    /// The line that opens the section line `line` (1-based) belongs to: the nearest
    /// heading or lead-in before it ([`crate::lexicon::opens_section`]), if any. The
    /// sentences under `Collecting and returning` are about collecting, though none says so.
    #[must_use]
    pub fn section(&self, line: usize) -> Option<&str> {
        self.sections().nth(line.checked_sub(1)?)?.1
    }

    /// Each line with the line that opens its section ([`SourceDocument::section`]).
    pub fn sections(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        let mut open: Option<&str> = None;
        self.lines.iter().map(move |line| {
            let here = (line.as_str(), open);
            if crate::lexicon::opens_section(line) {
                open = Some(line.as_str());
            }
            here
        })
    }

    /// Each line with the line before it, when it opens with a word that stands for what
    /// that line names (`They must sleep in a private room` after `Dogs are welcome in
    /// private rooms.`, [`crate::lexicon::refers_back`]) and that line is no heading (its
    /// section already says what it is about).
    pub fn antecedents(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.lines.iter().enumerate().map(|(i, line)| {
            let before = i
                .checked_sub(1)
                .map(|j| self.lines[j].as_str())
                .filter(|b| crate::lexicon::refers_back(line) && !crate::lexicon::opens_section(b));
            (line.as_str(), before)
        })
    }

    /// Lines `start..=end` (1-based) joined with `\n`, if the range lies inside the document.
    #[must_use]
    pub fn excerpt(&self, start: usize, end: usize) -> Option<String> {
        if start == 0 || start > end || end > self.lines.len() {
            return None;
        }
        Some(self.lines[start - 1..end].join("\n"))
    }
}

/// How a heading's line opens when it says whom or what the document applies to, with or
/// without a colon.
const SCOPE_OPENINGS: [&str; 5] = [
    "applies to:",
    "applies to ",
    "applies only to ",
    "affected:",
    "scope:",
];

/// The keys of a header line that says what a memo, notice or letter is about.
const SUBJECT_KEYS: [&str; 5] = ["subject", "re", "regarding", "topic", "title"];

/// The last word of a header key that names the kind of document it heads (`CUSTOMER
/// NOTICE: STORM OTTILIE - CLAIMS SURGE ARRANGEMENTS`): what follows is its subject.
const NOTICE_KEYS: [&str; 8] = [
    "notice",
    "memo",
    "memorandum",
    "bulletin",
    "announcement",
    "circular",
    "advisory",
    "alert",
];

/// The last word of a header key that says where a notice applies (`Affected area:`,
/// `Site:`): every sentence under it is about that place.
const SCOPE_KEYS: [&str; 12] = [
    "area", "areas", "location", "site", "branch", "region", "route", "routes", "estate", "campus",
    "building", "venue",
];

/// How many of a document's first lines may state when it applies: its heading, not its
/// body (`From 1 April 2025 we charge …` in a paragraph dates a change, not the document).
const HEAD_LINES: usize = 6;

/// The years a document's opening lines say it applied in: a line among its first
/// [`HEAD_LINES`] non-empty ones that says it is effective, in force or valid (`Effective
/// from 2024-01-01 until 2025-12-31.`, `In force: 1 March 2025 to 28 February 2026`,
/// `Valid until 2025`), read as (first year, last year); `(None, None)` when none does.
fn stated_validity(lines: &[String]) -> (Option<u32>, Option<u32>) {
    const MARKS: [&str; 5] = ["effective", "in force", "valid ", "valid:", "applies from"];
    const ENDS: [&str; 6] = [" until ", " till ", " to ", " through ", "–", " - "];
    for line in lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .take(HEAD_LINES)
    {
        let lower = format!(" {} ", line.to_lowercase());
        let Some(mark) = MARKS.iter().filter_map(|m| lower.find(m)).min() else {
            continue;
        };
        let rest = &lower[mark..];
        let years = crate::lexicon::stated_years(rest);
        let Some(&first) = years.first() else {
            continue;
        };
        let Some(end) = ENDS.iter().filter_map(|e| rest.find(e)).min() else {
            return (Some(first), None);
        };
        let before = crate::lexicon::stated_years(&rest[..end]);
        let after = crate::lexicon::stated_years(&rest[end..]);
        return (before.first().copied(), after.first().copied());
    }
    (None, None)
}

/// Whether a line is a sentence of prose rather than a header: it ends a sentence and runs
/// to more than a dozen words.
fn is_prose(line: &str) -> bool {
    line.ends_with(['.', '!', '?']) && line.split_whitespace().count() > 12
}

/// How near in meaning lines are to a text (a sentence encoder's cosine, at most 1). The
/// answer rules read words; this tells them when a line says what a text asks in other
/// words (`a day ticket` for "a day pass"). It is a measure, never a gate: the steering
/// may weigh it, the evidence and relevance gates do not read it.
pub trait Nearness: Send + Sync + std::fmt::Debug {
    /// One value per line, or `None` when it cannot tell (a model that failed).
    fn nearness(&self, text: &str, lines: &[&str]) -> Option<Vec<f32>>;
}

/// Versioned source documents, keyed by source id and version.
#[derive(Debug, Clone, Default)]
pub struct SourceStore {
    documents: BTreeMap<String, Vec<SourceDocument>>,
    nearness: OnceLock<std::sync::Arc<dyn Nearness>>,
}

impl SourceStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a document.
    ///
    /// # Errors
    ///
    /// [`ContractError::InvalidSources`] when the same source and version are added twice, or
    /// when two versions of one source are both in force.
    pub fn insert(&mut self, document: SourceDocument) -> Result<(), ContractError> {
        let versions = self
            .documents
            .entry(document.source_id.clone())
            .or_default();
        if versions.iter().any(|d| d.version == document.version) {
            return Err(ContractError::InvalidSources {
                message: format!(
                    "source `{}` version `{}` is listed twice",
                    document.source_id, document.version
                ),
            });
        }
        if document.in_force && versions.iter().any(|d| d.in_force) {
            return Err(ContractError::InvalidSources {
                message: format!("source `{}` has two versions in force", document.source_id),
            });
        }
        versions.push(document);
        Ok(())
    }

    /// Builds a store from a manifest:
    /// `{"sources": [{"source_id": "...", "version": "...", "in_force": true, "file": "..."}]}`.
    /// `read` returns the text of a file named in the manifest.
    ///
    /// # Errors
    ///
    /// [`ContractError::InvalidSources`] for a malformed manifest, an unreadable file, or a
    /// conflict reported by [`SourceStore::insert`].
    pub fn from_manifest(
        manifest: &str,
        mut read: impl FnMut(&str) -> std::io::Result<String>,
    ) -> Result<Self, ContractError> {
        let invalid = |message: String| ContractError::InvalidSources { message };
        let manifest = proviso_json::parse_str(manifest, &proviso_json::ParseOptions::default())
            .map_err(|e| invalid(format!("manifest: {e}")))?;
        let Some(entries) = manifest.get("sources").and_then(Value::as_array) else {
            return Err(invalid("manifest: `sources` must be an array".into()));
        };
        let mut store = Self::new();
        for (i, entry) in entries.iter().enumerate() {
            let text_field = |name: &str| {
                entry.get(name).and_then(Value::as_str).ok_or_else(|| {
                    invalid(format!("manifest: /sources/{i} needs a string `{name}`"))
                })
            };
            let in_force = entry
                .get("in_force")
                .and_then(Value::as_bool)
                .ok_or_else(|| {
                    invalid(format!("manifest: /sources/{i} needs a boolean `in_force`"))
                })?;
            let file = text_field("file")?;
            let text = read(file).map_err(|e| invalid(format!("reading `{file}`: {e}")))?;
            let date = |name: &str| entry.get(name).and_then(Value::as_str);
            store.insert(
                SourceDocument::new(
                    text_field("source_id")?,
                    text_field("version")?,
                    in_force,
                    &text,
                )
                .applied(date("effective"), date("until")),
            )?;
        }
        Ok(store)
    }

    /// Measures lines' nearness to a text with `nearness` from now on ([`SourceStore::nearness`]);
    /// false, changing nothing, when the store already has a measure.
    pub fn measure_with(&self, nearness: std::sync::Arc<dyn Nearness>) -> bool {
        self.nearness.set(nearness).is_ok()
    }

    /// How near in meaning each of `lines` is to `text`, when the store was given a measure
    /// ([`SourceStore::measure_with`]) and it could tell.
    #[must_use]
    pub fn nearness(&self, text: &str, lines: &[&str]) -> Option<Vec<f32>> {
        self.nearness
            .get()?
            .nearness(text, lines)
            .filter(|v| v.len() == lines.len())
    }

    /// Every document of every source (in no particular order).
    pub fn documents(&self) -> impl Iterator<Item = &SourceDocument> {
        self.documents.values().flatten()
    }

    /// The versions of a source.
    #[must_use]
    pub fn versions(&self, source_id: &str) -> &[SourceDocument] {
        self.documents.get(source_id).map_or(&[], Vec::as_slice)
    }

    /// Number of documents in the store.
    #[must_use]
    pub fn len(&self) -> usize {
        self.documents.values().map(Vec::len).sum()
    }

    /// Whether the store has no documents.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
    }
}

/// Where an answer's citations and claims are, as declared in `x-proviso.evidence`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EvidencePolicy {
    /// Pointer to the array of citations. Each citation has `source_id`, `version`,
    /// `line_start`, `line_end` and `quote`.
    pub citations: String,
    /// The claims that must be supported by the quoted lines.
    pub claims: Vec<Claim>,
    /// Unit words recognised after a number (case-insensitive), e.g. `yuan`. A number
    /// followed by one of these is a claim of that number *in that unit*.
    pub units: Vec<String>,
}

/// A source of numeric claims in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Every number in the text at this pointer.
    Text(String),
    /// The number at this pointer, in this unit.
    Amount {
        /// Pointer to the number.
        pointer: String,
        /// Its unit, fixed by the contract.
        unit: String,
    },
}

impl EvidencePolicy {
    pub(crate) fn from_declaration(declaration: &Value) -> Result<Self, ContractError> {
        let path = "/x-proviso/evidence";
        let citations = declaration
            .get("citations")
            .and_then(Value::as_str)
            .ok_or_else(|| ContractError::declaration(path, "`citations` must be a JSON pointer"))?
            .to_owned();
        let units = match declaration.get("units") {
            None => Vec::new(),
            Some(Value::Array(units)) => units
                .iter()
                .map(|u| u.as_str().map(str::to_lowercase))
                .collect::<Option<_>>()
                .ok_or_else(|| ContractError::declaration(path, "`units` must be strings"))?,
            Some(_) => return Err(ContractError::declaration(path, "`units` must be an array")),
        };
        let claims = match declaration.get("claims") {
            None => Vec::new(),
            Some(Value::Array(claims)) => claims
                .iter()
                .enumerate()
                .map(|(i, claim)| {
                    let text = claim.get("text").and_then(Value::as_str);
                    let amount = claim.get("amount").and_then(Value::as_str);
                    let unit = claim.get("unit").and_then(Value::as_str);
                    match (text, amount, unit) {
                        (Some(text), None, None) => Ok(Claim::Text(text.to_owned())),
                        (None, Some(pointer), Some(unit)) => Ok(Claim::Amount {
                            pointer: pointer.to_owned(),
                            unit: unit.to_lowercase(),
                        }),
                        _ => Err(ContractError::declaration(
                            &format!("{path}/claims/{i}"),
                            "a claim is either {\"text\": POINTER} or {\"amount\": POINTER, \"unit\": UNIT}",
                        )),
                    }
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(ContractError::declaration(path, "`claims` must be an array")),
        };
        Ok(Self {
            citations,
            claims,
            units,
        })
    }

    /// The numbers `text` states as the gate reads them (normalised: `1,200.50` is
    /// `1200.5`), each with its unit when one of the declared units follows it. A grammar
    /// that offers only these numbers for a claim offers only what the gate will accept.
    #[must_use]
    pub fn stated_numbers(&self, text: &str) -> Vec<(String, Option<String>)> {
        mentions(text, &self.units)
            .into_iter()
            .map(|m| (m.value, m.unit))
            .collect()
    }

    /// Where the citations are in an answer (a JSON pointer).
    pub(crate) fn citations_pointer(&self) -> &str {
        &self.citations
    }

    /// Checks `answer` against `store`, returning every problem found.
    #[must_use]
    pub fn check(&self, answer: &Value, store: &SourceStore) -> Vec<Violation> {
        self.check_citations(answer, store, false).violations
    }

    /// Checks the citations and claims of `answer` against `store` (`superseded_ok`: a
    /// superseded version may be cited). What the question adds is in
    /// `EvidencePolicy::check_for`, beside [`crate::Question`], so this module does not
    /// depend on the question's reading.
    pub(crate) fn check_citations(
        &self,
        answer: &Value,
        store: &SourceStore,
        superseded_ok: bool,
    ) -> Checked {
        let mut violations = Vec::new();
        let mut quoted = String::new();
        let citations = answer
            .pointer(&self.citations)
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let mut cited: Vec<(String, String, String)> = Vec::new();
        for (i, citation) in citations.iter().enumerate() {
            let base = format!("{}/{i}", self.citations);
            match check_citation(citation, &base, store, superseded_ok) {
                Ok(excerpt) => {
                    quoted.push_str(&excerpt);
                    quoted.push('\n');
                    let field = |k: &str| {
                        citation
                            .get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    cited.push((field("source_id"), field("version"), excerpt));
                }
                Err(v) => violations.push(v),
            }
        }
        let supported = mentions(&quoted, &self.units);
        // Naming a cited version (`v1`) is not a claim.
        let unnamed = |text: &str| {
            let mut text = text.to_owned();
            for (source, version, _) in &cited {
                text = text
                    .replace(source.as_str(), " ")
                    .replace(version.as_str(), " ");
            }
            text
        };
        for claim in &self.claims {
            let (pointer, found) = match claim {
                Claim::Text(pointer) => {
                    let text = answer
                        .pointer(pointer)
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    (pointer, mentions(&unnamed(text), &self.units))
                }
                Claim::Amount { pointer, unit } => {
                    let found = match answer.pointer(pointer) {
                        Some(Value::Number(n)) => vec![Mention {
                            value: normalize_number(&n.to_string()),
                            unit: Some(unit.clone()),
                        }],
                        _ => Vec::new(),
                    };
                    (pointer, found)
                }
            };
            for mention in found {
                let ok = supported.iter().any(|s| {
                    s.value == mention.value && (mention.unit.is_none() || s.unit == mention.unit)
                });
                if !ok {
                    let what = match &mention.unit {
                        Some(unit) => format!("{} {unit}", mention.value),
                        None => mention.value.clone(),
                    };
                    violations.push(Violation {
                        code: Code::UnsupportedClaim,
                        keyword: None,
                        message: format!(
                            "{pointer} claims {what}, which the quoted lines do not state"
                        ),
                        location: Location::instance(pointer.clone()),
                    });
                }
            }
        }
        // The answer's text is its first text claim; without one, the quotes speak.
        let text = self
            .claims
            .iter()
            .find_map(|c| match c {
                Claim::Text(p) => answer.pointer(p).and_then(Value::as_str),
                Claim::Amount { .. } => None,
            })
            .map_or(quoted, str::to_owned);
        Checked {
            violations,
            text,
            cited,
        }
    }
}

/// What [`EvidencePolicy::check_citations`] found: the violations, the answer's text, and
/// each valid citation as (source, version, quoted line).
pub(crate) struct Checked {
    pub(crate) violations: Vec<Violation>,
    pub(crate) text: String,
    pub(crate) cited: Vec<(String, String, String)>,
}

fn check_citation(
    citation: &Value,
    base: &str,
    store: &SourceStore,
    superseded_ok: bool,
) -> Result<String, Violation> {
    let field = |name: &str| citation.get(name);
    let violation = |code: Code, field: &str, message: String| Violation {
        code,
        keyword: None,
        message,
        location: Location::instance(format!("{base}/{field}")),
    };
    let source_id = field("source_id").and_then(Value::as_str).unwrap_or("");
    let version = field("version").and_then(Value::as_str).unwrap_or("");
    let versions = store.versions(source_id);
    if versions.is_empty() {
        return Err(violation(
            Code::UnknownSource,
            "source_id",
            format!("{base} cites source `{source_id}`, which is not in the store"),
        ));
    }
    let Some(document) = versions.iter().find(|d| d.version == version) else {
        return Err(violation(
            Code::UnknownVersion,
            "version",
            format!("{base} cites version `{version}` of `{source_id}`, which does not exist"),
        ));
    };
    if !document.in_force && !superseded_ok {
        let current = versions
            .iter()
            .find(|d| d.in_force)
            .map_or_else(|| "none".to_owned(), |d| format!("`{}`", d.version));
        return Err(violation(
            Code::VersionNotInForce,
            "version",
            format!(
                "{base} cites version `{version}` of `{source_id}`, but the version in force is {current}"
            ),
        ));
    }
    let line = |name: &str| {
        field(name)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
    };
    let (start, end) = (line("line_start"), line("line_end"));
    let Some(excerpt) = document.excerpt(start, end) else {
        return Err(violation(
            Code::LineRangeOutsideDocument,
            "line_end",
            format!(
                "{base} cites lines {start}-{end} of `{source_id}` {version}, which has {} lines",
                document.lines.len()
            ),
        ));
    };
    let quote = field("quote").and_then(Value::as_str).unwrap_or("");
    if quote != excerpt {
        return Err(violation(
            Code::QuoteMismatch,
            "quote",
            format!("{base}/quote is not exactly lines {start}-{end} of `{source_id}` {version}"),
        ));
    }
    Ok(excerpt)
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Mention {
    value: String,
    unit: Option<String>,
}

fn number_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        #[allow(clippy::unwrap_used)] // A constant pattern, checked by every test.
        Regex::new(r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?:\s*([\p{L}%]+))?").unwrap()
    })
}

/// Every number in `text`, with its unit when the word after it is one of `units`.
fn mentions(text: &str, units: &[String]) -> Vec<Mention> {
    number_regex()
        .captures_iter(text)
        .filter_map(|c| {
            let whole = c.get(0)?;
            // `v2` or `NCT04123456` are names, not numbers.
            let before = text[..whole.start()].chars().next_back();
            if before.is_some_and(char::is_alphanumeric) {
                return None;
            }
            let unit = c
                .get(2)
                .map(|u| u.as_str().to_lowercase())
                .filter(|u| units.contains(u));
            Some(Mention {
                value: normalize_number(c.get(1)?.as_str()),
                unit,
            })
        })
        .collect()
}

/// `1,500.50` → `1500.5`; `750.0` → `750`; `007` → `7`.
fn normalize_number(text: &str) -> String {
    let plain: String = text.chars().filter(|&c| c != ',').collect();
    let (int, frac) = plain.split_once('.').unwrap_or((&plain, ""));
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        int.to_owned()
    } else {
        format!("{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A measure that answers `values`, whatever it is asked.
    #[derive(Debug)]
    struct Answers(Option<Vec<f32>>);

    impl Nearness for Answers {
        fn nearness(&self, _text: &str, _lines: &[&str]) -> Option<Vec<f32>> {
            self.0.clone()
        }
    }

    /// A store measures nearness only once given a measure, keeps the first it is given,
    /// and passes on only an answer with one value per line.
    #[test]
    fn a_store_measures_nearness_with_the_one_measure_it_was_given() {
        let store = SourceStore::new();
        assert_eq!(store.nearness("q", &["a"]), None);
        assert!(store.measure_with(std::sync::Arc::new(Answers(Some(vec![0.25])))));
        assert!(!store.measure_with(std::sync::Arc::new(Answers(Some(vec![0.9])))));
        assert_eq!(store.nearness("q", &["a"]), Some(vec![0.25]));
        // One value for two lines is no answer.
        assert_eq!(store.nearness("q", &["a", "b"]), None);
        let failing = SourceStore::new();
        assert!(failing.measure_with(std::sync::Arc::new(Answers(None))));
        assert_eq!(failing.nearness("q", &["a"]), None);
    }

    #[test]
    fn a_line_belongs_to_the_section_its_nearest_heading_or_lead_in_opens() {
        let d = SourceDocument::new(
            "H",
            "v1",
            true,
            "Handbook\nLoan periods\nBooks are lent for 21 days.\nBooking the lathe:\n- Book up to 10 days ahead.",
        );
        assert_eq!(d.section(1), None);
        assert_eq!(d.section(2), Some("Handbook"));
        assert_eq!(d.section(3), Some("Loan periods"));
        assert_eq!(d.section(5), Some("Booking the lathe:"));
        assert_eq!(d.section(9), None);
        assert_eq!(d.sections().count(), 5);
    }

    /// A document without dates from its manifest is dated by what its heading says, and
    /// its body's dates date nothing.
    #[test]
    fn a_documents_heading_says_when_it_applied() {
        let dated = |text: &str| {
            SourceDocument::new("P", "v1", false, text)
                .applied(None, None)
                .years
        };
        assert_eq!(
            dated("Lodging policy\nEffective from 2024-01-01 until 2025-12-31.\nThe limit is 600 yuan."),
            (Some(2024), Some(2025))
        );
        assert_eq!(
            dated("Terms\nEffective from 1 March 2026; replaces v1.\nRent is due monthly."),
            (Some(2026), None)
        );
        assert_eq!(
            dated("Price list\nIn force: 1 April 2025 – 31 March 2026\nA book costs £3."),
            (Some(2025), Some(2026))
        );
        assert_eq!(
            dated("Notice\nValid until 2025.\nClosed."),
            (None, Some(2025))
        );
        assert_eq!(
            dated("Fees\nA\nB\nC\nD\nE\nFrom 2026 the fee is effective from 2027."),
            (None, None)
        );
        // The manifest's dates win.
        let d = SourceDocument::new("P", "v1", false, "Effective from 2020 until 2021.")
            .applied(Some("2024-01-01"), None);
        assert_eq!(d.years, (Some(2024), None));
    }

    #[test]
    fn mentions_carry_declared_units_only() {
        let units = vec!["yuan".to_owned()];
        let found = mentions("Limit: 1,500.50 Yuan for 3 nights, policy v2.", &units);
        assert_eq!(
            found,
            vec![
                Mention {
                    value: "1500.5".into(),
                    unit: Some("yuan".into())
                },
                Mention {
                    value: "3".into(),
                    unit: None
                },
            ]
        );
    }

    #[test]
    fn excerpts_are_bounded() {
        let doc = SourceDocument::new("s", "v1", true, "a\nb\nc\n");
        assert_eq!(doc.lines().len(), 3);
        assert_eq!(doc.excerpt(1, 3).as_deref(), Some("a\nb\nc"));
        assert_eq!(doc.excerpt(2, 4), None);
        assert_eq!(doc.excerpt(0, 1), None);
        assert_eq!(doc.excerpt(3, 2), None);
    }
}
