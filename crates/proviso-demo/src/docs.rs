//! Your own documents: a directory of plain text, Markdown and JSON Lines files becomes a
//! versioned source store of citable lines (one sentence or list item per line, each with
//! its source id, version and line number), behind the same BM25 index, tools and evidence
//! gate as the bundled travel agent.
//!
//! An optional `manifest.json` in the directory gives versions:
//! `{"sources": [{"source_id", "version", "file", "in_force", "effective"?, "until"?}],
//! "exclude"?: [pattern]}`. A file without an entry is its own source (its path without the
//! extension), version `v1`, in force. A file whose path (relative to the directory)
//! matches an `exclude` glob pattern (`README.md`, `drafts/*`) is not read: a file that
//! describes the others is not a document to cite.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proviso_contract::lexicon::is_footnote_mark;
use proviso_contract::{Contract, ContractError, IntentClass, SourceDocument, SourceStore};
use proviso_harness::{ToolFailure, Toolbox};
use proviso_tools::{ToolError, ToolSpec};
use serde_json::{json, Value};

use crate::index::{TextIndex, VersionedLine};

/// Why a document directory cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocsError {
    /// A file or the directory cannot be read.
    #[error("reading {path}: {message}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The reason.
        message: String,
    },
    /// `manifest.json` is malformed or names a file that is not there.
    #[error("{path}: {message}")]
    Manifest {
        /// The manifest's path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No file holds any citable line.
    #[error("{0} holds no .txt, .md or .jsonl file with text")]
    Empty(PathBuf),
    /// The sources conflict (two versions in force, a version listed twice).
    #[error(transparent)]
    Sources(#[from] ContractError),
}

/// One version of one source, as the manifest declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SourceInfo {
    /// The source's id.
    pub source_id: String,
    /// The version's label.
    pub version: String,
    /// Whether this version is the one in force.
    pub in_force: bool,
    /// From when it applies, if the manifest says.
    pub effective: Option<String>,
    /// Until when it applied, if the manifest says.
    pub until: Option<String>,
    /// The file, relative to the directory.
    pub file: String,
}

/// One citable line.
#[derive(Debug, Clone)]
struct Line {
    source: usize,
    number: usize,
    text: String,
}

/// A document directory, read into citable lines and indexed.
#[derive(Debug)]
pub struct DocsBase {
    sources: Vec<SourceInfo>,
    store: Arc<SourceStore>,
    lines: Vec<Line>,
    index: TextIndex,
    /// Per line, whether the version in force restates it ([`crate::index::restated`]).
    restated: Vec<bool>,
}

/// A line as the versioned search weighs it.
fn versioned<'a>(sources: &'a [SourceInfo], line: &'a Line) -> VersionedLine<'a> {
    let info = &sources[line.source];
    VersionedLine {
        source: &info.source_id,
        in_force: info.in_force,
        text: &line.text,
    }
}

/// The extensions read, and how.
fn kind_of(path: &Path) -> Option<&'static str> {
    match path.extension()?.to_str()? {
        "txt" | "text" => Some("txt"),
        "md" | "markdown" => Some("md"),
        "jsonl" => Some("jsonl"),
        _ => None,
    }
}

