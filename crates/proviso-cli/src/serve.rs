//! `proviso serve`: the OpenAI-compatible server on the local model.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use proviso::llama::{BatchOptions, RunOptions};
use proviso::server::{serve_with_metrics, ServerConfig};
use proviso::tools::{CallFormat, Policy};
use proviso::{LocalBackend, LocalBackendConfig, LocalModel};

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// A GGUF model; the default model is fetched on first use.
    #[arg(long, value_name = "M.gguf")]
    model: Option<PathBuf>,
    /// The model id reported by the API (default: the GGUF's file stem without its
    /// quantization tag, `SmolLM2-135M-Instruct` for the default model; the full stem is
    /// then an alias).
    #[arg(long)]
    model_id: Option<String>,
    /// A further name the model answers to (repeatable); listed by /v1/models.
    #[arg(long = "model-alias", value_name = "NAME")]
    model_aliases: Vec<String>,
    /// Serve a request whatever `model` it names (by default an unknown name gets 404
    /// `model_not_found`).
    #[arg(long)]
    accept_any_model: bool,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0 picks a free one; the address is printed on stderr).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Requests generated at once (default: two per core, at most 8). With more than one,
    /// they are the slots of one batched context: their tokens share each forward pass,
    /// and requests join and leave between passes.
    #[arg(long, visible_alias = "workers", value_name = "N")]
    parallel: Option<usize>,
    /// KV cache cells shared by all slots (default: every slot's full `--ctx`). A request
    /// that finds no room even after idle slots' caches are evicted gets 503 with
    /// Retry-After.
    #[arg(long, value_name = "TOKENS")]
    kv_budget: Option<u32>,
    /// Requests that may wait for a worker; beyond that the server answers 503 with
    /// Retry-After.
    #[arg(long, default_value_t = 16)]
    queue: usize,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 2 * 1024 * 1024)]
    body_limit: usize,
    /// Per-request timeout in seconds, queueing included.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Context size of each request slot, in tokens.
    #[arg(long, default_value_t = 4096)]
    ctx: u32,
    /// The format the model writes tool calls in.
    #[arg(long, default_value = "hermes")]
    call_format: CallFormat,
    /// Permissions and argument budgets for returned tool calls (JSON); by default every
    /// intent class is permitted, since the client executes the calls.
    #[arg(long, value_name = "POLICY.json")]
    policy: Option<PathBuf>,
    /// Seconds a client may take to send a request's headers (from its first byte, or from
    /// connecting); the connection is closed beyond.
    #[arg(long, default_value_t = 10)]
    header_timeout: u64,
    /// Seconds a client may take to send a request's body once its headers are in (408
    /// beyond).
    #[arg(long, default_value_t = 30)]
    body_timeout: u64,
    /// Seconds a keep-alive connection may stay idle between requests.
    #[arg(long, default_value_t = 60)]
    idle_timeout: u64,
    /// Most open connections; beyond, new connections get a 503 and are closed.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// Seconds, on SIGTERM or Ctrl-C, that requests in flight may take to finish before
    /// their connections are dropped (idle and stalled connections close at once).
    #[arg(long, default_value_t = 30)]
    shutdown_timeout: u64,
    /// Seconds a request's schema or grammar may take to compile (400 beyond).
    #[arg(long, default_value_t = 10)]
    compile_timeout: u64,
    /// Responses kept in memory for `previous_response_id` (the most recent; 0 keeps none).
    #[arg(long, default_value_t = 256)]
    responses_kept: usize,
    /// Most bytes the kept Responses conversations take, each counted whole; the oldest go
    /// first, and a conversation larger than this alone is refused with `store: true`.
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES")]
    responses_bytes: usize,
    /// Seconds a stored response is kept.
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    responses_age: u64,
    /// Threads llama.cpp runs each forward pass on (default: `$PROVISO_THREADS`, else 1).
    /// More threads are faster on a machine the server has to itself (2 threads: 0.18 s
    /// against 0.22 s for a 32-token chat on two cores), and many times slower when other
    /// processes keep the cores busy (3.1 s against 0.36 s), because llama.cpp's threads
    /// wait for each other at every step; see BENCHMARKS.md.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Require `Authorization: Bearer <KEY>` on every /v1 route (and on /metrics when it
    /// shares the port). Prefer the environment variable: a command line is visible to
    /// every user of the machine.
    #[arg(long, env = "PROVISO_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Serve /metrics (and /health) on this port instead of the API port, where it is then
    /// absent.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Address for --metrics-port.
    #[arg(long, default_value = "127.0.0.1", requires = "metrics_port")]
    metrics_host: String,
    /// A host name the server answers to (repeatable). Requests with another Host, or an
    /// Origin naming another host, get 403. Default: the loopback names when bound to a
    /// loopback address, any host otherwise.
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// Answer requests whatever their Host and Origin (turns off the DNS-rebinding guard).
    #[arg(long, conflicts_with = "allowed_hosts")]
    allow_any_host: bool,
    /// Steering from the conversation: each response's tool choice and grammar derived
    /// from the calls and results the request carries (a call already answered cannot be
    /// written again; after a round of results the response answers). `off` generates every
    /// request as sent; a request turns it off with `"steering": false`.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    steering: String,
    /// Tool rounds since the last user turn after which a response answers instead of
    /// calling again; also the most rounds of server-executed (MCP) calls one request runs.
    #[arg(long, default_value_t = 4, value_name = "N")]
    max_tool_rounds: usize,
    /// An `mcpServers` configuration (the JSON Claude Desktop, Cursor and llama.cpp read):
    /// requests may use its servers' tools through an `mcp` tool naming a server by
    /// `server_label`, and the server executes each call, gated, in a loop of at most
    /// --max-tool-rounds rounds.
    #[arg(long, value_name = "CONFIG.json")]
    mcp: Option<PathBuf>,
    /// The policy MCP calls pass (roles, grants, budget, and per-tool overrides under
    /// `tools`). Without one, read tools are allowed and every other tool is refused at the
    /// permission gate.
    #[arg(long, value_name = "P.json", requires = "mcp")]
    mcp_policy: Option<PathBuf>,
    /// The most text of one MCP result kept, in bytes; the rest is cut with a note.
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024, requires = "mcp")]
    mcp_max_result_bytes: usize,
    /// Gateway mode: forward generation to this OpenAI-compatible server (its base URL),
    /// with the constraint in its dialect, and gate every response before returning it.
    #[arg(long, value_name = "URL")]
    upstream: Option<String>,
    /// The upstream's dialect: llamacpp (GBNF grammars, tools in the prompt), vllm, openai.
    #[arg(long, default_value = "openai", requires = "upstream")]
    upstream_kind: proviso::UpstreamKind,
    /// The model name to request upstream (default: the upstream's first model).
    #[arg(long, requires = "upstream")]
    upstream_model: Option<String>,
}

