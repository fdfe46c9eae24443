//! A full-text index: lines tokenized into the lexicon's content stems (the words the answer
//! rules weigh), ranked by BM25 (the `bm25` crate), with a deterministic order for ties; and,
//! with a re-ranker, BM25's order fused with another: a sentence encoder's, over every line
//! ([`Semantic`], the default of `demo`, `agent` and `eval questions`), or a language model's
//! query likelihood over BM25's best ten ([`QueryLikelihood`], `--rerank`).

use std::sync::{Arc, Mutex, OnceLock};

use bm25::{SearchEngine, SearchEngineBuilder};
use proviso_decode::{Engine, EngineError, TokenId, Tokenizer};

/// How many of BM25's best candidates a re-ranker orders: the model reads each, so the pool
/// bounds a search's cost (about 50 tokens of prompt each).
pub const RERANK_POOL: usize = 10;

/// The constant of reciprocal-rank fusion: a line's fused score is `1/(k + rank)` summed
/// over the two orders, so neither order's first place outweighs agreement.
const FUSION_K: f64 = 10.0;

/// Scores candidate lines against a query: a higher score, a line more likely to answer it.
pub trait Rerank: Send + Sync + std::fmt::Debug {
    /// One score per line.
    ///
    /// # Errors
    ///
    /// [`EngineError`] when the model fails; the search then keeps the BM25 order.
    fn scores(&self, query: &str, lines: &[&str]) -> Result<Vec<f32>, EngineError>;

    /// Whether it scores every line cheaply enough to retrieve as well as re-rank: the
    /// lines that share no word with the query then join the candidates, placed by its
    /// score alone ([`Semantic`]).
    fn retrieves(&self) -> bool {
        false
    }

    /// Does ahead of the searches what a first search would otherwise pay for (a
    /// [`Semantic`] ranker encodes every line it retrieves among). The cost then falls when
    /// the documents are set up, not inside a tool call, where a tool's timeout would turn
    /// a large or a busy machine's first search into a failed lookup.
    ///
    /// # Errors
    ///
    /// [`EngineError`] when the model fails; the searches then do the work themselves.
    fn prepare(&self, _lines: &[&str]) -> Result<(), EngineError> {
        Ok(())
    }

    /// Its scores as a measure of how near a line is to a text, for the answer rules to
    /// weigh ([`proviso_contract::SourceStore::measure_with`]), when they are one: a
    /// sentence encoder's cosine is, a language model's query likelihood (which grows
    /// with the query's length) is not.
    fn as_nearness(&self) -> Option<Arc<dyn proviso_contract::Nearness>> {
        None
    }
}

/// Semantic retrieval: a sentence encoder's cosine between the query and each line
/// ([`proviso_embed::Encoder`]). It scores every line of a document set (each line is
/// encoded once and cached), so a search also finds the lines that say what is asked in
/// other words (`day ticket` for "day pass", `pets` for "dog"), fused with BM25's order.
#[derive(Debug, Clone)]
pub struct Semantic {
    encoder: Arc<proviso_embed::Encoder>,
}

impl Semantic {
    /// Semantic retrieval with `encoder`.
    #[must_use]
    pub fn new(encoder: Arc<proviso_embed::Encoder>) -> Self {
        Self { encoder }
    }
}

impl Rerank for Semantic {
    fn scores(&self, query: &str, lines: &[&str]) -> Result<Vec<f32>, EngineError> {
        self.encoder
            .similarities(query, lines)
            .map_err(|e| EngineError::Runtime(e.to_string()))
    }

    fn retrieves(&self) -> bool {
        true
    }

    fn prepare(&self, lines: &[&str]) -> Result<(), EngineError> {
        self.encoder
            .embed(lines)
            .map(drop)
            .map_err(|e| EngineError::Runtime(e.to_string()))
    }

    fn as_nearness(&self) -> Option<Arc<dyn proviso_contract::Nearness>> {
        Some(Arc::new(self.clone()))
    }
}