impl DocsBase {
    /// Reads every `.txt`, `.md` and `.jsonl` file under `dir` (recursively; hidden entries
    /// are skipped) with the versions of `dir/manifest.json`, if there is one.
    ///
    /// # Errors
    ///
    /// [`DocsError`] naming the file or manifest entry at fault.
    pub fn load(dir: &Path) -> Result<Self, DocsError> {
        let read_err = |path: &Path, e: std::io::Error| DocsError::Read {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let mut files = Vec::new();
        let mut pending = vec![dir.to_owned()];
        while let Some(folder) = pending.pop() {
            let entries = std::fs::read_dir(&folder).map_err(|e| read_err(&folder, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| read_err(&folder, e))?;
                let path = entry.path();
                if entry.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                if path.is_dir() {
                    pending.push(path);
                } else if kind_of(&path).is_some() {
                    files.push(path);
                }
            }
        }
        files.sort();
        let relative = |path: &Path| {
            path.strip_prefix(dir)
                .unwrap_or(path)
                .to_string_lossy()
                .replace('\\', "/")
        };
        let manifest_path = dir.join("manifest.json");
        let mut declared: BTreeMap<String, SourceInfo> = BTreeMap::new();
        if manifest_path.exists() {
            let text =
                std::fs::read_to_string(&manifest_path).map_err(|e| read_err(&manifest_path, e))?;
            let manifest = read_manifest(&text).map_err(|message| DocsError::Manifest {
                path: manifest_path.clone(),
                message,
            })?;
            files.retain(|path| {
                let file = relative(path);
                !manifest.exclude.iter().any(|p| p.matches(&file))
            });
            for info in manifest.sources {
                if !dir.join(&info.file).is_file() {
                    return Err(DocsError::Manifest {
                        path: manifest_path.clone(),
                        message: format!("`{}` is not a file in {}", info.file, dir.display()),
                    });
                }
                declared.insert(info.file.clone(), info);
            }
        }
        let mut sources = Vec::new();
        let mut store = SourceStore::new();
        let mut lines = Vec::new();
        for path in &files {
            let file = relative(path);
            let info = declared.remove(&file).unwrap_or_else(|| SourceInfo {
                source_id: file
                    .rsplit_once('.')
                    .map_or(file.as_str(), |(stem, _)| stem)
                    .to_owned(),
                version: "v1".into(),
                in_force: true,
                effective: None,
                until: None,
                file: file.clone(),
            });
            let text = std::fs::read_to_string(path).map_err(|e| read_err(path, e))?;
            let units = match kind_of(path) {
                Some("jsonl") => jsonl_units(&text),
                Some("md") => text_units(&text, true),
                _ => text_units(&text, false),
            };
            if units.is_empty() {
                continue;
            }
            let document = SourceDocument::new(
                &info.source_id,
                &info.version,
                info.in_force,
                &units.join("\n"),
            )
            .applied(info.effective.as_deref(), info.until.as_deref());
            store.insert(if kind_of(path) == Some("jsonl") {
                document.records()
            } else {
                document
            })?;
            let source = sources.len();
            lines.extend(units.into_iter().enumerate().map(|(i, text)| Line {
                source,
                number: i + 1,
                text,
            }));
            sources.push(info);
        }
        if let Some(missing) = declared.keys().next() {
            return Err(DocsError::Manifest {
                path: manifest_path,
                message: format!("`{missing}` is not a .txt, .md or .jsonl file"),
            });
        }
        if lines.is_empty() {
            return Err(DocsError::Empty(dir.to_owned()));
        }
        // A line is found by its section's heading too: the sentences under `Loan periods`
        // answer a question about loan periods that none of them words that way.
        let mut texts: Vec<String> = Vec::with_capacity(lines.len());
        // A line that writes a name by its abbreviation (`Venue: KWMM`) is found by the
        // name too.
        let abbreviations = proviso_contract::abbreviations_of(&store);
        for (info, source_lines) in sources
            .iter()
            .zip(lines.chunk_by(|a, b| a.source == b.source))
        {
            let document = store
                .versions(&info.source_id)
                .iter()
                .find(|d| d.version() == info.version);
            let sections: Vec<Option<&str>> = document
                .map(|d| d.sections().map(|(_, s)| s).collect())
                .unwrap_or_default();
            // A line that refers back (`It costs £3.50.`) is found by the line it refers to.
            let befores: Vec<Option<&str>> = document
                .map(|d| d.antecedents().map(|(_, b)| b).collect())
                .unwrap_or_default();
            // A document's sentences are found by its title too
            // ([`SourceDocument::title`]); a record stands alone.
            let title = document.and_then(SourceDocument::about);
            for (i, line) in source_lines.iter().enumerate() {
                // A heading is found by its own words, not the section before it.
                let section = sections
                    .get(line.number - 1)
                    .copied()
                    .flatten()
                    .filter(|_| !proviso_contract::lexicon::opens_section(&line.text));
                let mut text = line.text.clone();
                if let Some(before) = befores.get(line.number - 1).copied().flatten() {
                    text = format!("{before} {text}");
                }
                if let Some(section) = section {
                    text = format!("{section} {text}");
                }
                if let Some(title) = title.as_deref().filter(|_| i > 0) {
                    text = format!("{title} {text}");
                }
                texts.push(proviso_contract::unabbreviate(&text, &abbreviations).into_owned());
            }
        }
        let restated = crate::index::restated(
            &lines
                .iter()
                .map(|l| versioned(&sources, l))
                .collect::<Vec<_>>(),
        );
        Ok(Self {
            sources,
            store: Arc::new(store),
            index: TextIndex::new(&texts),
            lines,
            restated,
        })
    }

    /// Re-ranks every later search's best lines with `rerank` ([`TextIndex::search_where`]).
    pub fn rerank_with(&self, rerank: Arc<dyn crate::index::Rerank>) {
        self.index
            .rerank_sources(&self.store, rerank, |i| self.lines[i].text.as_str());
    }

    /// The versions read, one per file.
    #[must_use]
    pub fn sources(&self) -> &[SourceInfo] {
        &self.sources
    }

    /// How many citable lines there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether there are none (never, for a loaded base).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The source store the evidence gate checks against.
    #[must_use]
    pub fn store(&self) -> &Arc<SourceStore> {
        &self.store
    }

    /// The best `limit` lines for `query` ([`TextIndex::search_versions`]: the version in
    /// force first, unless the query asks about an earlier one), each with its source,
    /// version, whether that version is in force, and its line number.
    #[must_use]
    pub fn search(&self, query: &str, limit: usize) -> Value {
        let hits: Vec<Value> = self
            .index
            .search_versions(query, limit, &self.store, &self.restated, |i| {
                versioned(&self.sources, &self.lines[i])
            })
            .into_iter()
            .map(|h| {
                let line = &self.lines[h.index];
                let info = &self.sources[line.source];
                json!({"source_id": info.source_id, "version": info.version, "in_force": info.in_force,
                    "line": line.number, "text": line.text})
            })
            .collect();
        json!({"query": query, "results": hits})
    }

    /// Every numbered line of one version of `source_id` (the one in force when `version`
    /// is `None`).
    ///
    /// # Errors
    ///
    /// `not_found` for an unknown source or version.
    pub fn read(&self, source_id: &str, version: Option<&str>) -> Result<Value, ToolFailure> {
        let (index, info) = self
            .sources
            .iter()
            .enumerate()
            .filter(|(_, s)| s.source_id == source_id)
            .find(|(_, s)| version.map_or(s.in_force, |v| s.version == v))
            .ok_or_else(|| {
                ToolFailure::new(
                    "not_found",
                    format!(
                        "no source `{source_id}`{}",
                        version.map_or(String::new(), |v| format!(" version `{v}`"))
                    ),
                )
            })?;
        let lines: Vec<Value> = self
            .lines
            .iter()
            .filter(|l| l.source == index)
            .map(|l| json!({"line": l.number, "text": l.text}))
            .collect();
        Ok(
            json!({"source_id": info.source_id, "version": info.version, "in_force": info.in_force,
            "lines": lines}),
        )
    }

    /// The answer schema: an answer and one to three citations of lines of these sources.
    #[must_use]
    pub fn answer_schema(&self) -> Value {
        let ids: Vec<&str> = unique(self.sources.iter().map(|s| s.source_id.as_str()));
        let versions: Vec<&str> = unique(self.sources.iter().map(|s| s.version.as_str()));
        let longest = self
            .sources
            .iter()
            .enumerate()
            .map(|(i, _)| self.lines.iter().filter(|l| l.source == i).count())
            .max()
            .unwrap_or(1);
        cited_answer_schema(
            json!({"enum": ids}),
            json!({"enum": versions}),
            json!({"type": "integer", "minimum": 1, "maximum": longest}),
        )
    }

    /// The answer contract: the schema, line ranges in order, and the evidence gate over
    /// this base (every quote exactly a cited line's text, the answer's claims supported).
    ///
    /// # Errors
    ///
    /// [`ContractError`] if the schema does not compile (a test proves it does).
    pub fn answer_contract(&self) -> Result<Contract, ContractError> {
        cited_answer_contract(self.answer_schema(), "docs-answer-v1", self.store.clone())
    }
}

/// A cited answer's schema: a short `answer` and one to three citations, each a line range
/// of a source's version with the quote; `source_id`, `version` and the line numbers are
/// held to what the caller passes.
pub(crate) fn cited_answer_schema(source_id: Value, version: Value, line: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "answer": {"type": "string", "minLength": 1, "maxLength": 300},
            "citations": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
                "type": "object",
                "properties": {
                    "source_id": source_id,
                    "version": version,
                    "line_start": line.clone(),
                    "line_end": line,
                    "quote": {"type": "string", "minLength": 1, "maxLength": 400}
                },
                "required": ["source_id", "version", "line_start", "line_end", "quote"],
                "additionalProperties": false
            }}
        },
        "required": ["answer", "citations"],
        "additionalProperties": false
    })
}

