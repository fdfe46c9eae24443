//! Prometheus metrics (`GET /metrics`, text format), through `prometheus-client`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use proviso_backend::ChoiceResult;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    status: u16,
    /// How the request ended: `ok`, `error` (a 4xx or 5xx status), or for a stream, whose
    /// status is sent before it ends, `timeout`, `cancelled` or the error code.
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct McpLabels {
    server: String,
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GateLabels {
    gate: String,
}

/// Every metric the server exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    tokens: Family<DirectionLabels, Counter>,
    time_to_first_token: Histogram,
    token_latency: Histogram,
    mask_time: Histogram,
    request_duration: Histogram,
    parse_failures: Counter,
    rejections: Family<GateLabels, Counter>,
    queued: Gauge,
    running: Gauge,
    cancelled: Family<ReasonLabels, Counter>,
    refused_connections: Counter,
    mcp_calls: Family<McpLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("proviso");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "HTTP requests by route and status code",
            requests.clone(),
        );
        let tokens = Family::<DirectionLabels, Counter>::default();
        registry.register(
            "tokens",
            "Tokens read (prompt) and generated (completion)",
            tokens.clone(),
        );
        let time_to_first_token = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        registry.register(
            "time_to_first_token_seconds",
            "From the start of work on a choice to its first generated token",
            time_to_first_token.clone(),
        );
        let token_latency = Histogram::new(exponential_buckets(0.001, 2.0, 12));
        registry.register(
            "token_latency_seconds",
            "Latency of each generated token",
            token_latency.clone(),
        );
        let mask_time = Histogram::new(exponential_buckets(0.000_001, 2.0, 20));
        registry.register(
            "mask_seconds",
            "Time to compute each grammar mask",
            mask_time.clone(),
        );
        let request_duration = Histogram::new(exponential_buckets(0.01, 2.0, 14));
        registry.register(
            "request_duration_seconds",
            "Wall time of generation requests",
            request_duration.clone(),
        );
        let parse_failures = Counter::default();
        registry.register(
            "parse_failures",
            "Generated outputs rejected at the parse gate",
            parse_failures.clone(),
        );
        let rejections = Family::<GateLabels, Counter>::default();
        registry.register(
            "gate_rejections",
            "Generated outputs rejected, by gate",
            rejections.clone(),
        );
        // Every gate is listed from the start, so a dashboard sees zeros rather than nothing.
        for gate in [
            "transport",
            "parse",
            "schema",
            "application",
            "policy",
            "permission",
            "budget",
            "evidence",
        ] {
            let _ = rejections.get_or_create(&GateLabels {
                gate: gate.to_owned(),
            });
        }
        let mcp_calls = Family::<McpLabels, Counter>::default();
        registry.register(
            "mcp_calls",
            "MCP tool calls the server made or refused, by server, tool and outcome",
            mcp_calls.clone(),
        );
        let queued = Gauge::default();
        registry.register(
            "queued_requests",
            "Requests waiting for a worker",
            queued.clone(),
        );
        let running = Gauge::default();
        registry.register(
            "running_requests",
            "Requests a worker is generating",
            running.clone(),
        );
        let cancelled = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "cancelled_requests",
            "Requests cancelled before their end, by reason (timeout, client_gone)",
            cancelled.clone(),
        );
        for reason in ["timeout", "client_gone"] {
            let _ = cancelled.get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            });
        }
        let refused_connections = Counter::default();
        registry.register(
            "refused_connections",
            "Connections refused because the connection cap was reached",
            refused_connections.clone(),
        );
        Self {
            registry,
            requests,
            tokens,
            time_to_first_token,
            token_latency,
            mask_time,
            request_duration,
            parse_failures,
            rejections,
            queued,
            running,
            cancelled,
            refused_connections,
            mcp_calls,
        }
    }

    /// Counts a finished HTTP request. `stream_end` is how a stream ended (its status is
    /// always 200); for other requests the outcome follows the status.
    pub fn request(&self, route: &str, status: u16, stream_end: Option<&str>) {
        let outcome = stream_end.map_or_else(
            || if status < 400 { "ok" } else { "error" }.to_owned(),
            str::to_owned,
        );
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_owned(),
                status,
                outcome,
            })
            .inc();
    }

    /// Counts a request cancelled before its end (`timeout` or `client_gone`).
    pub fn cancelled(&self, reason: &str) {
        self.cancelled
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts one MCP call by its server, tool and outcome (`ok`, `tool_error`,
    /// `rejected_<gate>`, `approval_requested`, `not_approved` or a failure's kind).
    pub fn mcp_call(&self, server: &str, tool: &str, outcome: &str) {
        self.mcp_calls
            .get_or_create(&McpLabels {
                server: server.to_owned(),
                tool: tool.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts a connection refused at the cap.
    pub fn connection_refused(&self) {
        self.refused_connections.inc();
    }

    /// Counts tokens generated by a request that ended without a result (cut, cancelled or
    /// rejected): they were computed all the same.
    pub fn completion_tokens(&self, tokens: u64) {
        self.tokens
            .get_or_create(&DirectionLabels {
                direction: "completion".into(),
            })
            .inc_by(tokens);
    }

    /// Records a finished choice.
    pub fn choice(&self, choice: &ChoiceResult) {
        self.tokens
            .get_or_create(&DirectionLabels {
                direction: "prompt".into(),
            })
            .inc_by(choice.prompt_tokens);
        self.tokens
            .get_or_create(&DirectionLabels {
                direction: "completion".into(),
            })
            .inc_by(choice.completion_tokens);
        if let Some(t) = choice.timings.time_to_first_token {
            self.time_to_first_token.observe(t.as_secs_f64());
        }
        for t in &choice.timings.token_latencies {
            self.token_latency.observe(t.as_secs_f64());
        }
        for t in &choice.timings.mask_times {
            self.mask_time.observe(t.as_secs_f64());
        }
        for gate in &choice.rejections {
            self.rejection(*gate);
        }
    }

    /// Counts an output rejected at `gate`.
    pub fn rejection(&self, gate: proviso_contract::Gate) {
        if gate == proviso_contract::Gate::Parse {
            self.parse_failures.inc();
        }
        self.rejections
            .get_or_create(&GateLabels {
                gate: gate.as_str().to_owned(),
            })
            .inc();
    }

    /// Records a generation request's wall time.
    pub fn duration(&self, duration: Duration) {
        self.request_duration.observe(duration.as_secs_f64());
    }

    /// The queue gauge.
    #[must_use]
    pub fn queued(&self) -> &Gauge {
        &self.queued
    }

    /// The running gauge.
    #[must_use]
    pub fn running(&self) -> &Gauge {
        &self.running
    }

    /// The text exposition format.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