impl proviso_contract::Nearness for Semantic {
    fn nearness(&self, text: &str, lines: &[&str]) -> Option<Vec<f32>> {
        self.encoder
            .similarities(text, lines)
            .map_err(|e| tracing::warn!(error = %e, "measuring nearness failed; words alone judge"))
            .ok()
    }
}

/// Query likelihood: the log-probability a language model gives the query as the question
/// a line answers (unsupervised passage re-ranking). It finds what words do not share: a
/// line saying `on loan` for a question saying `checked out`. Line and query are tokenized
/// as text, never as control tokens.
pub struct QueryLikelihood {
    engine: Mutex<Box<dyn Engine>>,
    tokenizer: Arc<dyn Tokenizer>,
}

impl std::fmt::Debug for QueryLikelihood {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryLikelihood").finish_non_exhaustive()
    }
}

/// The prompt around a line and the query, as (before the line, between line and query).
const FRAME: (&str, &str) = ("Document: ", "\nQuestion this answers:");

impl QueryLikelihood {
    /// A re-ranker over its own engine (a context of its own, so a search never disturbs a
    /// generation's cache).
    #[must_use]
    pub fn new(engine: Box<dyn Engine>, tokenizer: Arc<dyn Tokenizer>) -> Self {
        Self {
            engine: Mutex::new(engine),
            tokenizer,
        }
    }
}

impl Rerank for QueryLikelihood {
    fn scores(&self, query: &str, lines: &[&str]) -> Result<Vec<f32>, EngineError> {
        let mut engine = self
            .engine
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        engine.acquire()?;
        let text = |t: &str| self.tokenizer.tokenize(t.as_bytes(), false);
        let mut head: Vec<TokenId> = self.tokenizer.bos().into_iter().collect();
        head.extend(text(FRAME.0));
        let between = text(FRAME.1);
        let asked = text(&format!(" {}", query.trim()));
        let mut scores = Vec::with_capacity(lines.len());
        for line in lines {
            // The frame's start is fed once and kept: only the line and what follows are new.
            if engine.history().starts_with(&head) {
                engine.truncate(head.len())?;
            } else {
                engine.reset()?;
                engine.decode(&head)?;
            }
            let mut prompt = text(line);
            prompt.extend_from_slice(&between);
            let room = engine
                .capacity()
                .saturating_sub(head.len() + asked.len() + 1);
            prompt.truncate(room);
            engine.decode(&prompt)?;
            scores.push(engine.score(&asked)?.iter().sum());
        }
        engine.release();
        Ok(scores)
    }
}

/// For a question asking what kind of thing a name is ([`Question::text_asks_kind_of`]),
/// the lines that define it ([`Question::defines_kind`]: `tesoglutide, an … peptide`) come
/// first, each keeping its order: a definition says the name once, in passing, where the
/// lines about its doses say it twice and outrank it by their words.
///
/// [`Question::text_asks_kind_of`]: proviso_contract::Question::text_asks_kind_of
/// [`Question::defines_kind`]: proviso_contract::Question::defines_kind
fn definitions_first<'a>(query: &str, hits: &mut [Hit], text: impl Fn(usize) -> &'a str) {
    if let Some(name) = proviso_contract::Question::text_asks_kind_of(query) {
        hits.sort_by_key(|h| !proviso_contract::Question::defines_kind(text(h.index), &name));
    }
}

/// What the index counts as a word: the lexicon's content stems
/// ([`proviso_contract::lexicon::content_stems`]), the same words the answer rules weigh. A
/// search and the rules that judge its lines thus agree on what a line shares with a
/// question: `lent` meets `borrow` in both, `open again` is `reopen` in both, and a word
/// the rules ignore (`the`, `how`) never ranks a line.
struct ContentStems;

impl bm25::Tokenizer for ContentStems {
    fn tokenize(&self, text: &str) -> Vec<String> {
        proviso_contract::lexicon::content_stems(text)
    }
}

/// A BM25 index over short documents identified by their position.
pub struct TextIndex {
    engine: SearchEngine<u32, u32, ContentStems>,
    len: usize,
    /// The re-ranker, once one is given.
    rerank: OnceLock<Arc<dyn Rerank>>,
}