/// The contract of a cited answer of `schema` (`id` names it): line ranges in order, and
/// the evidence gate over `store` (every quote exactly a cited line's text, the answer's
/// claims supported).
pub(crate) fn cited_answer_contract(
    schema: Value,
    id: &str,
    store: Arc<SourceStore>,
) -> Result<Contract, ContractError> {
    let mut document = schema;
    document["x-proviso"] = json!({
        "id": id,
        "output": "answer",
        "rules": [{"rule": "ordered", "each": "/citations", "lower": "/line_start",
            "upper": "/line_end", "code": "reversed_line_range"}],
        "evidence": {"citations": "/citations", "claims": [{"text": "/answer"}]}
    });
    Contract::from_document(&document)?.sources(store).build()
}

fn unique<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// What `manifest.json` declares.
struct Manifest {
    sources: Vec<SourceInfo>,
    /// Paths not to read.
    exclude: Vec<glob::Pattern>,
}

/// Reads `manifest.json`.
fn read_manifest(text: &str) -> Result<Manifest, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let entries = value
        .get("sources")
        .and_then(Value::as_array)
        .ok_or("`sources` must be an array")?;
    let exclude = match value.get("exclude") {
        None => Vec::new(),
        Some(Value::Array(patterns)) => patterns
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let p = p
                    .as_str()
                    .ok_or_else(|| format!("/exclude/{i} must be a string"))?;
                glob::Pattern::new(p).map_err(|e| format!("/exclude/{i} `{p}`: {e}"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`exclude` must be an array of glob patterns".into()),
    };
    let sources = entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let text = |name: &str| {
                entry
                    .get(name)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("/sources/{i} needs a string `{name}`"))
            };
            let optional = |name: &str| entry.get(name).and_then(Value::as_str).map(str::to_owned);
            Ok(SourceInfo {
                source_id: text("source_id")?,
                version: text("version")?,
                in_force: entry
                    .get("in_force")
                    .and_then(Value::as_bool)
                    .ok_or_else(|| format!("/sources/{i} needs a boolean `in_force`"))?,
                effective: optional("effective"),
                until: optional("until"),
                file: text("file")?,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Manifest { sources, exclude })
}

/// The longest record written as one citable line; a longer one is cited field by field.
const RECORD_LINE: usize = 300;

/// A JSON Lines file's records, one citable line each: `key: value; key: value`
/// ([`record_units`]).
///
/// An object of plain values is written as fields of their own, keyed by both keys
/// (`acc: {"BSL": "2025-05-17"}` is `acc BSL: 2025-05-17`), so that a question naming the
/// inner key finds its value and the answer quotes that value alone.
fn jsonl_units(text: &str) -> Vec<String> {
    fn plain(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(_) | Value::Bool(_) | Value::Null => Some(v.to_string()),
            _ => None,
        }
    }
    fn fields(k: &str, v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(inner)
                if !inner.is_empty() && inner.values().all(|i| plain(i).is_some()) =>
            {
                for (ik, iv) in inner {
                    out.push(format!("{k} {ik}: {}", plain(iv).unwrap_or_default()));
                }
            }
            other => out.push(format!(
                "{k}: {}",
                plain(other).unwrap_or_else(|| other.to_string())
            )),
        }
    }
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(map)) => {
                let mut record = Vec::new();
                for (k, v) in &map {
                    fields(k, v, &mut record);
                }
                out.extend(record_units(record));
            }
            _ => out.push(line.trim().to_owned()),
        }
    }
    out
}

