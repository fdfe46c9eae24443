//! The compile threads: where requests' constraints are checked and compiled.
//!
//! Compiling a schema into a grammar (and a validator) recurses over the schema, and for a
//! pathological one takes seconds. It must not run on an async worker (a deep recursion
//! there aborts the whole process, every request in flight with it) nor on tokio's blocking
//! pool (whose threads are many, with small stacks, and whose allocations fragment one malloc
//! arena each). So it runs here: a few threads with large stacks, a bounded queue, a time
//! budget per request, and panics caught and reported.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::app::panic_message;
use crate::backend::{Backend, GenerationRequest, RejectedRequest};

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

pub(crate) struct Preparer<B: Backend> {
    tasks: crossbeam_channel::Sender<Task<B::Job>>,
}

impl<B: Backend> Preparer<B> {
    pub(crate) fn start(backend: Arc<B>, threads: usize, queue: usize) -> Result<Self, String> {
        let (tasks, receiver) = crossbeam_channel::bounded::<Task<B::Job>>(queue.max(1));
        for i in 0..threads.max(1) {
            let receiver = receiver.clone();
            let backend = backend.clone();
            std::thread::Builder::new()
                .name(format!("proviso-compile-{i}"))
                .stack_size(STACK_BYTES)
                .spawn(move || {
                    // The thread ends when the server drops the sender.
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
                    }
                })
                .map_err(|e| format!("cannot start a compile thread: {e}"))?;
        }
        Ok(Self { tasks })
    }

    /// Prepares `request` on a compile thread within `budget`.
    pub(crate) async fn prepare(
        &self,
        request: GenerationRequest,
        budget: Duration,
    ) -> Result<B::Job, PrepareError> {
        let (reply, answer) = oneshot::channel();
        self.tasks
            .try_send(Task { request, reply })
            .map_err(|_| PrepareError::Busy)?;
        match tokio::time::timeout(budget, answer).await {
            Err(_) => Err(PrepareError::TimedOut),
            Ok(Err(_)) => Err(PrepareError::Panicked(
                "a compile thread stopped without answering".into(),
            )),
            Ok(Ok(Err(panic))) => Err(PrepareError::Panicked(panic)),
            Ok(Ok(Ok(Err(rejected)))) => Err(PrepareError::Rejected(rejected)),
            Ok(Ok(Ok(Ok(job)))) => Ok(job),
        }
    }
}