/// The server's thread count: `--threads`, else `$PROVISO_THREADS`, else 1. One thread
/// keeps a chat's latency when other processes keep the cores busy (0.36 s against 3.1 s
/// for two threads, with one busy process per core; see BENCHMARKS.md), at 1.2× the
/// latency of two threads on an idle machine.
fn serve_threads(flag: Option<usize>, env: Option<&str>) -> i32 {
    flag.or_else(|| env.and_then(|t| t.trim().parse::<usize>().ok()))
        .filter(|&t| t > 0)
        .map_or(1, |t| i32::try_from(t).unwrap_or(i32::MAX))
}

/// Two requests per core decode together well: a forward pass of a small model on a CPU
/// costs little more for eight sequences than for one. Beyond eight, latency grows faster
/// than throughput.
fn default_parallel() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    (2 * cores).clamp(1, 8)
}

pub(crate) fn run(args: &ServeArgs) -> Result<ExitCode> {
    let parallel = args.parallel.unwrap_or_else(default_parallel).max(1);
    let server = ServerConfig::default()
        .workers(parallel)
        .queue(args.queue)
        .body_limit(args.body_limit)
        .request_timeout(Duration::from_secs(args.timeout.max(1)))
        .header_timeout(Duration::from_secs(args.header_timeout.max(1)))
        .body_timeout(Duration::from_secs(args.body_timeout.max(1)))
        .idle_timeout(Duration::from_secs(args.idle_timeout.max(1)))
        .max_connections(args.max_connections.max(1))
        .shutdown_timeout(Duration::from_secs(args.shutdown_timeout))
        .compile_timeout(Duration::from_secs(args.compile_timeout.max(1)))
        .responses_kept(args.responses_kept)
        .responses_bytes(args.responses_bytes)
        .responses_age(Duration::from_secs(args.responses_age))
        .api_key(args.api_key.clone().filter(|k| !k.is_empty()))
        .model_aliases(args.model_aliases.clone())
        .any_model(args.accept_any_model)
        .max_tool_rounds(args.max_tool_rounds);
    let server = match &args.mcp {
        Some(path) => {
            let config = proviso_mcp::McpConfig::load(path)?;
            let policy = match &args.mcp_policy {
                Some(path) => proviso_mcp::ToolPolicy::load(path)?,
                None => proviso_mcp::ToolPolicy::default(),
            };
            let limits = proviso_mcp::Limits::default().max_result_bytes(args.mcp_max_result_bytes);
            // Servers start when a request first names one of them.
            let service = proviso_mcp::Service::new(config, policy, limits)?;
            server.server_tools(Arc::new(service))
        }
        None => server,
    };
    let policy = match &args.policy {
        Some(path) => Some(
            Policy::from_json(&crate::read_schema(path)?)
                .with_context(|| format!("in {}", path.display()))?,
        ),
        None => None,
    };
    if let Some(url) = &args.upstream {
        let mut config = proviso::GatewayConfig::new(url.clone(), args.upstream_kind);
        config.model.clone_from(&args.upstream_model);
        // A key for the upstream comes from the environment, never from the command line.
        config.api_key = std::env::var("PROVISO_UPSTREAM_KEY").ok();
        config.policy = policy.unwrap_or_else(|| LocalBackendConfig::default().policy);
        config.timeout = server.request_timeout;
        config.gbnf = Some(proviso::llama_gbnf());
        // An upstream is not made to answer after one round of results: a larger model may
        // need the lookup the first one made possible. The round limit still applies.
        config.steering = steering_limits(args).map(|l| l.answer_after_results(false));
        let backend = proviso::GatewayBackend::new(config).map_err(|e| anyhow::anyhow!("{e}"))?;
        let label = format!("{} via {url}", proviso::server::Backend::model_id(&backend));
        return listen(args, backend, server, &label);
    }
    let local = LocalModel::open(args.model.as_deref(), &mut crate::model::report_progress)?;
    let stem = local
        .path()
        .file_stem()
        .map_or_else(|| "local".to_owned(), |s| s.to_string_lossy().into_owned());
    let id = args
        .model_id
        .clone()
        .unwrap_or_else(|| without_quantization(&stem).to_owned());
    let mut server = server;
    if id != stem && !server.model_aliases.contains(&stem) {
        server.model_aliases.push(stem);
    }
    let threads = serve_threads(
        args.threads,
        std::env::var("PROVISO_THREADS").ok().as_deref(),
    );
    // One request has a context of its own; several are the slots of one batched context,
    // whose forward passes use every thread.
    if args.kv_budget.is_some() && parallel == 1 {
        anyhow::bail!(
            "--kv-budget is shared by batched requests; it needs --parallel 2 or more (one \
             request has a context of --ctx tokens of its own)"
        );
    }
    let batch = if parallel > 1 {
        let options = BatchOptions::new(parallel)
            .with_slot_ctx(args.ctx)
            .with_threads(threads);
        let options = match args.kv_budget {
            Some(cells) if cells < args.ctx => anyhow::bail!(
                "--kv-budget {cells} cannot hold one request's context (--ctx {})",
                args.ctx
            ),
            Some(cells) => options.with_kv_budget(cells),
            None => options,
        };
        Some(options)
    } else {
        None
    };
    let mut config = LocalBackendConfig::default()
        .call_format(args.call_format)
        .run(RunOptions::default().n_ctx(args.ctx).n_threads(threads))
        .batch(batch)
        .steering(steering_limits(args));
    if let Some(policy) = policy {
        config.policy = policy;
    }
    let backend = LocalBackend::new(Arc::new(local), id.clone(), config);
    listen(args, backend, server, &id)
}

