//! The worker threads: each takes queued jobs, runs them on the backend, and sends the
//! request's events (its start, its deltas, its end) back to the handler waiting for them.

use super::*;

pub(super) enum WorkerEvent {
    /// Generation has begun (see [`Sink::started`]).
    Started,
    Delta(u32, Delta),
    Done(Result<Vec<ChoiceResult>, RunError>),
}

pub(super) struct Job<J> {
    pub(super) job: J,
    pub(super) events: mpsc::UnboundedSender<WorkerEvent>,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) deadline: Instant,
    /// Tokens generated for this request so far, as the worker reports them (for the
    /// metrics and the log line of a request that ends without a result).
    pub(super) generated: Arc<AtomicU64>,
}

pub(super) struct ChannelSink<'a> {
    events: &'a mpsc::UnboundedSender<WorkerEvent>,
    cancel: &'a AtomicBool,
    deadline: Instant,
    generated: &'a AtomicU64,
    started: bool,
}

impl Sink for ChannelSink<'_> {
    fn send(&mut self, choice: u32, delta: Delta) -> bool {
        if self.events.send(WorkerEvent::Delta(choice, delta)).is_err() {
            self.cancel.store(true, Ordering::SeqCst);
        }
        !self.cancelled()
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
            || self.events.is_closed()
            || Instant::now() >= self.deadline
    }

    fn generated(&mut self, tokens: u64) {
        self.generated.fetch_add(tokens, Ordering::SeqCst);
    }

    fn started(&mut self) {
        if !self.started {
            self.started = true;
            let _ = self.events.send(WorkerEvent::Started);
        }
    }
}

/// A running server's worker threads, to be joined after shutdown.
#[derive(Debug)]
pub struct Workers(Vec<std::thread::JoinHandle<()>>);

impl Workers {
    /// Waits for every worker to finish its current job and exit.
    pub fn join(self) {
        for handle in self.0 {
            // A worker that panicked has nothing left to clean up.
            let _ = handle.join();
        }
    }
}

pub(super) fn spawn_workers<B: Backend>(
    backend: &Arc<B>,
    config: &ServerConfig,
    receiver: &crossbeam_channel::Receiver<Job<B::Job>>,
    metrics: &Arc<Metrics>,
) -> Result<Workers, String> {
    let mut handles = Vec::with_capacity(config.workers);
    for i in 0..config.workers.max(1) {
        let mut worker = backend.worker().map_err(|e| e.to_string())?;
        let receiver = receiver.clone();
        let metrics = metrics.clone();
        let handle = std::thread::Builder::new()
            .name(format!("proviso-worker-{i}"))
            .spawn(move || {
                while let Ok(Job {
                    job,
                    events,
                    cancel,
                    deadline,
                    generated,
                }) = receiver.recv()
                {
                    metrics.queued().dec();
                    if cancel.load(Ordering::SeqCst)
                        || events.is_closed()
                        || Instant::now() >= deadline
                    {
                        let _ = events.send(WorkerEvent::Done(Err(RunError::Cancelled)));
                        continue;
                    }
                    metrics.running().inc();
                    let mut sink = ChannelSink {
                        events: &events,
                        cancel: &cancel,
                        deadline,
                        generated: &generated,
                        started: false,
                    };
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        worker.run(job, &mut sink)
                    }))
                    .unwrap_or_else(|panic| {
                        Err(RunError::Internal(format!(
                            "the worker panicked: {}",
                            panic_message(panic.as_ref())
                        )))
                    });
                    metrics.running().dec();
                    match &result {
                        Ok(choices) => {
                            for choice in choices {
                                metrics.choice(choice);
                            }
                        }
                        // What a cut, cancelled or rejected request generated was still
                        // computed: it counts.
                        Err(_) => metrics.completion_tokens(generated.load(Ordering::SeqCst)),
                    }
                    // The client may be gone; nothing to do then.
                    let _ = events.send(WorkerEvent::Done(result));
                }
            })
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        handles.push(handle);
    }
    Ok(Workers(handles))
}
