//! `proviso eval questions`: a question bank run through the agents users run (the bundled
//! ones, or the documents agent over `--docs DIR`), greedy, on the local model, scored
//! against each question's expected and forbidden facts.
//!
//! An end is `right` (an accepted answer stating an expected fact and no forbidden one; for
//! a question the documents cannot answer, any end but an accepted answer), `wrong` (an
//! accepted answer stating a forbidden fact, or any accepted answer to a question the
//! documents cannot answer), `no_fact` (accepted, stating neither) or `abstained` (no
//! accepted answer: a typed end such as an exhausted budget). Retrieval is measured apart
//! from the model: recall@5 is whether the index's five best lines for the question's own
//! words include one that states an expected fact. `--retrieval` measures only that, without
//! the model.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use proviso::contract::{Question, SourceStore};
use proviso::decode::{CompileOptions, Sampling};
use proviso::harness::steer::{self, Citable};
use proviso::harness::{Agent, RunEnd};
use proviso::llama::RunOptions;
use proviso::tools::CallFormat;
use proviso::{LocalModel, LocalProposer};
use proviso_demo::docs::DocsBase;
use proviso_demo::index::Rerank;
use proviso_demo::{travel::PolicyBase, trials::TrialCorpus, DemoKind};
use serde_json::{json, Value};

/// How one question ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Right,
    Wrong,
    NoFact,
    Abstained,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Self::Right => "right",
            Self::Wrong => "wrong",
            Self::NoFact => "no_fact",
            Self::Abstained => "abstained",
        }
    }
}

fn strings(case: &Value, key: &str) -> Vec<String> {
    case[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_lowercase)
                .collect()
        })
        .unwrap_or_default()
}

/// Scores an end against a question.
fn score(case: &Value, end: &RunEnd) -> (Outcome, String) {
    let answer = match end {
        RunEnd::FinalAnswer { answer } => Some(
            answer["answer"]
                .as_str()
                .map_or_else(|| answer.to_string(), str::to_owned),
        ),
        _ => None,
    };
    score_text(case, answer)
}

/// Scores an accepted answer's text (`None`: no accepted answer) against a question.
fn score_text(case: &Value, answer: Option<String>) -> (Outcome, String) {
    let answerable = case["answerable"].as_bool().unwrap_or(true);
    let Some(text) = answer else {
        let outcome = if answerable {
            Outcome::Abstained
        } else {
            Outcome::Right
        };
        return (outcome, String::new());
    };
    let lower = text.to_lowercase();
    let forbidden = strings(case, "forbidden");
    if !answerable || forbidden.iter().any(|f| lower.contains(f.as_str())) {
        return (Outcome::Wrong, text);
    }
    if strings(case, "facts")
        .iter()
        .any(|f| lower.contains(f.as_str()))
    {
        (Outcome::Right, text)
    } else {
        (Outcome::NoFact, text)
    }
}

/// The corpora a bank's questions are about, loaded once.
struct Corpora {
    docs: Option<Arc<DocsBase>>,
    trials: Arc<TrialCorpus>,
    travel: Arc<PolicyBase>,
    /// How searches rank lines ([`crate::demo::search_ranker`]), given to every agent too.
    rerank: Option<Arc<dyn Rerank>>,
}

impl Corpora {
    /// The agent a user would run for the question, its searches ranked as the CLI's are.
    fn agent(&self, case: &Value) -> Result<Agent> {
        let rerank = self.rerank.clone();
        Ok(match &self.docs {
            Some(base) => proviso_demo::docs_agent(base.clone())?,
            None => match case["corpus"].as_str() {
                Some("travel") => {
                    proviso_demo::agent_with(DemoKind::Travel, CallFormat::Envelope, rerank)?
                }
                _ => proviso_demo::agent_with(DemoKind::Trials, CallFormat::Hermes, rerank)?,
            },
        })
    }

    /// The search tool's result for the question's own words, as the agent's first search
    /// writes them ([`steer::first_queries`]): its five best lines.
    fn search(&self, case: &Value) -> Value {
        let queries = steer::first_queries(case["question"].as_str().unwrap_or_default());
        let question = queries.first().map_or("", String::as_str);
        match &self.docs {
            Some(base) => base.search(question, 5),
            None => match case["corpus"].as_str() {
                Some("travel") => self.travel.search(question, 5),
                _ => self.trials.search(question, 5),
            },
        }
    }

    /// The sources the question's agent cites from.
    fn store(&self, case: &Value) -> &SourceStore {
        match &self.docs {
            Some(base) => base.store(),
            None => match case["corpus"].as_str() {
                Some("travel") => self.travel.store(),
                _ => self.trials.store(),
            },
        }
    }

    /// The texts of the five best lines for the question's own words.
    fn top_lines(&self, case: &Value) -> Vec<String> {
        hit_texts(&self.search(case))
    }
}