/// The steering limits `--steering` and `--max-tool-rounds` ask for (`None`: off).
fn steering_limits(args: &ServeArgs) -> Option<proviso::tools::steer::Limits> {
    (args.steering == "on")
        .then(|| proviso::tools::steer::Limits::default().max_tool_rounds(args.max_tool_rounds))
}

fn listen<B: proviso::server::Backend>(
    args: &ServeArgs,
    backend: B,
    server: ServerConfig,
    id: &str,
) -> Result<ExitCode> {
    let workers = server.workers;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let address: SocketAddr = format!("{}:{}", args.host, args.port)
            .parse()
            .with_context(|| format!("{}:{} is not an address", args.host, args.port))?;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("listening on {address}"))?;
        let bound = listener.local_addr()?;
        let mut server = server;
        server.allowed_hosts = if args.allow_any_host {
            None
        } else if args.allowed_hosts.is_empty() {
            ServerConfig::default_allowed_hosts(&bound)
        } else {
            Some(args.allowed_hosts.clone())
        };
        let metrics_listener = match args.metrics_port {
            Some(port) => {
                let address: SocketAddr = format!("{}:{port}", args.metrics_host)
                    .parse()
                    .with_context(|| format!("{}:{port} is not an address", args.metrics_host))?;
                let l = tokio::net::TcpListener::bind(address)
                    .await
                    .with_context(|| format!("listening on {address}"))?;
                let mut stderr = std::io::stderr().lock();
                writeln!(
                    stderr,
                    "proviso: metrics on http://{}/metrics",
                    l.local_addr()?
                )?;
                Some(l)
            }
            None => None,
        };
        {
            let mut stderr = std::io::stderr().lock();
            writeln!(
                stderr,
                "proviso: serving {id} on http://{bound} ({workers} in parallel, queue {})",
                server.queue
            )?;
        }
        serve_with_metrics(
            backend,
            server,
            listener,
            metrics_listener,
            shutdown_signal(),
        )
        .await
        .context("serving")?;
        let mut stderr = std::io::stderr().lock();
        writeln!(
            stderr,
            "proviso: stopped after finishing the requests in flight"
        )?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        // Without a signal handler there is nothing to wait for but SIGTERM.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