/// One record's fields (`key: value`) as citable lines: the record whole, `key: value; key:
/// value`, or, when too long to quote whole, a line per field led by the record's first
/// field (`branch: Northgate; address: 48 Northgate Road`), so every line still says
/// whose field it is. A JSON Lines object and a Markdown table's row are both records.
///
/// A first field that is only a code (`id: FH-03`) names the record for a machine; the
/// short field after it (`name: Fernwick Kettlemoor`) names it for a reader, so both lead.
fn record_units(fields: Vec<String>) -> Vec<String> {
    // `; ` parts fields, so a value that writes one (`parking: none on site; Quarry St car
    // park`) writes `, ` instead: a line a reader cites splits back into the same fields.
    let fields: Vec<String> = fields
        .into_iter()
        .map(|f| match f.split_once(": ") {
            Some((k, v)) if v.contains("; ") => format!("{k}: {}", v.replace("; ", ", ")),
            _ => f,
        })
        .collect();
    let whole = fields.join("; ");
    if whole.is_empty() {
        return Vec::new();
    }
    if whole.chars().count() <= RECORD_LINE || fields.len() < 2 {
        return vec![whole];
    }
    let value = |f: &str| f.split_once(": ").map_or("", |(_, v)| v).to_owned();
    let coded = !value(&fields[0]).chars().any(char::is_lowercase);
    let named = fields.len() > 2 && value(&fields[1]).chars().count() <= 60;
    let lead = if coded && named { 2 } else { 1 };
    let key = fields[..lead].join("; ");
    fields[lead..]
        .iter()
        .map(|f| format!("{key}; {f}"))
        .collect()
}

/// The cells of a Markdown table row (`| Dorm bed | £22 |`), trimmed, without their
/// emphasis; `None` for a line that is not a row.
fn table_cells(line: &str) -> Option<Vec<String>> {
    let inner = line.strip_prefix('|')?;
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    Some(
        inner
            .split('|')
            .map(|c| c.trim().replace("**", "").replace('`', ""))
            .collect(),
    )
}

/// Whether `line` is a Markdown table's delimiter row (`|---|:--:|`).
fn is_delimiter_row(line: &str) -> bool {
    line.contains('-') && line.chars().all(|c| matches!(c, '-' | '|' | ':' | ' '))
}

/// A Markdown table's body row as a record: each cell led by its column's header
/// (`Room: Dorm bed; Weekday: £22; Weekend: £26`), so that the line states which column a
/// value is in, as a JSON Lines record states its keys. An empty cell says nothing; a
/// column without a header gives its cell alone.
fn table_row(header: &[String], cells: &[String]) -> Vec<String> {
    let fields = cells
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_empty())
        .map(|(i, c)| match header.get(i).filter(|h| !h.is_empty()) {
            Some(h) => format!("{h}: {c}"),
            None => c.clone(),
        })
        .collect();
    record_units(fields)
}

/// Plain text or Markdown as citable lines: each sentence, list item or heading of its own,
/// Markdown's markup (heading marks, bullets, emphasis, code fences) taken off.
///
/// A Markdown table (a header row, a delimiter row, body rows) becomes a record per body row
/// ([`table_row`]): a row's cells alone (`| Dorm bed | £22 | £26 |`) would not say which
/// price is which.
fn text_units(text: &str, markdown: bool) -> Vec<String> {
    let mut units = Vec::new();
    let joined = unwrapped(text, markdown);
    let lines: Vec<&str> = joined.iter().map(String::as_str).collect();
    let mut header: Option<Vec<String>> = None;
    // The heading over the lines that follow, when it names them by a number (a release's
    // `3.1.0 (2025-01-21)`, a `Zone 3`): each list item under it is keyed by it.
    let mut numbered: Option<String> = None;
    for (i, raw) in lines.iter().enumerate() {
        let mut line = raw.trim();
        let heading = markdown && line.starts_with('#');
        if markdown {
            if let Some(cells) = table_cells(line) {
                if is_delimiter_row(line) {
                    continue;
                }
                let next_delimits = lines
                    .get(i + 1)
                    .is_some_and(|n| n.trim().starts_with('|') && is_delimiter_row(n.trim()));
                if next_delimits {
                    header = Some(cells);
                } else if let Some(header) = &header {
                    units.extend(table_row(header, &cells));
                } else {
                    // Rows without a header: each its cells, as a record without keys.
                    units.extend(table_row(&[], &cells));
                }
                continue;
            }
            header = None;
            if line.starts_with("```") || line.chars().all(|c| matches!(c, '-' | '|' | ':' | ' ')) {
                continue;
            }
            line = line.trim_start_matches('#').trim_start();
            line = line.trim_start_matches('>').trim_start();
        }
        let item = strip_bullet(line);
        let listed = item.len() < line.len();
        let line = definition(item);
        if heading {
            numbered = line
                .chars()
                .any(|c| c.is_ascii_digit())
                .then(|| line.replace("**", "").replace('`', ""));
        }
        // A list item under a numbered heading says what it says of that number: `Removed:
        // FTP backend` under `3.0.0 (2024-09-10)` is when FTP was removed.
        let line = match (&numbered, listed) {
            (Some(key), true) => format!("{key}: {line}"),
            _ => line,
        };
        // Emphasis marks (`**`, `*`) and code quotes are no part of what a line
        // says: `*Surcharge.* A consultation …` is two sentences.
        let line = if markdown {
            line.replace(['*', '`'], "")
        } else {
            line
        };
        // A footnote (`¹ SMG is a sheltered scheme. … Tenants who receive … pay £2.10 a
        // week.`) is about what its first sentence names, and about the cells that carry
        // its mark: a short one is one line, so each of its sentences is read with it.
        let parts = sentences(&line);
        if is_footnote(&line) && parts.len() <= FOOTNOTE_SENTENCES {
            units.push(parts.join(" "));
            continue;
        }
        for sentence in parts {
            if !sentence.is_empty() {
                units.push(sentence);
            }
        }
    }
    units
}