/// The texts of a search's hits: every search tool returns them as
/// `{"results": [{"text", ...}]}`.
fn hit_texts(results: &Value) -> Vec<String> {
    results["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|hit| hit["text"].as_str().map(str::to_owned))
        .collect()
}

/// What `proviso eval questions` was asked to run.
pub(crate) struct Run<'a> {
    pub(crate) bank: &'a Path,
    pub(crate) docs: Option<&'a Path>,
    pub(crate) split: &'a str,
    pub(crate) limit: Option<usize>,
    pub(crate) out: Option<&'a Path>,
    /// Whether searches re-rank their best lines with the local model (`--rerank`).
    pub(crate) rerank: bool,
    /// Whether searches use BM25 alone (`--lexical`).
    pub(crate) lexical: bool,
}

impl Run<'_> {
    /// The bank's questions of the split (the first `limit`), and the corpora they are about,
    /// their searches re-ranked over `local` when the run re-ranks.
    fn load(&self, local: Option<&LocalModel>) -> Result<(Vec<Value>, Corpora)> {
        let bank = self.bank;
        let text =
            std::fs::read_to_string(bank).with_context(|| format!("reading {}", bank.display()))?;
        let document: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", bank.display()))?;
        let Some(all) = document["questions"].as_array() else {
            bail!("{} has no `questions` array", bank.display());
        };
        let cases: Vec<Value> = all
            .iter()
            .filter(|c| self.split == "all" || c["split"].as_str().unwrap_or("test") == self.split)
            .take(self.limit.unwrap_or(usize::MAX))
            .cloned()
            .collect();
        let corpora = Corpora {
            docs: match self.docs {
                Some(dir) => Some(Arc::new(
                    DocsBase::load(dir).with_context(|| format!("reading {}", dir.display()))?,
                )),
                None => None,
            },
            trials: Arc::new(TrialCorpus::bundled()),
            travel: Arc::new(PolicyBase::bundled()?),
            rerank: crate::demo::search_ranker(local, self.rerank, self.lexical)?,
        };
        if let Some(rerank) = &corpora.rerank {
            if let Some(docs) = &corpora.docs {
                docs.rerank_with(rerank.clone());
            }
            corpora.trials.rerank_with(rerank.clone());
            corpora.travel.rerank_with(rerank.clone());
        }
        Ok((cases, corpora))
    }

    /// The local model, when searches re-rank with it.
    fn local(&self) -> Result<Option<LocalModel>> {
        Ok(if self.rerank {
            Some(LocalModel::open(None, &mut crate::model::report_progress)?)
        } else {
            None
        })
    }

    /// Writes one JSON line per question to `--out`, when given.
    fn write(&self, lines: &[Value]) -> Result<()> {
        if let Some(path) = self.out {
            let mut file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            for line in lines {
                writeln!(file, "{line}")?;
            }
        }
        Ok(())
    }
}

/// Whether `top`, the index's five best lines for the question's own words, include one
/// that states an expected fact (always, for a question the documents cannot answer).
fn recalled(case: &Value, top: &[String]) -> bool {
    let facts = strings(case, "facts");
    !case["answerable"].as_bool().unwrap_or(true)
        || top.iter().any(|line| {
            let line = line.to_lowercase();
            facts.iter().any(|f| line.contains(f.as_str()))
        })
}

