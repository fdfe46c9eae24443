//! Continuous batching: many sequences decoded in one llama.cpp forward pass.
//!
//! Decoding a small model on a CPU costs about the same for eight sequences as for one: the
//! weights are read once per pass, and the per-pass overhead of a 30-layer graph is paid
//! once. A [`Batcher`] owns one llama.cpp context with a unified KV cache and a thread that
//! runs its forward passes; each [`SlotEngine`] is one sequence of it and a proviso
//! [`Engine`], so the constrained decoder, the server's workers and the harness use it
//! unchanged.
//!
//! A slot's [`Engine::decode`] hands its tokens to the batch thread and waits. The thread
//! runs a pass as soon as every generating slot has handed in its next token (or after a
//! short gathering window), so sequences join and leave between passes: a short request is
//! never held behind a long one. Each slot's grammar mask is computed on the slot's own
//! thread while the pass runs, as for a single sequence. One-token generation steps go
//! first in a pass; prompts fill the rest of it in chunks, so a long prompt delays running
//! sequences by at most one pass.
//!
//! Memory is bounded twice: a context size per slot (the sequence's capacity, as for one
//! engine) and a total KV budget shared by all slots. When a pass needs more cells than are
//! free, the caches of idle slots are evicted, least recently used first; when that is not
//! enough, the decode fails with [`EngineError::Exhausted`], which a server answers with 503.

use std::num::NonZeroU32;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::DecodeError;
use proviso_decode::{Engine, EngineError, TokenId};

use crate::{backend, llama_token, Cores, LlamaError, Model, RunOptions, CONTEXT_CREATION};

/// How to run a batch of sequences over one context.
///
/// Build it with [`BatchOptions::new`] and the `with_*` setters; fields may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchOptions {
    /// Sequences decoded together (the server's `--parallel`).
    pub slots: usize,
    /// The most tokens one sequence may hold.
    pub slot_ctx: u32,
    /// KV cells shared by all sequences; a pass that needs more than are free evicts idle
    /// sequences' caches, then fails with [`EngineError::Exhausted`]. At `slots × slot_ctx`
    /// (the default) every sequence has a stream of its own and greedy output is exactly
    /// that of a lone context; below it, memory is overcommitted in one shared stream, whose
    /// different cell placement may change the last bits of a logit (and so, rarely, a
    /// greedy choice between two near-equal tokens).
    pub kv_budget: u32,
    /// Threads for the forward pass.
    pub n_threads: i32,
    /// Most tokens in one forward pass.
    pub n_batch: u32,
    /// How long a pass waits for generating sequences that have not handed in their next
    /// token yet.
    pub gather: Duration,
}

impl BatchOptions {
    /// `slots` sequences with the defaults of [`RunOptions`] for context size, threads and
    /// batch size, and a KV budget that holds every slot's full context.
    #[must_use]
    pub fn new(slots: usize) -> Self {
        let run = RunOptions::default();
        let slots = slots.max(1);
        Self {
            slots,
            slot_ctx: run.n_ctx,
            kv_budget: run
                .n_ctx
                .saturating_mul(u32::try_from(slots).unwrap_or(u32::MAX)),
            n_threads: run.n_threads,
            n_batch: run.n_batch,
            gather: Duration::from_millis(3),
        }
    }

    /// Sets the context size of each slot, and a KV budget that holds every slot's full
    /// context (set the budget after this to overcommit).
    #[must_use]
    pub fn with_slot_ctx(mut self, slot_ctx: u32) -> Self {
        self.slot_ctx = slot_ctx.max(16);
        self.kv_budget = self
            .slot_ctx
            .saturating_mul(u32::try_from(self.slots).unwrap_or(u32::MAX));
        self
    }

    /// Sets the KV cells shared by all slots.
    #[must_use]
    pub fn with_kv_budget(mut self, cells: u32) -> Self {
        self.kv_budget = cells.max(16);
        self
    }

    /// Sets the threads of the forward pass.
    #[must_use]
    pub fn with_threads(mut self, threads: i32) -> Self {
        self.n_threads = threads.max(1);
        self
    }

    /// Sets the most tokens in one forward pass.
    #[must_use]
    pub fn with_batch(mut self, n_batch: u32) -> Self {
        self.n_batch = n_batch.max(1);
        self
    }

    /// Sets how long a pass waits for generating sequences.
    #[must_use]
    pub fn with_gather(mut self, gather: Duration) -> Self {
        self.gather = gather;
        self
    }
}