/// How many sentences a footnote kept as one line may have: a longer note is a paragraph
/// of its own, read sentence by sentence.
const FOOTNOTE_SENTENCES: usize = 4;

/// Whether `line` is a footnote: it opens with a footnote's mark (a superscript number,
/// [`is_footnote_mark`]) and a space.
fn is_footnote(line: &str) -> bool {
    line.starts_with(is_footnote_mark) && line.trim_start_matches(is_footnote_mark).starts_with(' ')
}

/// A text's lines with every hard-wrapped sentence made whole again: a line goes on on the
/// next when the next cannot start a line of its own (it starts in lower case) or, in a
/// text wrapped at a width, when the line filled that width and did not end a sentence.
/// Without this a wrapped sentence is two lines and neither states its fact whole (`…
/// charged` / `plus £189 on Sundays …`). A line that opens a structure (a heading, a
/// table row, a list item, a footnote, a fence, a rule) never continues another, and a
/// short line that ends without a stop (a title, a header block's `Date: …`) is not
/// wrapped.
fn unwrapped(text: &str, markdown: bool) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let columned = |line: &str| line.trim().contains("   ");
    let opens = |line: &str| {
        let line = line.trim();
        line.is_empty()
            || (markdown && (line.starts_with('#') || line.starts_with('|')))
            || line.starts_with("```")
            || line.starts_with(['¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹', '*', '>'])
            || line
                .chars()
                .all(|c| matches!(c, '-' | '=' | '_' | '*' | ' '))
            || strip_bullet(line).len() < line.len()
            || columned(line)
    };
    let ends_sentence = |line: &str| {
        line.trim_end()
            .trim_end_matches(['*', '_', '"', '\'', ')', '’', '”'])
            .ends_with(['.', '!', '?', ':', ';'])
    };
    // The width the text is wrapped at, when it is: the longest line that goes on in lower
    // case on the next, if at least two do.
    let continued: Vec<usize> = lines
        .windows(2)
        .filter(|w| {
            !w[0].trim().is_empty()
                && !ends_sentence(w[0])
                && !opens(w[1])
                && w[1].trim_start().starts_with(char::is_lowercase)
        })
        .map(|w| w[0].trim_end().chars().count())
        .collect();
    let width = (continued.len() >= 2)
        .then(|| continued.iter().copied().max())
        .flatten();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut open = false;
    for (i, line) in lines.iter().enumerate() {
        let goes_on = open
            && !opens(line)
            && i > 0
            && (line.trim_start().starts_with(char::is_lowercase)
                || width.is_some_and(|w| {
                    let before = lines[i - 1].trim_end();
                    // A sentence may go on with a name, a number or a sum (`the fee
                    // is` / `£60.00.`).
                    line.trim_start().starts_with(|c: char| {
                        c.is_uppercase() || c.is_ascii_digit() || matches!(c, '£' | '$' | '€')
                    }) && !columned(before)
                        && !ends_sentence(before)
                        && before.chars().count() + 12 >= w
                }));
        match out.last_mut() {
            Some(last) if goes_on => {
                last.push(' ');
                last.push_str(line.trim());
            }
            _ => out.push((*line).to_owned()),
        }
        let trimmed = line.trim();
        open = !trimmed.is_empty()
            && !(markdown && (trimmed.starts_with('#') || trimmed.starts_with('|')))
            && !trimmed.starts_with("```");
    }
    out
}

/// A term and its description set apart by a run of spaces, as a manual's lists of exit
/// codes and options are written (`4   repository locked`, `--config PATH   config
/// file`), as the record `term: description`: the description is the term's, and a
/// question about `status 4` finds it by its key. Further columns become further fields.
/// Any other line has its runs of spaces made one (`It stopped.  Then …` is two sentences).
fn definition(line: &str) -> String {
    let columns: Vec<&str> = line
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let short_term = columns
        .first()
        .is_some_and(|t| t.split_whitespace().count() <= 3 && !t.ends_with(['.', ':', ',']));
    if columns.len() < 2 || !short_term {
        return line.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    format!("{}: {}", columns[0], columns[1..].join("; "))
}

/// A list item's text without its bullet or number (`- `, `* `, `+ `, `1. `, `2) `), and a
/// heading's without its section number (`3.2 `, `4.1.2. `) when a capital follows: the
/// number orders the sections, and a heading read with it would read as a line stating a
/// number, not as the heading its section's lines are found by.
fn strip_bullet(line: &str) -> &str {
    if let Some((number, rest)) = line.split_once(' ') {
        let parts: Vec<&str> = number.trim_end_matches('.').split('.').collect();
        if parts.len() >= 2
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.len() <= 3 && p.chars().all(|c| c.is_ascii_digit()))
            && rest.chars().next().is_some_and(char::is_uppercase)
        {
            return rest.trim_start();
        }
    }
    if let Some(rest) = line
        .strip_prefix("- ")
        .or_else(|| line.strip_prefix("* "))
        .or_else(|| line.strip_prefix("+ "))
    {
        return rest.trim_start();
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits <= 3 {
        let rest = &line[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return rest.trim_start();
        }
    }
    line
}

/// Splits a line into sentences: after `.`, `!` or `?` followed by a space and a capital
/// letter, a digit or a quote, unless the word ending there is a common abbreviation or a
/// single letter (an initial).
pub(crate) fn sentences(line: &str) -> Vec<String> {
    // Titles before a name (`Prof. Anders Lindqvist`) and abbreviations that a capital
    // or a number follows.
    const ABBREVIATIONS: [&str; 15] = [
        "e.g", "i.e", "etc", "vs", "no", "dr", "mr", "mrs", "ms", "prof", "rev", "approx", "fig",
        "min", "nos",
    ];
    let chars: Vec<char> = line.chars().collect();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '.' | '!' | '?')
            && chars.get(i + 1) == Some(&' ')
            && chars
                .get(i + 2)
                .is_some_and(|n| n.is_uppercase() || n.is_ascii_digit() || *n == '"')
        {
            let word: String = chars[start..i]
                .iter()
                .rev()
                .take_while(|c| !c.is_whitespace())
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let word = word.to_lowercase();
            let abbreviation = c == '.'
                && (ABBREVIATIONS.contains(&word.trim_start_matches('('))
                    || word.chars().count() == 1);
            if !abbreviation {
                out.push(
                    chars[start..=i]
                        .iter()
                        .collect::<String>()
                        .trim()
                        .to_owned(),
                );
                start = i + 2;
                i += 2;
                continue;
            }
        }
        i += 1;
    }
    let rest: String = chars[start..].iter().collect();
    if !rest.trim().is_empty() {
        out.push(rest.trim().to_owned());
    }
    out
}