/// `--harness`: the answer the harness itself offers, without the model. The question's
/// own words are searched; when no line found answers it, the source the agent would read
/// next (on the subject, its title stating the most of it, else the first the results
/// named) is read whole; the first line [`steer::rank_citations`] keeps, as its first span,
/// is scored as an accepted answer. The agent offers the model only that line and a few of
/// its spans, so this measures the ranking and the answer rules, which the model cannot
/// repair, in a second for a whole bank.
pub(crate) fn harness(run: &Run<'_>) -> Result<()> {
    let local = run.local()?;
    let (cases, corpora) = run.load(local.as_ref())?;
    let mut lines = Vec::new();
    let mut rows: Vec<(String, Outcome, f64, bool, bool)> = Vec::new();
    for case in &cases {
        let question = case["question"].as_str().unwrap_or_default();
        let answerable = case["answerable"].as_bool().unwrap_or(true);
        let store = corpora.store(case);
        let asked = Question::new(question, store);
        let earlier = asked.asks_earlier_version();
        let found = corpora.search(case);
        let rank = |results: &[&Value]| {
            let observed = steer::cited_lines(results, store, earlier);
            let ranked = steer::rank_citations(&observed, &asked, store, 1);
            (observed, ranked)
        };
        let (mut observed, mut ranked) = rank(&[&found]);
        let read = if ranked.is_empty() {
            next_source(&found, &asked, store)
        } else {
            None
        };
        let whole = read.and_then(|(source, version)| {
            store
                .versions(source)
                .iter()
                .find(|d| d.version() == version)
        });
        if let Some(doc) = whole {
            (observed, ranked) = rank(&[&found, &doc.read_result()]);
        }
        let answer = ranked.first().map(Citable::first_answer);
        let cited = ranked.first().map(|c| c.citation.clone());
        // Why each line stating an expected fact was not the one offered.
        let facts = strings(case, "facts");
        let mut fact_lines = Vec::new();
        for doc in store.documents() {
            for line in doc.lines() {
                let lower = line.to_lowercase();
                if !facts.iter().any(|f| lower.contains(f.as_str())) {
                    continue;
                }
                let seen = observed
                    .iter()
                    .any(|c| c["quote"] == line.as_str() && c["source_id"] == doc.source_id());
                let why = steer::refusal(&asked, store, doc.source_id(), line);
                fact_lines.push(
                    json!({"source": format!("{} {}", doc.source_id(), doc.version()),
                    "line": line, "seen": seen, "refused": why}),
                );
            }
        }
        // The store's documents come in no fixed order; the output has one.
        fact_lines.sort_by(|a, b| a["source"].as_str().cmp(&b["source"].as_str()));
        let (outcome, text) = score_text(case, answer);
        let kind = case["kind"].as_str().unwrap_or("other").to_owned();
        if !matches!(outcome, Outcome::Right) {
            let _ = writeln!(
                std::io::stderr().lock(),
                "{:>9}  {question}\n           → {text}",
                outcome.name()
            );
        }
        lines.push(
            json!({"id": case["id"], "question": question, "kind": kind, "outcome": outcome.name(),
            "answer": text, "cited": cited, "read": read.map(|(s, v)| format!("{s} {v}")),
            "fact_lines": fact_lines, "asked": asked}),
        );
        let recalled = recalled(case, &hit_texts(&found));
        rows.push((kind, outcome, 0.0, recalled, answerable));
    }
    run.write(&lines)?;
    writeln!(
        std::io::stdout().lock(),
        "{}",
        summary(run.bank, run.split, &rows)
    )?;
    Ok(())
}

/// The source (and version) the agent reads after a search whose lines answer nothing:
/// of the sources the results named, on the question's subject, the one whose title states
/// the most of it, the first named among equals; a version no longer in force first when
/// the question asks about an earlier one.
fn next_source<'a>(
    found: &'a Value,
    asked: &Question,
    store: &'a SourceStore,
) -> Option<(&'a str, &'a str)> {
    let mut named: Vec<&str> = Vec::new();
    for hit in found["results"].as_array().into_iter().flatten() {
        if let Some(source) = hit["source_id"].as_str() {
            if !named.contains(&source) {
                named.push(source);
            }
        }
    }
    let mut best: Option<(f64, &str)> = None;
    for source in named {
        let Some(rank) = steer::read_rank(asked, source) else {
            continue;
        };
        if best.is_none_or(|(r, _)| rank > r) {
            best = Some((rank, source));
        }
    }
    let source = best?.1;
    let versions = store.versions(source);
    let doc = versions
        .iter()
        .find(|d| asked.asks_earlier_version() && !d.in_force())
        .or_else(|| versions.iter().find(|d| d.in_force()))?;
    Some((doc.source_id(), doc.version()))
}