impl std::fmt::Debug for TextIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextIndex")
            .field("documents", &self.len)
            .finish_non_exhaustive()
    }
}

/// One ranked hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// The document's position in the indexed list.
    pub index: usize,
    /// Its BM25 score (higher is better).
    pub score: f32,
}

impl TextIndex {
    /// Indexes `documents`.
    #[must_use]
    pub fn new(documents: &[String]) -> Self {
        let docs: Vec<bm25::Document<u32>> = documents
            .iter()
            .enumerate()
            .map(|(i, text)| {
                bm25::Document::new(u32::try_from(i).unwrap_or(u32::MAX), text.clone())
            })
            .collect();
        Self {
            engine: SearchEngineBuilder::<u32, u32, ContentStems>::with_tokenizer_and_documents(
                ContentStems,
                docs,
            )
            .build(),
            len: documents.len(),
            rerank: OnceLock::new(),
        }
    }

    /// Re-ranks every later search's best candidates with `rerank` (the first one given
    /// stays), prepared now for the documents' texts (`text`, as the searches give it):
    /// [`Rerank::prepare`].
    pub fn rerank_with<'a>(&self, rerank: Arc<dyn Rerank>, text: impl Fn(usize) -> &'a str) {
        if self.rerank.set(rerank).is_ok() {
            if let Some(rerank) = self.rerank.get() {
                let texts: Vec<&str> = (0..self.len).map(text).collect();
                // A failure here is paid again, and reported, by the first search.
                if let Err(e) = rerank.prepare(&texts) {
                    tracing::warn!(error = %e, "preparing the search ranker failed");
                }
            }
        }
    }

    /// [`TextIndex::rerank_with`] for the lines of `store`, which also gets the ranker's
    /// measure of nearness when its scores are one ([`Rerank::as_nearness`]): an encoder's
    /// cosine then also tells the answer rules which lines say what is asked in other words.
    pub fn rerank_sources<'a>(
        &self,
        store: &proviso_contract::SourceStore,
        rerank: Arc<dyn Rerank>,
        text: impl Fn(usize) -> &'a str,
    ) {
        if let Some(nearness) = rerank.as_nearness() {
            store.measure_with(nearness);
        }
        self.rerank_with(rerank, text);
    }

    /// The best `limit` documents for `query` among those `keep` accepts: BM25's order, or,
    /// with a re-ranker, BM25's best [`RERANK_POOL`] re-ordered by reciprocal-rank fusion of
    /// BM25's order and the re-ranker's (ties keep BM25's order). `text` gives a document's
    /// own text, which the re-ranker reads.
    #[must_use]
    pub fn search_where<'a>(
        &self,
        query: &str,
        limit: usize,
        keep: impl Fn(usize) -> bool,
        text: impl Fn(usize) -> &'a str,
    ) -> Vec<Hit> {
        let mut hits: Vec<Hit> = self
            .search(query, self.len)
            .into_iter()
            .filter(|h| keep(h.index))
            .collect();
        self.add_unmatched(&mut hits, &keep);
        self.rerank_best(query, &mut hits, limit, &text);
        definitions_first(query, &mut hits, &text);
        hits.truncate(limit);
        hits
    }

    /// With a re-ranker, re-orders the best [`RERANK_POOL`] (or `limit`) of `hits` by
    /// reciprocal-rank fusion of their order and the re-ranker's.
    fn rerank_best<'a>(
        &self,
        query: &str,
        hits: &mut Vec<Hit>,
        limit: usize,
        text: impl Fn(usize) -> &'a str,
    ) {
        if let Some(rerank) = self.rerank.get() {
            let pool = if rerank.retrieves() {
                hits.len()
            } else {
                hits.len().min(RERANK_POOL.max(limit))
            };
            let matched: Vec<bool> = hits[..pool].iter().map(|h| h.score > 0.0).collect();
            let texts: Vec<&str> = hits[..pool].iter().map(|h| text(h.index)).collect();
            match rerank.scores(query, &texts) {
                Ok(scores) => {
                    let order = fuse(&scores, &matched);
                    let reordered: Vec<Hit> = order.iter().map(|&i| hits[i]).collect();
                    hits.splice(..pool, reordered);
                }
                // A failing model leaves BM25's order: the search still answers.
                Err(e) => tracing::warn!(error = %e, "re-ranking failed; BM25 order kept"),
            }
        }
    }

    /// With a re-ranker that retrieves, the documents `keep` accepts that share no word
    /// with the query join `hits`, after them (score 0, in their order).
    fn add_unmatched(&self, hits: &mut Vec<Hit>, keep: impl Fn(usize) -> bool) {
        if self.rerank.get().is_some_and(|r| r.retrieves()) {
            let found: std::collections::HashSet<usize> = hits.iter().map(|h| h.index).collect();
            hits.extend(
                (0..self.len)
                    .filter(|i| !found.contains(i) && keep(*i))
                    .map(|index| Hit { index, score: 0.0 }),
            );
        }
    }

    /// The best `limit` lines of a versioned document set for `query` ([`TextIndex::search_where`]'s
    /// order), with what the versions say: a superseded line the version in force restates
    /// is left out (`restated`); unless the query asks about an earlier version
    /// ([`Question::text_asks_earlier_version`](proviso_contract::Question), read against
    /// `store`), superseded lines come after those in force, since the version in force is
    /// the default. Each keeps its order among its own.
    ///
    /// Putting headings last as well was measured and left out: it found two more fact
    /// lines in the first five, and the answer ranking then preferred a new neighbour.
    #[must_use]
    pub fn search_versions<'a>(
        &self,
        query: &str,
        limit: usize,
        store: &proviso_contract::SourceStore,
        restated: &[bool],
        line: impl Fn(usize) -> VersionedLine<'a>,
    ) -> Vec<Hit> {
        let mut hits: Vec<Hit> = self
            .search(query, self.len)
            .into_iter()
            .filter(|h| !restated.get(h.index).copied().unwrap_or(false))
            .collect();
        self.add_unmatched(&mut hits, |i| !restated.get(i).copied().unwrap_or(false));
        let earlier = proviso_contract::Question::text_asks_earlier_version(query, store);
        // The versions' order is kept after re-ranking too: a re-ranker that retrieves
        // orders every line by meaning, and would put a superseded line above the one in
        // force that replaced it; and a question about an earlier version sees the
        // superseded lines first.
        let first = |h: &Hit| line(h.index).in_force != earlier;
        hits.sort_by_key(|h| !first(h));
        self.rerank_best(query, &mut hits, limit, |i| line(i).text);
        definitions_first(query, &mut hits, |i| line(i).text);
        hits.sort_by_key(|h| !first(h));
        hits.truncate(limit);
        hits
    }

    /// The best `limit` documents for `query`; documents sharing no term with it are left
    /// out.
    #[must_use]
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        let mut hits: Vec<Hit> = self
            .engine
            .search(query, self.len)
            .into_iter()
            .filter(|r| r.score > 0.0)
            .map(|r| Hit {
                index: r.document.id as usize,
                score: r.score,
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
        hits.truncate(limit);
        hits
    }
}