/// Tokens a slot handed in, and how many of them the batch has decoded so far.
#[derive(Debug)]
struct Pending {
    tokens: Vec<TokenId>,
    /// The position of the first token.
    start: usize,
    done: usize,
    /// The slot's spare logits buffer, filled when the last token is decoded.
    buffer: Vec<f32>,
    /// Whether this is one generated token (it goes first in a pass), not a prompt.
    step: bool,
}

#[derive(Debug, Default)]
struct Slot {
    taken: bool,
    /// From [`Engine::acquire`] or a decode to [`Engine::release`]: its cache is not evicted.
    active: bool,
    /// Its last decode was answered and it is generating: the next pass waits for it.
    expected: bool,
    /// Its cache was evicted while idle; its history is dropped at the next acquire.
    evicted: bool,
    /// KV cells it holds.
    used: usize,
    /// Cells from this position on are removed before the next pass.
    drop_from: Option<usize>,
    pending: Option<Pending>,
    result: Option<Result<Vec<f32>, EngineError>>,
    last_used: u64,
}

impl Slot {
    /// Marks the cells from `from` on for removal before the next pass.
    fn drop_suffix(&mut self, from: usize) {
        self.drop_from = Some(self.drop_from.map_or(from, |f| f.min(from)));
        self.used = self.used.min(from);
    }
}

#[derive(Debug, Default)]
struct State {
    slots: Vec<Slot>,
    shutdown: bool,
    /// Why the batch thread stopped, when it did.
    stopped: Option<String>,
    clock: u64,
    passes: u64,
    batched_tokens: u64,
    busy: Duration,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the batch thread.
    work: Condvar,
    /// Wakes slots waiting for their decode.
    replied: Condvar,
    options: BatchOptions,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Counters of a batcher's forward passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchStats {
    /// Forward passes run.
    pub passes: u64,
    /// Tokens decoded over all passes.
    pub tokens: u64,
    /// Time spent in forward passes.
    pub busy: Duration,
}

/// One llama.cpp context shared by up to [`BatchOptions::slots`] sequences, with the thread
/// that runs their forward passes together.
#[derive(Debug)]
pub struct Batcher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Model {
    /// A batcher: one context for `options.slots` sequences, decoded together.
    ///
    /// # Errors
    ///
    /// [`LlamaError::Context`] when llama.cpp cannot allocate the context.
    pub fn batcher(&self, options: BatchOptions) -> Result<Batcher, LlamaError> {
        let backend = backend()?;
        let slots = options.slots.max(1);
        let full = options
            .slot_ctx
            .saturating_mul(u32::try_from(slots).unwrap_or(u32::MAX));
        // A budget that holds every slot's full context gives each sequence a KV stream of
        // its own: its cells sit where a lone context puts them, so a greedy sequence decodes
        // to the same text alone and in any batch. A smaller budget shares one stream, where
        // sums over differently placed cells may round differently.
        let unified = options.kv_budget < full;
        let cells = if unified { options.kv_budget } else { full };
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(cells.max(16)))
            .with_n_batch(options.n_batch)
            .with_n_ubatch(options.n_batch)
            .with_n_seq_max(u32::try_from(slots).unwrap_or(u32::MAX))
            .with_kv_unified(unified)
            .with_n_threads(options.n_threads)
            .with_n_threads_batch(options.n_threads);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                slots: (0..slots).map(|_| Slot::default()).collect(),
                ..State::default()
            }),
            work: Condvar::new(),
            replied: Condvar::new(),
            options: BatchOptions {
                slots,
                kv_budget: cells,
                ..options
            },
        });
        let model = self.model;
        let (ready, created) = std::sync::mpsc::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("proviso-batch".into())
            .spawn(move || {
                // The context is created on the thread that uses it.
                let context = {
                    let _guard = CONTEXT_CREATION
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    model.new_context(backend, params)
                };
                match context {
                    Ok(context) => {
                        let _ = ready.send(Ok(()));
                        run(&thread_shared, context);
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e.to_string()));
                    }
                }
            })
            .map_err(|e| LlamaError::Context(e.to_string()))?;
        match created.recv() {
            Ok(Ok(())) => Ok(Batcher {
                shared,
                thread: Some(thread),
            }),
            Ok(Err(message)) => {
                let _ = thread.join();
                Err(LlamaError::Context(message))
            }
            Err(_) => {
                let _ = thread.join();
                Err(LlamaError::Context("the batch thread stopped".into()))
            }
        }
    }
}