/// A GGUF file stem without its quantization tag (`SmolLM2-135M-Instruct.Q4_1` is
/// `SmolLM2-135M-Instruct`): the model's name as people write it. A stem with no such tag is
/// returned whole.
fn without_quantization(stem: &str) -> &str {
    let Some((name, tag)) = stem.rsplit_once(['.', '-']) else {
        return stem;
    };
    let tag = tag.to_ascii_uppercase();
    let quantized = ["Q", "IQ", "F", "BF", "TQ"].iter().any(|prefix| {
        tag.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    });
    if quantized && !name.is_empty() {
        name
    } else {
        stem
    }
}

#[cfg(test)]
mod tests {
    use super::{serve_threads, without_quantization};

    #[test]
    fn the_server_runs_one_thread_unless_told_otherwise() {
        assert_eq!(serve_threads(None, None), 1);
        assert_eq!(serve_threads(None, Some("2")), 2);
        assert_eq!(serve_threads(Some(3), Some("2")), 3);
        assert_eq!(serve_threads(None, Some("zero")), 1);
        assert_eq!(serve_threads(Some(0), None), 1);
    }

    #[test]
    fn a_quantization_tag_is_not_part_of_the_model_name() {
        for (stem, name) in [
            ("SmolLM2-135M-Instruct.Q4_1", "SmolLM2-135M-Instruct"),
            ("Qwen2.5-0.5B-Instruct-Q8_0", "Qwen2.5-0.5B-Instruct"),
            ("model.IQ4_XS", "model"),
            ("model.f16", "model"),
            ("Llama-3.2-1B", "Llama-3.2-1B"),
            ("plain", "plain"),
        ] {
            assert_eq!(without_quantization(stem), name, "{stem}");
        }
    }
}
