//! Why each line a search returns does or does not answer a question: the question as
//! [`Question`] reads it (kind, terms, what it asks beyond its subject, proper names), then,
//! for each of the top lines, whether it may be cited, states the question's names, is on
//! its subject, what it misses, and the spans an answer may be. The tool for tuning the
//! answer-relevance rule on a development set without running the model.
//!
//! Usage: `cargo run --release --example why -- DIR QUESTION [QUERY]` (the query defaults to
//! the question). The search is the agent's: BM25 fused with the sentence encoder.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use proviso_contract::Question;
use proviso_demo::docs::DocsBase;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(dir), Some(question)) = (args.first(), args.get(1)) else {
        eprintln!("usage: why DIR QUESTION [QUERY]");
        std::process::exit(2);
    };
    let base = match DocsBase::load(std::path::Path::new(dir)) {
        Ok(base) => base,
        Err(e) => {
            eprintln!("why: {e}");
            std::process::exit(1);
        }
    };
    // The search the agent makes: BM25 fused with the sentence encoder.
    match proviso_model::ensure(&proviso_model::ENCODER_MODEL, &mut |_| {})
        .map_err(|e| e.to_string())
        .and_then(|path| proviso_embed::Encoder::from_zip(&path).map_err(|e| e.to_string()))
    {
        Ok(encoder) => base.rerank_with(std::sync::Arc::new(proviso_demo::index::Semantic::new(
            std::sync::Arc::new(encoder),
        ))),
        Err(e) => eprintln!("why: no sentence encoder ({e}); BM25 alone"),
    }
    let q = Question::new(question, base.store());
    println!(
        "{}",
        serde_json::to_string(&q).unwrap_or_else(|e| e.to_string())
    );
    let hits = base.search(args.get(2).unwrap_or(question), 8);
    for hit in hits["results"].as_array().into_iter().flatten() {
        let text = hit["text"].as_str().unwrap_or_default();
        let source = hit["source_id"].as_str().unwrap_or_default();
        // Read as the harness reads a result: with its source (section, title, antecedent).
        let spans: Vec<String> = q.spans_in(text, Some(source)).into_iter().take(2).collect();
        println!(
            "- {source}:{} {text}\n    citable {} names {} on subject {} misses {:?}\n    spans {spans:?}",
            hit["line"],
            q.citable(text),
            q.names_stated(text, source),
            q.on_subject(source),
            q.misses_in(text, Some(source)),
        );
    }
    // What the harness offers from these lines: the ranked lines' first spans.
    let observed =
        proviso_harness::steer::cited_lines(&[&hits], base.store(), q.asks_earlier_version());
    for c in proviso_harness::steer::rank_citations(&observed, &q, base.store(), 3) {
        println!("= offered {:?}", c.spans);
    }
}