/// `--retrieval`: recall@5 per kind, without the model.
pub(crate) fn retrieval(run: &Run<'_>) -> Result<()> {
    let local = run.local()?;
    let (cases, corpora) = run.load(local.as_ref())?;
    let mut lines = Vec::new();
    let mut kinds: std::collections::BTreeMap<String, (usize, usize)> =
        std::collections::BTreeMap::new();
    for case in cases
        .iter()
        .filter(|c| c["answerable"].as_bool().unwrap_or(true))
    {
        let top = corpora.top_lines(case);
        let hit = recalled(case, &top);
        let kind = case["kind"].as_str().unwrap_or("other").to_owned();
        let entry = kinds.entry(kind.clone()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(hit);
        if !hit {
            let _ = writeln!(
                std::io::stderr().lock(),
                "   missed  {}",
                case["question"].as_str().unwrap_or_default()
            );
        }
        lines.push(
            json!({"id": case["id"], "question": case["question"], "kind": kind,
            "recall_at_5": hit, "top": top}),
        );
    }
    run.write(&lines)?;
    let mut text = format!(
        "{} · split {} · recall@5 of a line stating an expected fact, for the question's own words\n\n| kind | answerable | recalled |\n|---|---|---|\n",
        run.bank.display(),
        run.split
    );
    for (kind, (n, hit)) in &kinds {
        text.push_str(&format!("| {kind} | {n} | {hit} |\n"));
    }
    let (n, hit) = kinds.values().fold((0, 0), |(n, h), (a, b)| (n + a, h + b));
    text.push_str(&format!(
        "| **all** | {n} | {hit} ({:.0}%) |\n",
        100.0 * hit as f64 / n.max(1) as f64
    ));
    writeln!(std::io::stdout().lock(), "{text}")?;
    Ok(())
}

pub(crate) fn run(run: &Run<'_>) -> Result<()> {
    let local = LocalModel::open(None, &mut crate::model::report_progress)?;
    let (cases, corpora) = run.load(Some(&local))?;
    let mut lines = Vec::new();
    let mut rows: Vec<(String, Outcome, f64, bool, bool)> = Vec::new();
    for case in &cases {
        let question = case["question"].as_str().unwrap_or_default();
        let answerable = case["answerable"].as_bool().unwrap_or(true);
        let recalled = recalled(case, &corpora.top_lines(case));
        let agent = corpora.agent(case)?;
        let engine = local.engine(RunOptions::default())?;
        let mut proposer = LocalProposer::new(
            &local,
            engine,
            Sampling::greedy(),
            CompileOptions::default(),
        );
        let started = Instant::now();
        let report = agent.run(&mut proposer, question, &mut ());
        let seconds = started.elapsed().as_secs_f64();
        let (outcome, text) = score(case, &report.end);
        let kind = case["kind"].as_str().unwrap_or("other").to_owned();
        // Progress on stderr: a bank takes minutes.
        let _ = writeln!(
            std::io::stderr().lock(),
            "{:>9}  {seconds:5.1} s  {question}\n           → {text}",
            outcome.name()
        );
        lines.push(
            json!({"id": case["id"], "question": question, "kind": kind, "outcome": outcome.name(),
            "answer": text, "seconds": seconds, "recall_at_5": recalled, "end": report.end}),
        );
        rows.push((kind, outcome, seconds, recalled, answerable));
    }
    run.write(&lines)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", summary(run.bank, run.split, &rows))?;
    Ok(())
}

/// The Markdown summary: outcomes per kind and in all, median time, recall@5.
fn summary(bank: &Path, split: &str, rows: &[(String, Outcome, f64, bool, bool)]) -> String {
    let mut kinds: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let mut text = format!(
        "{} · split {split} · {} questions\n\n| kind | questions | right | wrong | no fact | abstained |\n|---|---|---|---|---|---|\n",
        bank.display(),
        rows.len()
    );
    let line = |name: &str, subset: Vec<&(String, Outcome, f64, bool, bool)>| {
        let count = |o: Outcome| subset.iter().filter(|r| r.1 == o).count();
        format!(
            "| {name} | {} | {} | {} | {} | {} |\n",
            subset.len(),
            count(Outcome::Right),
            count(Outcome::Wrong),
            count(Outcome::NoFact),
            count(Outcome::Abstained)
        )
    };
    for kind in &kinds {
        text.push_str(&line(kind, rows.iter().filter(|r| r.0 == *kind).collect()));
    }
    text.push_str(&line("**all**", rows.iter().collect()));
    let mut times: Vec<f64> = rows.iter().map(|r| r.2).collect();
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(0.0);
    // `--harness` runs no model, so it has no time to report.
    let timed = if median > 0.0 {
        format!(" · median {median:.1} s per question")
    } else {
        String::new()
    };
    let answerable: Vec<_> = rows.iter().filter(|r| r.4).collect();
    let recalled = answerable.iter().filter(|r| r.3).count();
    let right = rows.iter().filter(|r| r.1 == Outcome::Right).count();
    text.push_str(&format!(
        "\nright {right} of {} ({:.0}%){timed} · retrieval recall@5 (the question's own words) {recalled} of {} ({:.0}%)\n",
        rows.len(),
        100.0 * right as f64 / rows.len().max(1) as f64,
        answerable.len(),
        100.0 * recalled as f64 / answerable.len().max(1) as f64
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_are_scored_against_facts_and_forbidden_facts() {
        let case = json!({"facts": ["750 yuan"], "forbidden": ["600"], "answerable": true});
        let answer = |text: &str| RunEnd::FinalAnswer {
            answer: json!({"answer": text, "citations": []}),
        };
        assert_eq!(
            score(&case, &answer("The limit is 750 yuan.")).0,
            Outcome::Right
        );
        assert_eq!(
            score(&case, &answer("It was 600, now 750 yuan.")).0,
            Outcome::Wrong
        );
        assert_eq!(
            score(&case, &answer("Fictional Beijing lodging policy.")).0,
            Outcome::NoFact
        );
        let unanswerable = json!({"facts": [], "forbidden": [], "answerable": false});
        assert_eq!(score(&unanswerable, &answer("Anything.")).0, Outcome::Wrong);
    }
}