/// The two tools over `base`: `search_docs` and `read_doc`.
///
/// # Errors
///
/// [`ToolError`] if a declaration is invalid (never for these).
pub fn toolbox(base: Arc<DocsBase>) -> Result<Toolbox, ToolError> {
    let search = base.clone();
    let ids: Vec<String> = unique(base.sources.iter().map(|s| s.source_id.as_str()))
        .into_iter()
        .map(str::to_owned)
        .collect();
    let versions: Vec<String> = unique(base.sources.iter().map(|s| s.version.as_str()))
        .into_iter()
        .map(str::to_owned)
        .collect();
    Toolbox::new()
        .bind(
            ToolSpec::new(
                "search_docs",
                "Full-text search over every document and version. Returns the best matching lines with their source id, version, line number and whether that version is in force.",
                IntentClass::Read,
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "minLength": 2, "maxLength": 200}},
                    "required": ["query"], "additionalProperties": false}),
            ),
            move |a| Ok(search.search(a.get("query").and_then(Value::as_str).unwrap_or_default(), 5)),
        )?
        .bind(
            ToolSpec::new(
                "read_doc",
                "Reads every numbered line of one document (the version in force when no version is given). Quote lines exactly as read.",
                IntentClass::Read,
                json!({"type": "object", "properties": {
                    "source_id": {"enum": ids},
                    "version": {"enum": versions}},
                    "required": ["source_id"], "additionalProperties": false}),
            ),
            move |a| {
                base.read(
                    a.get("source_id").and_then(Value::as_str).unwrap_or_default(),
                    a.get("version").and_then(Value::as_str),
                )
            },
        )
}

