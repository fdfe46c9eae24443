//! A full-text index: English tokenization with stemming and stop words, ranked by BM25 (the
//! `bm25` crate), with a deterministic order for ties.

use bm25::{Language, SearchEngine, SearchEngineBuilder};

/// A BM25 index over short documents identified by their position.
pub struct TextIndex {
    engine: SearchEngine<u32>,
    len: usize,
    /// Every word the documents use, lower case.
    vocabulary: std::collections::HashSet<String>,
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
        let vocabulary = documents
            .iter()
            .flat_map(|d| proviso_contract::lexicon::words(d))
            .map(str::to_lowercase)
            .collect();
        Self {
            engine: SearchEngineBuilder::<u32>::with_documents(Language::English, docs).build(),
            len: documents.len(),
            vocabulary,
        }
    }

    /// The best `limit` documents for `query`; documents sharing no term with it are left
    /// out.
    #[must_use]
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        // A question's word the documents never use also finds the everyday words that ask
        // for the same thing (`borrow` finds `lent`); a word they use is searched as itself,
        // so expansion cannot outweigh a line that says what was asked.
        // `open again` is searched as `open reopen` (`lexicon::with_redone`).
        let query = proviso_contract::lexicon::with_redone(query);
        let mut expanded = query.clone().into_owned();
        for word in proviso_contract::lexicon::words(&query)
            .into_iter()
            .filter(|w| !self.vocabulary.contains(&w.to_lowercase()))
        {
            for related in proviso_contract::lexicon::related_words(word) {
                expanded.push(' ');
                expanded.push_str(related);
            }
        }
        let mut hits: Vec<Hit> = self
            .engine
            .search(&expanded, self.len)
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_word_the_documents_never_use_finds_its_everyday_relatives() {
        let index = TextIndex::new(&[
            "DVDs are lent for 7 days.".into(),
            "The shop sells DVDs.".into(),
        ]);
        // `borrow` is never written; `lent` is.
        assert_eq!(index.search("borrow", 2)[0].index, 0);
        // `sells` is written, so it is searched as itself only.
        assert_eq!(index.search("sells", 2).len(), 1);
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