impl Batcher {
    /// A free slot as an engine, or `None` when every slot is taken. The slot is free again
    /// when the engine is dropped.
    #[must_use]
    pub fn slot(&self) -> Option<SlotEngine> {
        let mut state = self.shared.lock();
        let seq = state.slots.iter().position(|s| !s.taken)?;
        state.slots[seq] = Slot {
            taken: true,
            ..Slot::default()
        };
        // A previous owner's cells, if any, are removed before the next pass.
        state.slots[seq].drop_from = Some(0);
        Some(SlotEngine {
            shared: Arc::clone(&self.shared),
            seq,
            history: Vec::new(),
            logits: Vec::new(),
            spare: Vec::new(),
            capacity: self.shared.options.slot_ctx as usize,
        })
    }

    /// The options it runs with.
    #[must_use]
    pub fn options(&self) -> BatchOptions {
        self.shared.options
    }

    /// Counters of its passes so far.
    #[must_use]
    pub fn stats(&self) -> BatchStats {
        let state = self.shared.lock();
        BatchStats {
            passes: state.passes,
            tokens: state.batched_tokens,
            busy: state.busy,
        }
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.work.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One sequence of a [`Batcher`]: an [`Engine`] whose forward passes are shared.
pub struct SlotEngine {
    shared: Arc<Shared>,
    seq: usize,
    history: Vec<TokenId>,
    logits: Vec<f32>,
    spare: Vec<f32>,
    capacity: usize,
}

impl std::fmt::Debug for SlotEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotEngine")
            .field("seq", &self.seq)
            .field("len", &self.history.len())
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl SlotEngine {
    /// The sequence id of this slot in the shared context.
    #[must_use]
    pub fn seq(&self) -> usize {
        self.seq
    }
}

impl Drop for SlotEngine {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        let slot = &mut state.slots[self.seq];
        *slot = Slot {
            drop_from: Some(0),
            ..Slot::default()
        };
        drop(state);
        self.shared.work.notify_all();
    }
}

impl Engine for SlotEngine {
    fn acquire(&mut self) -> Result<(), EngineError> {
        let mut state = self.shared.lock();
        if let Some(why) = &state.stopped {
            return Err(EngineError::Runtime(why.clone()));
        }
        let slot = &mut state.slots[self.seq];
        slot.active = true;
        if std::mem::take(&mut slot.evicted) {
            self.history.clear();
            self.logits.clear();
        }
        Ok(())
    }

    fn release(&mut self) {
        let mut state = self.shared.lock();
        let slot = &mut state.slots[self.seq];
        slot.active = false;
        slot.expected = false;
        drop(state);
        // The batch thread may be waiting for this slot's next token.
        self.shared.work.notify_all();
    }

    fn reset(&mut self) -> Result<(), EngineError> {
        let mut state = self.shared.lock();
        let slot = &mut state.slots[self.seq];
        slot.drop_from = Some(0);
        slot.used = 0;
        self.history.clear();
        self.logits.clear();
        Ok(())
    }

    fn truncate(&mut self, len: usize) -> Result<(), EngineError> {
        if len >= self.history.len() {
            return Ok(());
        }
        if len == 0 {
            return self.reset();
        }
        let mut state = self.shared.lock();
        let slot = &mut state.slots[self.seq];
        slot.drop_suffix(len);
        self.history.truncate(len);
        // The logits belonged to the dropped suffix; the next decode brings new ones.
        self.logits.clear();
        Ok(())
    }

    fn history(&self) -> &[TokenId] {
        &self.history
    }

    fn decode(&mut self, tokens: &[TokenId]) -> Result<(), EngineError> {
        if tokens.is_empty() {
            return Ok(());
        }
        if self.history.len() + tokens.len() > self.capacity {
            return Err(crate::context_full(self.history.len(), self.capacity));
        }
        let mut state = self.shared.lock();
        if let Some(why) = &state.stopped {
            return Err(EngineError::Runtime(why.clone()));
        }
        state.clock += 1;
        let clock = state.clock;
        let slot = &mut state.slots[self.seq];
        // A sequence that decodes is generating, whether or not its caller acquired it.
        slot.active = true;
        slot.last_used = clock;
        slot.result = None;
        slot.pending = Some(Pending {
            tokens: tokens.to_vec(),
            start: self.history.len(),
            done: 0,
            buffer: std::mem::take(&mut self.spare),
            step: tokens.len() == 1 && !self.history.is_empty(),
        });
        self.shared.work.notify_all();
        let result = loop {
            if let Some(result) = state.slots[self.seq].result.take() {
                break result;
            }
            if let Some(why) = &state.stopped {
                break Err(EngineError::Runtime(why.clone()));
            }
            state = self
                .shared
                .replied
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        };
        drop(state);
        let buffer = result?;
        self.spare = std::mem::replace(&mut self.logits, buffer);
        self.history.extend_from_slice(tokens);
        Ok(())
    }

