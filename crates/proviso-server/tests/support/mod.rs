//! A scripted backend and a server harness shared by the HTTP tests.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proviso_server::{
    serve_with_metrics, Backend, ChoiceResult, Delta, FinishReason, GenerationRequest,
    OutputConstraint, PromptInput, RejectedRequest, RunError, ServerConfig, Sink, ToolCallOut,
    ToolChoiceRequest, Worker,
};
use serde_json::Value;

/// Echoes the last message back, word by word, sleeping `delay` per word; a prompt starting
/// with "call" yields a tool call instead. Counts finished and cancelled jobs.
#[derive(Clone, Default)]
pub struct Echo {
    pub delay: Duration,
    pub finished: Arc<AtomicUsize>,
    pub cancelled: Arc<AtomicUsize>,
    pub seen: Arc<Mutex<Vec<String>>>,
}

pub struct EchoJob {
    text: String,
    max_words: usize,
    n: u32,
    /// The function a conversation opened with `forced …` calls whenever `tool_choice`
    /// forces a call (`required`, or that function by name): a model that always obeys.
    forced: Option<String>,
}

impl Backend for Echo {
    type Job = EchoJob;
    type Worker = Echo;

    fn model_id(&self) -> &str {
        "echo"
    }

    fn prepare(&self, request: &GenerationRequest) -> Result<EchoJob, RejectedRequest> {
        if let OutputConstraint::JsonSchema { schema, .. } = &request.constraint {
            if schema.get("not").is_some() {
                return Err(RejectedRequest {
                    param: Some("response_format".into()),
                    message: "the grammar cannot enforce `not`".into(),
                    unsupported: true,
                });
            }
        }
        let text = match &request.prompt {
            PromptInput::Chat(messages) => messages
                .last()
                .map(|m| m.content.clone())
                .unwrap_or_default(),
            PromptInput::Text(t) => t.clone(),
        };
        // Hooks for the hardening tests: a backend bug, and a constraint slow to compile.
        assert!(
            !text.starts_with("panic in prepare"),
            "a bug in the backend"
        );
        if text.starts_with("slow to compile") {
            std::thread::sleep(Duration::from_secs(3));
        }
        let opened_forced = match &request.prompt {
            PromptInput::Chat(messages) => messages
                .iter()
                .any(|m| m.role == proviso_contract::Role::User && m.content.starts_with("forced")),
            PromptInput::Text(_) => false,
        };
        let first_tool = request
            .tools
            .as_ref()
            .and_then(|t| t.get(0))
            .and_then(|t| t["function"]["name"].as_str())
            .map(str::to_owned);
        let forced = match (&request.tool_choice, opened_forced) {
            (ToolChoiceRequest::Required, true) => first_tool,
            (ToolChoiceRequest::Named(name), true) => Some(name.clone()),
            _ => None,
        };
        Ok(EchoJob {
            text,
            max_words: request.max_tokens.map_or(usize::MAX, |m| m as usize),
            n: request.n,
            forced,
        })
    }

    fn worker(&self) -> Result<Echo, proviso_server::WorkerError> {
        Ok(self.clone())
    }
}

impl Worker for Echo {
    type Job = EchoJob;

    fn run(&mut self, job: EchoJob, sink: &mut dyn Sink) -> Result<Vec<ChoiceResult>, RunError> {
        self.seen.lock().unwrap().push(job.text.clone());
        // Hooks for the hardening tests: no memory for the request before its first token,
        // and a worker that stops noticing cancellation for a while.
        if job.text.starts_with("overloaded") {
            return Err(RunError::Overloaded("no KV cells left".into()));
        }
        if job.text.starts_with("stuck") {
            sink.started();
            std::thread::sleep(Duration::from_secs(4));
        }
        let mut choices = Vec::new();
        for index in 0..job.n {
            let base = ChoiceResult::new(index, 3, 0);
            if job.text.starts_with("call") || job.forced.is_some() {
                let call = ToolCallOut {
                    // Forced calls, one per round of a loop, each with an id of its own.
                    id: if job.forced.is_some() {
                        format!("call_{index}_{}", self.seen.lock().unwrap().len())
                    } else {
                        format!("call_{index}")
                    },
                    name: job.forced.clone().unwrap_or_else(|| "get_arm".into()),
                    arguments: "{\"trial_id\":\"NCT04123456\"}".into(),
                };
                sink.send(
                    index,
                    Delta::ToolCall {
                        index: 0,
                        call: call.clone(),
                    },
                );
                let mut choice = base
                    .tool_calls(vec![call])
                    .finish_reason(FinishReason::ToolCalls);
                choice.completion_tokens = 9;
                choices.push(choice);
                continue;
            }
            // `ask …`: a clarification reply, as the local backend's `auto` makes one.
            if job.text.starts_with("ask") {
                sink.send(index, Delta::Content("Which trial?".into()));
                choices.push(
                    base.content(Some("Which trial?".into()))
                        .reply(proviso_server::Reply::Clarification),
                );
                continue;
            }
            let mut out = String::new();
            let mut finish = FinishReason::Stop;
            for (i, word) in job.text.split_inclusive(' ').enumerate() {
                if i == job.max_words {
                    finish = FinishReason::Length;
                    break;
                }
                std::thread::sleep(self.delay);
                out.push_str(word);
                sink.generated(1);
                if !sink.send(index, Delta::Content(word.to_owned())) {
                    self.cancelled.fetch_add(1, Ordering::SeqCst);
                    return Err(RunError::Cancelled);
                }
            }
            let tokens = out.split(' ').count() as u64;
            let mut choice = base.content(Some(out)).finish_reason(finish);
            choice.completion_tokens = tokens;
            choices.push(choice);
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        Ok(choices)
    }
}

pub struct Server {
    pub port: u16,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(backend: Echo, config: ServerConfig) -> Self {
        Self::start_with_metrics(backend, config, false).0
    }

    /// Starts the server, with `/metrics` on a port of its own when `metrics_port` is set;
    /// returns that port too.
    pub fn start_with_metrics(
        backend: Echo,
        config: ServerConfig,
        metrics_port: bool,
    ) -> (Self, Option<u16>) {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let metrics = if metrics_port {
                    Some(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap())
                } else {
                    None
                };
                port_tx
                    .send((
                        listener.local_addr().unwrap().port(),
                        metrics.as_ref().map(|m| m.local_addr().unwrap().port()),
                    ))
                    .unwrap();
                serve_with_metrics(backend, config, listener, metrics, async move {
                    let _ = rx.await;
                })
                .await
                .unwrap();
            });
        });
        let (port, metrics) = port_rx.recv().unwrap();
        (
            Self {
                port,
                shutdown: Some(tx),
                thread: Some(thread),
            },
            metrics,
        )
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_raw(path, "application/json", &body.to_string())
    }

    pub fn post_raw(&self, path: &str, content_type: &str, body: &str) -> (u16, Value) {
        let response = ureq::post(&self.url(path))
            .set("Content-Type", content_type)
            .send_string(body);
        let response = match response {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{e}"),
        };
        let status = response.status();
        (status, response.into_json().unwrap())
    }

    /// Asks the server to stop and returns at once; `join` waits for it.
    pub fn signal_stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Waits for the server's thread to end.
    pub fn join(mut self) {
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }

    pub fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}
