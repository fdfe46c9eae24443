//! The compile threads: where requests' constraints are checked and compiled.
//!
//! Compiling a schema into a grammar (and a validator) recurses over the schema, and for a
//! pathological one takes seconds. It must not run on an async worker (a deep recursion
//! there aborts the whole process, every request in flight with it) nor on tokio's blocking
//! pool (whose threads are many, with small stacks, and whose allocations fragment one malloc
//! arena each). So it runs here: a few threads with large stacks, a bounded queue, a time
//! budget per request, and panics caught and reported.
//!
//! Two lanes keep one request's compile from delaying another's: requests with nothing to
//! compile (no tools, no constraint) have threads of their own, and a compile that outlives
//! its budget gives its slot up: a replacement thread starts at once (at most as many
//! extra threads as the pool has), and the overrunning thread retires when it finishes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use proviso_backend::{Backend, GenerationRequest, RejectedRequest};

/// Each compile thread's stack: far more than any schema within the `$ref` limits needs.
const STACK_BYTES: usize = 64 * 1024 * 1024;

type Reply<J> = oneshot::Sender<Result<Result<J, RejectedRequest>, String>>;

struct Task<J> {
    request: GenerationRequest,
    reply: Reply<J>,
}

/// Why a request could not be prepared.
#[derive(Debug)]
pub(crate) enum PrepareError {
    /// The backend refused it (400/422).
    Rejected(RejectedRequest),
    /// Compiling took longer than the budget.
    TimedOut,
    /// Every compile thread is busy and the queue is full.
    Busy,
    /// The backend panicked; the message is for the log.
    Panicked(String),
}

/// One lane: a queue and the threads that serve it.
struct Lane<B: Backend> {
    name: &'static str,
    tasks: crossbeam_channel::Sender<Task<B::Job>>,
    receiver: crossbeam_channel::Receiver<Task<B::Job>>,
    backend: Arc<B>,
    /// Threads the lane should have.
    target: usize,
    /// Threads it has (more than `target` while overrunning compiles finish).
    live: Arc<AtomicUsize>,
    spawned: AtomicUsize,
}

impl<B: Backend> Lane<B> {
    fn new(
        name: &'static str,
        backend: Arc<B>,
        threads: usize,
        queue: usize,
    ) -> Result<Self, String> {
        let (tasks, receiver) = crossbeam_channel::bounded::<Task<B::Job>>(queue.max(1));
        let lane = Self {
            name,
            tasks,
            receiver,
            backend,
            target: threads.max(1),
            live: Arc::new(AtomicUsize::new(0)),
            spawned: AtomicUsize::new(0),
        };
        for _ in 0..lane.target {
            lane.live.fetch_add(1, Ordering::SeqCst);
            lane.spawn()?;
        }
        Ok(lane)
    }

    fn spawn(&self) -> Result<(), String> {
        let receiver = self.receiver.clone();
        let backend = self.backend.clone();
        let live = self.live.clone();
        let target = self.target;
        let i = self.spawned.fetch_add(1, Ordering::Relaxed);
        std::thread::Builder::new()
            .name(format!("proviso-{}-{i}", self.name))
            .stack_size(STACK_BYTES)
            .spawn(move || {
                // The thread ends when the server drops the sender, or when it finished an
                // overrunning compile and a replacement has taken its place.
                while let Ok(Task { request, reply }) = receiver.recv() {
                    if reply.is_closed() {
                        // The client gave up while the task waited.
                        continue;
                    }
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        backend.prepare(&request)
                    }))
                    .map_err(|panic| panic_message(panic.as_ref()));
                    drop(request);
                    let _ = reply.send(result);
                    let retire = live
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                            (n > target).then(|| n - 1)
                        })
                        .is_ok();
                    if retire {
                        return;
                    }
                }
            })
            .map_err(|e| format!("cannot start a compile thread: {e}"))?;
        Ok(())
    }

    /// A compile overran its budget: its thread is lost to the lane until it finishes, so
    /// another takes its place, within twice the lane's size.
    fn replace_overrunning(&self) {
        let grew = self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < 2 * self.target).then_some(n + 1)
            })
            .is_ok();
        if grew && self.spawn().is_err() {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
    }

    async fn prepare(
        &self,
        request: GenerationRequest,
        budget: Duration,
    ) -> Result<B::Job, PrepareError> {
        let (reply, answer) = oneshot::channel();
        self.tasks
            .try_send(Task { request, reply })
            .map_err(|_| PrepareError::Busy)?;
        match tokio::time::timeout(budget, answer).await {
            Err(_) => {
                self.replace_overrunning();
                Err(PrepareError::TimedOut)
            }
            Ok(Err(_)) => Err(PrepareError::Panicked(
                "a compile thread stopped without answering".into(),
            )),
            Ok(Ok(Err(panic))) => Err(PrepareError::Panicked(panic)),
            Ok(Ok(Ok(Err(rejected)))) => Err(PrepareError::Rejected(rejected)),
            Ok(Ok(Ok(Ok(job)))) => Ok(job),
        }
    }
}

pub(crate) struct Preparer<B: Backend> {
    /// Requests with a constraint or tools to compile.
    compile: Lane<B>,
    /// Requests with nothing to compile: they never wait behind a compile.
    plain: Lane<B>,
}

impl<B: Backend> Preparer<B> {
    pub(crate) fn start(backend: Arc<B>, threads: usize, queue: usize) -> Result<Self, String> {
        Ok(Self {
            compile: Lane::new("compile", backend.clone(), threads, queue)?,
            plain: Lane::new("prepare", backend, threads, queue)?,
        })
    }

    /// Prepares `request` on a compile thread within `budget`.
    pub(crate) async fn prepare(
        &self,
        request: GenerationRequest,
        budget: Duration,
    ) -> Result<B::Job, PrepareError> {
        if request.compiles_constraint() {
            self.compile.prepare(request, budget).await
        } else {
            self.plain.prepare(request, budget).await
        }
    }
}

/// The text of a panic's payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