    fn logits(&self) -> &[f32] {
        &self.logits
    }

    fn len(&self) -> usize {
        self.history.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

/// One slot's share of a pass: tokens `from..to` of its pending decode.
struct Share {
    seq: usize,
    from: usize,
    to: usize,
    /// The pass's index of its last token, when the decode completes in this pass.
    last: Option<i32>,
}

/// The batch thread: gathers the slots' tokens, runs a pass, answers them; until shutdown.
fn run(shared: &Shared, mut context: LlamaContext<'static>) {
    let options = shared.options;
    let n_batch = options.n_batch.max(1) as usize;
    let budget = options.kv_budget as usize;
    let threads = usize::try_from(options.n_threads).unwrap_or(1);
    let mut batch = LlamaBatch::new(n_batch, 1);
    loop {
        let mut state = shared.lock();
        // Wait for work.
        loop {
            if state.shutdown {
                state.stopped = Some("the batch engine was shut down".into());
                drop(state);
                shared.replied.notify_all();
                return;
            }
            if state.slots.iter().any(|s| s.pending.is_some()) {
                break;
            }
            state = shared
                .work
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        // Gather: generating slots hand in their next token within a fraction of a pass.
        let deadline = Instant::now() + options.gather;
        while !state.shutdown
            && state
                .slots
                .iter()
                .any(|s| s.expected && s.pending.is_none())
        {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            state = shared
                .work
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        // Cells dropped by truncation, reset or a freed slot go first.
        for seq in 0..state.slots.len() {
            if let Some(from) = state.slots[seq].drop_from.take() {
                remove(&mut context, seq, from);
            }
        }
        let shares = plan(&mut state, &mut context, &mut batch, n_batch, budget);
        if shares.is_empty() {
            // Every pending decode was refused for memory; their slots were answered.
            drop(state);
            shared.replied.notify_all();
            continue;
        }
        drop(state);
        let lease = Cores::get().lease(threads);
        let pass = Instant::now();
        let outcome = context.decode(&mut batch);
        let pass = pass.elapsed();
        drop(lease);
        let mut state = shared.lock();
        state.passes += 1;
        state.busy += pass;
        state.batched_tokens += shares.iter().map(|s| (s.to - s.from) as u64).sum::<u64>();
        for share in &shares {
            let slot = &mut state.slots[share.seq];
            let Some(pending) = slot.pending.as_mut() else {
                continue;
            };
            match &outcome {
                Ok(()) => {
                    slot.used += share.to - share.from;
                    pending.done = share.to;
                    if let Some(index) = share.last {
                        let mut buffer = std::mem::take(&mut pending.buffer);
                        buffer.clear();
                        buffer.extend_from_slice(context.get_logits_ith(index));
                        slot.pending = None;
                        slot.result = Some(Ok(buffer));
                        slot.expected = slot.active;
                    }
                }
                Err(e) => {
                    let error = match e {
                        DecodeError::NoKvCacheSlot => {
                            EngineError::Exhausted("llama.cpp found no free KV cell".into())
                        }
                        other => EngineError::Runtime(other.to_string()),
                    };
                    fail(slot, error);
                }
            }
        }
        drop(state);
        shared.replied.notify_all();
    }
}

/// Answers a slot's pending decode with `error`, dropping the cells its earlier chunks took.
fn fail(slot: &mut Slot, error: EngineError) {
    if let Some(pending) = slot.pending.take() {
        if pending.done > 0 {
            slot.drop_suffix(pending.start);
        }
    }
    slot.result = Some(Err(error));
    slot.expected = false;
}

/// Removes a sequence's cells from `from` on; a runtime that cannot drop a suffix drops all.
fn remove(context: &mut LlamaContext<'static>, seq: usize, from: usize) {
    let seq_id = u32::try_from(seq).ok();
    let kept = match (from, u32::try_from(from)) {
        (0, _) => None,
        (_, Ok(from)) => Some(from),
        (_, Err(_)) => None,
    };
    let removed = context
        .clear_kv_cache_seq(seq_id, kept, None)
        .unwrap_or(false);
    if !removed && kept.is_some() {
        let _ = context.clear_kv_cache_seq(seq_id, None, None);
    }
}

/// Fills `batch` with one pass: one-token generation steps first, then prompts in chunks,
/// within `n_batch` tokens and the KV budget (evicting idle slots' caches, least recently
/// used first). A decode that cannot fit even then is answered with
/// [`EngineError::Exhausted`].
fn plan(
    state: &mut State,
    context: &mut LlamaContext<'static>,
    batch: &mut LlamaBatch<'static>,
    n_batch: usize,
    budget: usize,
) -> Vec<Share> {
    batch.clear();
    let mut order: Vec<usize> = (0..state.slots.len())
        .filter(|&i| state.slots[i].pending.is_some())
        .collect();
    order.sort_by_key(|&i| {
        let slot = &state.slots[i];
        let step = slot.pending.as_ref().is_some_and(|p| p.step);
        (!step, slot.last_used)
    });
    let mut used: usize = state.slots.iter().map(|s| s.used).sum();
    let mut room = n_batch;
    let mut shares = Vec::new();
    for seq in order {
        if room == 0 {
            break;
        }
        let (remaining, done) = match &state.slots[seq].pending {
            Some(p) => (p.tokens.len() - p.done, p.done),
            None => continue,
        };
        let take = remaining.min(room);
        // A decode is admitted whole: its first chunk goes in only when all its tokens fit,
        // so that a prompt never takes cells that a running sequence then cannot grow into.
        let needed = if done == 0 { remaining } else { take };
        if used + needed > budget {
            used -= evict(state, context, seq, used + needed - budget);
        }
        if used + needed > budget {
            let message = format!(
                "{used} of {budget} KV cells are in use by generating sequences; {needed} more are needed"
            );
            fail(&mut state.slots[seq], EngineError::Exhausted(message));
            continue;
        }
        shares.push(Share {
            seq,
            from: done,
            to: done + take,
            last: None,
        });
        used += take;
        room -= take;
    }
    // llama.cpp decodes sequences with KV streams of their own together only when they
    // appear in the batch in increasing, consecutive order; otherwise it splits the pass
    // into one per sequence.
    shares.sort_by_key(|share| share.seq);
    for share in &mut shares {
        let Some(pending) = state.slots[share.seq].pending.as_ref() else {
            continue;
        };
        let seq_id = i32::try_from(share.seq).unwrap_or(i32::MAX);
        let complete = share.to == pending.tokens.len();
        let mut ok = true;
        for j in share.from..share.to {
            let Ok(position) = i32::try_from(pending.start + j) else {
                ok = false;
                break;
            };
            let logits = complete && j + 1 == pending.tokens.len();
            if batch
                .add(llama_token(pending.tokens[j]), position, &[seq_id], logits)
                .is_err()
            {
                ok = false;
                break;
            }
        }
        if !ok {
            // Positions or batch space ran out: this slot's decode fails, and the pass is
            // rebuilt without it.
            fail(
                &mut state.slots[share.seq],
                EngineError::Runtime("the batch could not hold the tokens".into()),
            );
            batch.clear();
            return Vec::new();
        }
        share.last = complete.then(|| batch.n_tokens() - 1);
    }
    shares
}

/// Evicts idle slots' caches, least recently used first, until `needed` cells are free or
/// none is left to evict; returns the cells freed. The slot `except` and slots that are
/// generating or waiting are kept.
fn evict(
    state: &mut State,
    context: &mut LlamaContext<'static>,
    except: usize,
    needed: usize,
) -> usize {
    let mut idle: Vec<usize> = (0..state.slots.len())
        .filter(|&i| {
            let s = &state.slots[i];
            i != except && !s.active && s.pending.is_none() && s.used > 0
        })
        .collect();
    idle.sort_by_key(|&i| state.slots[i].last_used);
    let mut freed = 0;
    for seq in idle {
        if freed >= needed {
            break;
        }
        remove(context, seq, 0);
        let slot = &mut state.slots[seq];
        freed += slot.used;
        slot.used = 0;
        slot.evicted = true;
    }
    freed
}