/// One indexed line of a versioned document set, as [`TextIndex::search_versions`] weighs it.
#[derive(Debug, Clone, Copy)]
pub struct VersionedLine<'a> {
    /// Its source's id.
    pub source: &'a str,
    /// Whether its version is the one in force.
    pub in_force: bool,
    /// The line itself.
    pub text: &'a str,
}

/// For each line, whether it is a superseded version's line that the version in force of
/// its source states word for word: the version in force says it, so a search shows that
/// one alone.
#[must_use]
pub fn restated(lines: &[VersionedLine<'_>]) -> Vec<bool> {
    let current: std::collections::HashSet<(&str, &str)> = lines
        .iter()
        .filter(|l| l.in_force)
        .map(|l| (l.source, l.text))
        .collect();
    lines
        .iter()
        .map(|l| !l.in_force && current.contains(&(l.source, l.text)))
        .collect()
}

/// The order of candidates (given in BM25's order) by reciprocal-rank fusion of that order
/// and `scores`' (higher first); ties keep BM25's order.
fn fuse(scores: &[f32], matched: &[bool]) -> Vec<usize> {
    let mut by_score: Vec<usize> = (0..scores.len()).collect();
    by_score.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    // Each candidate's place in the given order among those BM25 matched; one it did not
    // match (found by a re-ranker that retrieves) has only the re-ranker's place.
    let mut lexical = vec![0.0_f64; scores.len()];
    let mut place = 0.0;
    for (i, m) in matched.iter().enumerate() {
        if *m {
            lexical[i] = 1.0 / (FUSION_K + place);
            place += 1.0;
        }
    }
    let mut fused = vec![0.0_f64; scores.len()];
    for (rank, &i) in by_score.iter().enumerate() {
        fused[i] = 1.0 / (FUSION_K + rank as f64) + lexical[i];
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| fused[b].total_cmp(&fused[a]).then(a.cmp(&b)));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use proviso_decode::testing::{ByteTokenizer, ScriptedEngine};

    /// A model that expects a question written in `x`s and the letters of `cards checked
    /// out` after a line saying `words`, and nothing in particular after any other line.
    fn expects_after(words: &'static str) -> QueryLikelihood {
        let engine = ScriptedEngine::new(
            4096,
            Box::new(move |context: &[TokenId]| {
                let bytes: Vec<u8> = context.iter().map(|&t| t as u8).collect();
                let mut logits = vec![0.0; ByteTokenizer::VOCAB];
                if bytes.windows(words.len()).any(|w| w == words.as_bytes()) {
                    for b in "x cardsheckout".bytes() {
                        logits[usize::from(b)] = 5.0;
                    }
                }
                logits
            }),
        );
        QueryLikelihood::new(Box::new(engine), ByteTokenizer::shared())
    }

    /// A versioned search leaves out what the version in force restates and puts the
    /// version in force first, unless the query asks about an earlier one.
    #[test]
    fn a_versioned_search_shows_the_version_in_force_first() {
        let doc = |version: &str, in_force: bool, body: &[&str]| {
            proviso_contract::SourceDocument::new("fees", version, in_force, &body.join("\n"))
        };
        let old = ["Fees", "A day ticket costs £5.00.", "Cards are free."];
        let new = ["Fees", "A day ticket costs £6.00.", "Cards are free."];
        let mut store = proviso_contract::SourceStore::new();
        store.insert(doc("v1", false, &old)).unwrap();
        store.insert(doc("v2", true, &new)).unwrap();
        let lines: Vec<VersionedLine<'_>> = old
            .iter()
            .map(|t| (false, *t))
            .chain(new.iter().map(|t| (true, *t)))
            .map(|(in_force, text)| VersionedLine {
                source: "fees",
                in_force,
                text,
            })
            .collect();
        let restated = restated(&lines);
        assert_eq!(restated, [true, false, true, false, false, false]);
        let texts: Vec<String> = lines.iter().map(|l| format!("fees {}", l.text)).collect();
        let index = TextIndex::new(&texts);
        let found = |query: &str| -> Vec<usize> {
            index
                .search_versions(query, 6, &store, &restated, |i| lines[i])
                .iter()
                .map(|h| h.index)
                .collect()
        };
        // The lines in force (the price first), then the old price; the old version's copies
        // of the heading and of `Cards are free.` never.
        let now = found("day ticket fees");
        assert_eq!(now[0], 4, "{now:?}");
        assert_eq!(*now.last().unwrap(), 1, "{now:?}");
        assert!(!now.contains(&0) && !now.contains(&2), "{now:?}");
        // Asked about the earlier version, the superseded lines come first.
        let before = found("day ticket in the previous fees");
        assert_eq!(before[0], 1, "{before:?}");
        assert!(before.iter().position(|&i| i == 1) < before.iter().position(|&i| i == 5));
    }

    #[test]
    fn query_likelihood_scores_the_line_the_model_expects_the_question_after() {
        let rerank = expects_after("on loan");
        let scores = rerank
            .scores(
                "xxxx",
                &[
                    "Cards are free.",
                    "Up to 20 items on loan.",
                    "Cards are free.",
                ],
            )
            .unwrap();
        assert!(scores[1] > scores[0], "{scores:?}");
        // The same line scores the same, whatever was read before it.
        assert!((scores[0] - scores[2]).abs() < 1e-4, "{scores:?}");
    }

    #[test]
    fn fusion_keeps_agreement_and_lifts_what_the_model_prefers() {
        // The model agrees with BM25: nothing moves.
        assert_eq!(fuse(&[3.0, 2.0, 1.0], &[true; 3]), vec![0, 1, 2]);
        // The model prefers BM25's last of five: it rises, above lines both rank low.
        let order = fuse(&[5.0, 1.0, 2.0, 3.0, 9.0], &[true; 5]);
        assert_eq!(order[0], 0, "BM25's first, the model's second, stays first");
        assert_eq!(order[1], 4);
        // Equal scores keep BM25's order.
        assert_eq!(fuse(&[1.0, 1.0, 1.0], &[true; 3]), vec![0, 1, 2]);
    }

    #[test]
    fn a_reranked_search_reorders_bm25s_best_and_keeps_its_filter() {
        let texts: Vec<String> = vec![
            "Cards are checked at the desk.".into(),
            "Cards out of date are renewed.".into(),
            "An adult card has up to 20 items on loan.".into(),
        ];
        let index = TextIndex::new(&texts);
        let text = |i: usize| texts[i].as_str();
        let order = |hits: Vec<Hit>| hits.iter().map(|h| h.index).collect::<Vec<_>>();
        // Not "checked out": the lexicon reads that as "borrow", which the loan line states.
        let plain = order(index.search_where("cards checked", 3, |_| true, text));
        assert_eq!(
            plain.last(),
            Some(&2),
            "BM25 alone ranks the loan line last"
        );
        index.rerank_with(Arc::new(expects_after("on loan")), text);
        let reranked = order(index.search_where("cards checked", 3, |_| true, text));
        assert_eq!(reranked[1], 2, "it rises above BM25's second: {reranked:?}");
        assert_eq!(reranked[0], plain[0], "agreement on the first stays first");
        // A filter applies before the pool is re-ranked.
        let kept = index.search_where("cards checked", 3, |i| i != 2, text);
        assert!(kept.iter().all(|h| h.index != 2));
    }

    /// A ranker that records the lines it was prepared for.
    #[derive(Debug, Default)]
    struct Prepared(Mutex<Vec<String>>);

    impl Rerank for Prepared {
        fn scores(&self, _query: &str, lines: &[&str]) -> Result<Vec<f32>, EngineError> {
            Ok(vec![0.0; lines.len()])
        }

        fn prepare(&self, lines: &[&str]) -> Result<(), EngineError> {
            let mut seen = self.0.lock().unwrap();
            seen.extend(lines.iter().map(|l| (*l).to_owned()));
            Ok(())
        }
    }

    #[test]
    fn a_ranker_is_prepared_for_every_line_when_given_not_by_the_first_search() {
        let texts: Vec<String> = vec!["A day pass covers every bus.".into(), "Tickets.".into()];
        let index = TextIndex::new(&texts);
        let ranker = Arc::new(Prepared::default());
        index.rerank_with(ranker.clone(), |i| texts[i].as_str());
        assert_eq!(*ranker.0.lock().unwrap(), texts);
        // The first ranker given stays, and is not prepared twice.
        index.rerank_with(Arc::new(Prepared::default()), |i| texts[i].as_str());
        index.rerank_with(ranker.clone(), |i| texts[i].as_str());
        assert_eq!(ranker.0.lock().unwrap().len(), texts.len());
    }

    /// A re-ranker that retrieves, scoring a line by whether it holds `word`.
    #[derive(Debug)]
    struct Holds(&'static str);

    impl Rerank for Holds {
        fn scores(&self, _query: &str, lines: &[&str]) -> Result<Vec<f32>, EngineError> {
            Ok(lines
                .iter()
                .map(|l| f32::from(u8::from(l.contains(self.0))))
                .collect())
        }

        fn retrieves(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_retrieving_reranker_finds_a_line_sharing_no_word_and_keeps_bm25s_agreement() {
        let texts: Vec<String> = vec![
            "A day pass covers every bus.".into(),
            "A single pass covers one journey.".into(),
            "Tickets for a whole day cost £7.70.".into(),
            "Lost property is kept for 30 days.".into(),
        ];
        let index = TextIndex::new(&texts);
        let text = |i: usize| texts[i].as_str();
        let order = |hits: Vec<Hit>| hits.iter().map(|h| h.index).collect::<Vec<_>>();
        // BM25 alone never returns the ticket line: it shares no word with "pass".
        assert!(!order(index.search_where("pass", 4, |_| true, text)).contains(&2));
        index.rerank_with(Arc::new(Holds("Tickets")), text);
        let found = order(index.search_where("pass", 4, |_| true, text));
        assert!(found.contains(&2), "{found:?}");
        // BM25's first, which the encoder does not favour, still comes before a line BM25
        // did not match.
        assert_eq!(found[0], 0, "{found:?}");
        // The filter holds for the lines it adds as well.
        let kept = order(index.search_where("pass", 4, |i| i != 2, text));
        assert!(!kept.contains(&2), "{kept:?}");
        // Fusion: a line BM25 did not match has only the encoder's place.
        assert_eq!(fuse(&[0.0, 1.0], &[true, false]), vec![0, 1]);
        // The encoder's first, unmatched, comes after two lines both orders rank.
        assert_eq!(fuse(&[0.0, 1.0, 2.0], &[true, true, false]), vec![0, 1, 2]);
        // Two unmatched lines keep the encoder's order among them.
        assert_eq!(fuse(&[0.0, 1.0, 2.0], &[true, false, false]), vec![0, 2, 1]);
    }

    #[test]
    fn ranks_by_terms_with_stemming() {
        let index = TextIndex::new(&[
            "Migraine prevention with monthly injections".into(),
            "Asthma inhaler study terminated for slow enrollment".into(),
            "Psoriasis arm terminated after liver enzyme elevations".into(),
        ]);
        let hits = index.search("which arms were terminated for liver problems", 3);
        assert_eq!(hits[0].index, 2);
        assert!(hits.iter().all(|h| h.index != 0), "no shared term, no hit");
        // Stemming: "injection" finds "injections".
        assert_eq!(index.search("injection", 3)[0].index, 0);
    }

    #[test]
    fn a_line_is_found_by_the_words_the_answer_rules_count() {
        let index = TextIndex::new(&[
            "DVDs are lent for 7 days.".into(),
            "The shop sells DVDs.".into(),
            "How it works and what to do.".into(),
        ]);
        // `borrow` is never written; `lent` is, and the lexicon counts them as one word.
        assert_eq!(index.search("borrow", 3)[0].index, 0);
        assert_eq!(index.search("sells", 3).len(), 1);
        // Words the rules ignore never rank a line: the third shares only those.
        assert!(index.search("how do I do it", 3).is_empty());
        // The index counts exactly the lexicon's content stems.
        assert_eq!(
            bm25::Tokenizer::tokenize(&ContentStems, "Which DVDs were lent?"),
            proviso_contract::lexicon::content_stems("Which DVDs were lent?")
        );
    }

    #[test]
    fn a_verb_done_again_finds_its_re_verb() {
        // As in a document set, `open` is common and `reopen` rare.
        let index = TextIndex::new(&[
            "The branch opens at nine.".into(),
            "The branch will reopen on 14 March after the works.".into(),
            "The cafe is open on Sundays.".into(),
            "The garden opens in spring.".into(),
        ]);
        assert_eq!(
            index.search("when will the branch open again", 4)[0].index,
            1
        );
        assert_eq!(index.search("when does the branch open", 4)[0].index, 0);
    }
}
