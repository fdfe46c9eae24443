//! Server-sent events: a request's worker events as OpenAI chunks, counted in the metrics
//! once, when the stream ends or is dropped.

#[allow(clippy::wildcard_imports)]
use super::*;

pub(super) struct StreamState {
    pub(super) receiver: mpsc::UnboundedReceiver<WorkerEvent>,
    pub(super) _guard: CancelOnDrop,
    pub(super) meta: Meta,
    pub(super) include_usage: bool,
    pub(super) started_choices: Vec<u32>,
    pub(super) pending: std::collections::VecDeque<Value>,
    pub(super) finished: bool,
    pub(super) metrics: Arc<Metrics>,
    pub(super) started: Instant,
    pub(super) deadline: Instant,
    pub(super) generated: Arc<AtomicU64>,
    pub(super) request_id: RequestId,
    pub(super) outcome: SharedOutcome,
    /// Whether the request has been counted in the metrics (at its end, once).
    pub(super) counted: bool,
}

impl StreamState {
    pub(super) fn apply(&mut self, event: WorkerEvent) {
        match event {
            WorkerEvent::Started => {}
            WorkerEvent::Delta(index, delta) => self.delta(index, delta),
            WorkerEvent::Done(result) => self.done(result),
        }
    }

    /// Counts the stream once, with how it ended: `ok`, `timeout`, `cancelled` (the client
    /// went away), or the error code.
    fn count(&mut self, end: &str) {
        if self.counted {
            return;
        }
        self.counted = true;
        self.metrics.request(self.meta.kind.route(), 200, Some(end));
        with_outcome(&self.outcome, |o| o.stream_end = Some(end.to_owned()));
        if end == "timeout" || end == "cancelled" {
            let reason = if end == "timeout" {
                "timeout"
            } else {
                "client_gone"
            };
            self.metrics.cancelled(reason);
            tracing::info!(request_id = %self.request_id.0, reason, "stream cancelled");
        }
    }

    fn delta(&mut self, index: u32, delta: Delta) {
        let first = !self.started_choices.contains(&index);
        if first {
            self.started_choices.push(index);
        }
        let choice = match (self.meta.kind, delta) {
            (Kind::Completion, Delta::Content(text)) => {
                json!({"index": index, "text": text, "logprobs": null, "finish_reason": null})
            }
            (Kind::Completion, Delta::ToolCall { .. }) => return,
            // A named custom tool's input is sent as one call when it is complete.
            (Kind::Chat, Delta::Content(_)) if self.meta.custom_call.is_some() => {
                self.started_choices.retain(|&i| i != index);
                return;
            }
            (Kind::Chat, Delta::Content(text)) => {
                let mut delta = json!({"content": text});
                if first {
                    delta["role"] = json!("assistant");
                }
                json!({"index": index, "delta": delta, "logprobs": null, "finish_reason": null})
            }
            (
                Kind::Chat,
                Delta::ToolCall {
                    index: call_index,
                    call,
                },
            ) => {
                if let Some(input) = custom_input(&self.meta.custom_tools, &call) {
                    // A custom call is sent whole, in one delta.
                    let mut delta = json!({"tool_calls": [{"index": call_index, "id": call.id, "type": "custom",
                        "custom": {"name": call.name, "input": input}}]});
                    if first {
                        delta["role"] = json!("assistant");
                        delta["content"] = Value::Null;
                    }
                    json!({"index": index, "delta": delta, "logprobs": null, "finish_reason": null})
                } else {
                    // The call's header first, then its arguments, as OpenAI streams them.
                    let mut head = json!({"tool_calls": [{"index": call_index, "id": call.id, "type": "function",
                        "function": {"name": call.name, "arguments": ""}}]});
                    if first {
                        head["role"] = json!("assistant");
                        head["content"] = Value::Null;
                    }
                    self.pending.push_back(chunk(&self.meta, json!([{"index": index, "delta": head, "logprobs": null, "finish_reason": null}])));
                    json!({"index": index, "delta": {"tool_calls": [{"index": call_index, "function": {"arguments": call.arguments}}]},
                        "logprobs": null, "finish_reason": null})
                }
            }
        };
        self.pending.push_back(chunk(&self.meta, json!([choice])));
    }

    fn done(&mut self, result: Result<Vec<ChoiceResult>, RunError>) {
        self.metrics.duration(self.started.elapsed());
        match result {
            Ok(choices) => {
                let choices: Vec<ChoiceResult> = choices
                    .into_iter()
                    .map(|c| as_custom_call(&self.meta, c))
                    .collect();
                for c in &choices {
                    if self.meta.custom_call.is_some() {
                        if let Some(call) = c.tool_calls.first() {
                            self.delta(
                                c.index,
                                Delta::ToolCall {
                                    index: 0,
                                    call: call.clone(),
                                },
                            );
                        } else if let Some(text) = &c.content {
                            // A fragment: its text, which was held back, is sent now.
                            let delta = json!({"role": "assistant", "content": text});
                            self.pending.push_back(chunk(&self.meta, json!([{"index": c.index, "delta": delta, "logprobs": null, "finish_reason": null}])));
                        }
                    }
                    let finish = match self.meta.kind {
                        Kind::Chat => {
                            json!({"index": c.index, "delta": {}, "logprobs": null, "finish_reason": c.finish_reason.as_str()})
                        }
                        Kind::Completion => {
                            json!({"index": c.index, "text": "", "logprobs": null, "finish_reason": c.finish_reason.as_str()})
                        }
                    };
                    self.pending.push_back(chunk(&self.meta, json!([finish])));
                }
                let prompt = choices.first().map_or(0, |c| c.prompt_tokens);
                let completion = choices.iter().map(|c| c.completion_tokens).sum();
                with_outcome(&self.outcome, |o| {
                    o.prompt_tokens = prompt;
                    o.completion_tokens = completion;
                    o.finish_reason = choices.first().map(|c| c.finish_reason.as_str().to_owned());
                });
                if self.include_usage {
                    let mut last = chunk(&self.meta, json!([]));
                    last["usage"] = wire::usage(prompt, completion);
                    self.pending.push_back(last);
                }
                self.count("ok");
            }
            Err(e) => {
                let timed_out = Instant::now() >= self.deadline;
                let (_, code, message) =
                    describe_run_error(&e, timed_out, &self.metrics, &self.request_id);
                with_outcome(&self.outcome, |o| {
                    o.completion_tokens = self.generated.load(Ordering::SeqCst);
                });
                self.pending.push_back(json!({"error": {"message": message, "type": "server_error", "param": null, "code": code}}));
                self.count(code);
            }
        }
        self.finished = true;
    }
}

impl Drop for StreamState {
    fn drop(&mut self) {
        // Dropped before its end: the client went away mid-stream.
        if !self.counted {
            with_outcome(&self.outcome, |o| {
                o.completion_tokens = self.generated.load(Ordering::SeqCst);
            });
            self.count("cancelled");
        }
    }
}

pub(super) fn sse_stream(state: StreamState) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        loop {
            if let Some(next) = state.pending.pop_front() {
                return Some((event(&next), Some(state)));
            }
            if state.finished {
                // The OpenAI terminator; the state (and its cancel guard) ends here.
                return Some((Ok(Event::default().data("[DONE]")), None));
            }
            // A stream keeps the request timeout too: it ends with a timeout error event.
            let event = next_event(&mut state.receiver, state.deadline).await;
            state.apply(event);
        }
    })
}