/// A fresh directory `proviso-NAME-PID` under the temporary directory, holding `files`
/// (path, text): the documents a test loads. The test removes it.
#[cfg(test)]
pub(crate) fn written_docs(name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("proviso-{name}-{}", std::process::id()));
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("a writable temporary directory");
        }
        std::fs::write(path, text).expect("a writable temporary directory");
    }
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_and_list_items_become_lines() {
        // A table's header without rows states nothing.
        let md = "# Install\n\n1. Keep 30 cm of clearance. Use a 16 A breaker.\n- Pipes: 22 mm, e.g. copper.\n| a | b |\n|---|---|\n";
        assert_eq!(
            text_units(md, true),
            [
                "Install",
                "Keep 30 cm of clearance.",
                "Use a 16 A breaker.",
                "Pipes: 22 mm, e.g. copper."
            ]
        );
        // A short footnote is one line, so each sentence is read with the first, which
        // names what it is about; a long one is read sentence by sentence.
        assert_eq!(
            text_units("² Hill Farm is seasonal. Members pay £2 a day.\n", true),
            ["² Hill Farm is seasonal. Members pay £2 a day."]
        );
        assert_eq!(
            text_units(
                "³ It rains. We shut. Bring a coat. Call us. Thanks for coming.\n",
                false
            )
            .len(),
            5,
            "a footnote of more than {FOOTNOTE_SENTENCES} sentences"
        );
        // A list item under a numbered heading is keyed by it; prose and items under a
        // heading without a number are not.
        assert_eq!(
            text_units(
                "## 3.0.0 (2024-09-10)\n- Removed: FTP backend.\nA quiet release.\n## Notes\n- Keep backups.\n",
                true
            ),
            [
                "3.0.0 (2024-09-10)",
                "3.0.0 (2024-09-10): Removed: FTP backend.",
                "A quiet release.",
                "Notes",
                "Keep backups."
            ]
        );
        // A manual's term and description set apart by spaces are a record; a sentence
        // after two spaces is not.
        assert_eq!(
            text_units(
                "EXIT STATUS\n    4   repository locked\n    --config PATH   config file (default /etc/a.toml)\nIt stopped.  Then it restarted.\n",
                false
            ),
            [
                "EXIT STATUS",
                "4: repository locked",
                "--config PATH: config file (default /etc/a.toml)",
                "It stopped.",
                "Then it restarted."
            ]
        );
        assert_eq!(
            jsonl_units("{\"code\": \"E04\", \"meaning\": \"Low flow\", \"level\": 2}\n\n"),
            ["code: E04; meaning: Low flow; level: 2"]
        );
        // A value that writes `; ` writes `, `: the line splits back into its fields.
        assert_eq!(
            jsonl_units("{\"id\": \"N\", \"parking\": \"none on site; car park 150 m\"}"),
            ["id: N; parking: none on site, car park 150 m"]
        );
        // An object's plain fields are fields keyed by both keys; a list stays as written.
        assert_eq!(
            jsonl_units(
                "{\"id\": \"P1\", \"acc\": {\"AD\": \"2025-05-15\", \"BSL\": \"2025-05-17\"}, \"lng\": [\"en\"]}"
            ),
            ["id: P1; acc AD: 2025-05-15; acc BSL: 2025-05-17; lng: [\"en\"]"]
        );
        // A record too long to quote whole is cited field by field, each led by its first.
        let long = format!(
            "{{\"branch\": \"North\", \"address\": \"1 Road\", \"hours\": \"{}\"}}",
            "x".repeat(RECORD_LINE)
        );
        let units = jsonl_units(&long);
        assert_eq!(units.len(), 2);
        assert_eq!(units[0], "branch: North; address: 1 Road");
        assert!(units[1].starts_with("branch: North; hours: xxx"));
        // A Markdown table's row is a record, each cell led by its column's header; the
        // header and delimiter rows are not lines of their own.
        assert_eq!(
            text_units(
                "## 2. Prices\n\n| Room | Weekday | **Weekend** |\n|---|:--:|---|\n| Dorm bed | £22 | £26 |\n| Private twin |  | £70 |\nPrices include breakfast.\n",
                true
            ),
            [
                "Prices",
                "Room: Dorm bed; Weekday: £22; Weekend: £26",
                "Room: Private twin; Weekend: £70",
                "Prices include breakfast."
            ]
        );
        // A section's number is no part of its heading; a measure opening a line stays.
        assert_eq!(
            text_units(
                "### 3.2 Group bookings\n3.2.1 Deposits\n2.5 m is the limit.\n",
                true
            ),
            ["Group bookings", "Deposits", "2.5 m is the limit."]
        );
        // A hard-wrapped sentence is one line again, in prose and in a list item; a title,
        // a header block and a list item's start are not continuations.
        assert_eq!(
            text_units(
                "NOTICE\nDate: 1 May 2025\n\nA consultation out of hours is charged at the usual price\nplus £145 on weekday evenings, or plus £189 on Sundays and on visits to\nHarrowvale members. It does not apply to booked visits.\n\n1.  Ordering. Order by phone, online\n    or at any clinic.\n2.  Collection. From 14:00.\n",
                false
            ),
            [
                "NOTICE",
                "Date: 1 May 2025",
                "A consultation out of hours is charged at the usual price plus £145 on weekday evenings, or plus £189 on Sundays and on visits to Harrowvale members.",
                "It does not apply to booked visits.",
                "Ordering.",
                "Order by phone, online or at any clinic.",
                "Collection.",
                "From 14:00."
            ]
        );
        // A wrapped sentence may go on with a sum.
        assert_eq!(
            text_units(
                "Electric cars are supplied with at least 80% charge and should be\nreturned with at least 70%, which is checked at the branch by the\nstaff at the desk. If the charge is below 70% but at least\n20%, we charge a flat recharging fee of £25.00; below 20%, the fee is\n£60.00.\n",
                false
            ),
            [
                "Electric cars are supplied with at least 80% charge and should be returned with at least 70%, which is checked at the branch by the staff at the desk.",
                "If the charge is below 70% but at least 20%, we charge a flat recharging fee of £25.00; below 20%, the fee is £60.00."
            ]
        );
        assert_eq!(
            sentences("Dr. Lee signed it. It was 2.5 m long."),
            ["Dr. Lee signed it.", "It was 2.5 m long."]
        );
        assert_eq!(
            sentences("Signed, Prof. Anders Lindqvist, DSMB Chair. To: Mrs. J. Okafor."),
            [
                "Signed, Prof. Anders Lindqvist, DSMB Chair.",
                "To: Mrs. J. Okafor."
            ]
        );
    }

    /// A line is found by its section's heading or lead-in too, and a heading by its own
    /// words only.
    #[test]
    fn lines_are_found_by_their_section() {
        let dir = written_docs(
            "sections",
            &[(
                "rules.txt",
                "Workshop rules (fictional)\nBooking the lathe:\n- A slot is up to 2 hours.\nCleaning up:\n- Sweep the floor after use.\n",
            )],
        );
        let base = DocsBase::load(&dir).unwrap();
        let hits = base.search("how long is a lathe booking", 5);
        let texts: Vec<&str> = hits["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["text"].as_str().unwrap())
            .collect();
        assert!(texts.contains(&"A slot is up to 2 hours."), "{texts:?}");
        assert!(!texts.contains(&"Sweep the floor after use."), "{texts:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A ranker whose scores are a measure of nearness (a sentence encoder's cosine),
    /// scripted: every line scores `0.8`.
    #[derive(Debug)]
    struct Cosine;

    impl crate::index::Rerank for Cosine {
        fn scores(
            &self,
            _query: &str,
            lines: &[&str],
        ) -> Result<Vec<f32>, proviso_decode::EngineError> {
            Ok(vec![0.8; lines.len()])
        }

        fn as_nearness(&self) -> Option<Arc<dyn proviso_contract::Nearness>> {
            Some(Arc::new(Cosine))
        }
    }

    impl proviso_contract::Nearness for Cosine {
        fn nearness(&self, _text: &str, lines: &[&str]) -> Option<Vec<f32>> {
            Some(vec![0.8; lines.len()])
        }
    }

    /// A ranker whose scores are no measure of nearness (a query likelihood).
    #[derive(Debug)]
    struct Likelihood;

    impl crate::index::Rerank for Likelihood {
        fn scores(
            &self,
            _query: &str,
            lines: &[&str],
        ) -> Result<Vec<f32>, proviso_decode::EngineError> {
            Ok(vec![-3.0; lines.len()])
        }
    }

    /// Re-ranking with a sentence encoder also gives the answer rules its measure of
    /// nearness, through the store the gates and the steering read; a ranker whose scores
    /// measure something else gives none.
    #[test]
    fn an_encoders_ranker_gives_the_store_its_measure_of_nearness() {
        let dir = written_docs(
            "nearness",
            &[("rules.txt", "Rules\nA slot is up to 2 hours.\n")],
        );
        let base = DocsBase::load(&dir).unwrap();
        assert_eq!(base.store().nearness("how long?", &["A slot"]), None);
        base.rerank_with(Arc::new(Likelihood));
        assert_eq!(base.store().nearness("how long?", &["A slot"]), None);
        base.rerank_with(Arc::new(Cosine));
        assert_eq!(
            base.store().nearness("how long?", &["A slot"]),
            Some(vec![0.8])
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The texts of a search's results, in order.
    fn texts(hits: &Value) -> Vec<&str> {
        hits["results"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h["text"].as_str())
            .collect()
    }

    #[test]
    fn a_line_is_found_by_its_documents_title_but_a_record_stands_alone() {
        let dir = written_docs(
            "docs-title",
            &[
                (
                    "release.txt",
                    "Oak Street branch to be refurbished\nThe work will be done by Brick & Co.\n",
                ),
                (
                    "other.txt",
                    "Elm Road branch news\nThe work on the car park is done.\n",
                ),
                (
                    "branches.jsonl",
                    "{\"branch\": \"Oak Street\", \"phone\": \"0100\"}\n{\"branch\": \"Pine Hill\", \"phone\": \"0200\"}\n",
                ),
            ],
        );
        let base = DocsBase::load(&dir).unwrap();
        // The sentence never names the branch; its document's title does.
        let hits = base.search("who does the work at Oak Street", 5);
        let first = &hits["results"][0];
        assert_eq!(
            first["text"], "The work will be done by Brick & Co.",
            "{hits}"
        );
        // A `.jsonl` file's first record is no title: the next record is not found by it.
        let hits = base.search("Oak Street", 5);
        assert!(
            !texts(&hits).iter().any(|t| t.contains("Pine Hill")),
            "{hits}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_with_a_manifest_becomes_versioned_citable_lines() {
        let dir = std::env::temp_dir().join(format!("proviso-docs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(
            dir.join("policy-v1.txt"),
            "The limit is 600 yuan. Receipts within 60 days.\n",
        )
        .unwrap();
        std::fs::write(dir.join("policy-v2.txt"), "The limit is 750 yuan.\n").unwrap();
        std::fs::write(
            dir.join("sub/notes.md"),
            "## Notes\n- Breakfast is included.\n",
        )
        .unwrap();
        std::fs::write(dir.join("ignored.pdf"), "x").unwrap();
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"sources": [{"source_id": "policy", "version": "v1", "file": "policy-v1.txt", "in_force": false, "until": "2025-12-31"},
                {"source_id": "policy", "version": "v2", "file": "policy-v2.txt", "in_force": true, "effective": "2026-01-01"}]}"#,
        )
        .unwrap();
        let base = DocsBase::load(&dir).unwrap();
        assert_eq!(base.len(), 5);
        assert_eq!(base.read("policy", None).unwrap()["version"], "v2");
        assert_eq!(
            base.read("policy", Some("v1")).unwrap()["lines"][1]["text"],
            "Receipts within 60 days."
        );
        assert_eq!(
            base.read("sub/notes", None).unwrap()["lines"][1]["text"],
            "Breakfast is included."
        );
        // The two lines that state a limit come first; the receipts line is found through
        // its document's first line, which it follows.
        let hits = base.search("limit yuan", 5);
        let texts = texts(&hits);
        assert_eq!(texts.len(), 3, "{hits}");
        assert!(
            texts[..2].iter().all(|t| t.starts_with("The limit is")),
            "{hits}"
        );
        let contract = base.answer_contract().unwrap();
        let good = json!({"answer": "The limit is 750 yuan.", "citations": [{"source_id": "policy", "version": "v2",
            "line_start": 1, "line_end": 1, "quote": "The limit is 750 yuan."}]});
        assert!(contract.check_text(good.to_string().as_bytes()).accepted());
        let misquoted = json!({"answer": "The limit is 700 yuan.", "citations": [{"source_id": "policy", "version": "v2",
            "line_start": 1, "line_end": 1, "quote": "The limit is 700 yuan."}]});
        assert!(!contract
            .check_text(misquoted.to_string().as_bytes())
            .accepted());
        // An excluded file is not read; a pattern that is not a glob is refused by name.
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"sources": [], "exclude": ["sub/*", "policy-v1.txt"]}"#,
        )
        .unwrap();
        let base = DocsBase::load(&dir).unwrap();
        assert_eq!(base.len(), 1);
        assert!(base.read("sub/notes", None).is_err());
        std::fs::write(
            dir.join("manifest.json"),
            r#"{"sources": [], "exclude": ["[a"]}"#,
        )
        .unwrap();
        let error = DocsBase::load(&dir).unwrap_err().to_string();
        assert!(error.contains("/exclude/0"), "{error}");
        // A manifest naming a missing file is refused by name.
        std::fs::write(dir.join("manifest.json"), r#"{"sources": [{"source_id": "x", "version": "v1", "file": "gone.txt", "in_force": true}]}"#).unwrap();
        let error = DocsBase::load(&dir).unwrap_err().to_string();
        assert!(error.contains("gone.txt"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
