//! `proviso serve`: the OpenAI-compatible server on the local model.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use proviso::llama::RunOptions;
use proviso::server::{serve, ServerConfig};
use proviso::tools::{CallFormat, Policy};
use proviso::{LocalBackend, LocalBackendConfig, LocalModel};

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// A GGUF model; the default model is fetched on first use.
    #[arg(long, value_name = "M.gguf")]
    model: Option<PathBuf>,
    /// The model id reported by the API (default: the GGUF's file stem).
    #[arg(long)]
    model_id: Option<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0 picks a free one; the address is printed on stderr).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Worker threads, each with its own model context, generating one request at a time.
    #[arg(long, default_value_t = 1)]
    workers: usize,
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
    /// Context size of each worker, in tokens.
    #[arg(long, default_value_t = 4096)]
    ctx: u32,
    /// The format the model writes tool calls in.
    #[arg(long, default_value = "hermes")]
    call_format: CallFormat,
    /// Permissions and argument budgets for returned tool calls (JSON); by default every
    /// intent class is permitted, since the client executes the calls.
    #[arg(long, value_name = "POLICY.json")]
    policy: Option<PathBuf>,
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

pub(crate) fn run(args: &ServeArgs) -> Result<ExitCode> {
    let server = ServerConfig {
        workers: args.workers.max(1),
        queue: args.queue,
        body_limit: args.body_limit,
        request_timeout: Duration::from_secs(args.timeout.max(1)),
    };
    let policy = match &args.policy {
        Some(path) => Some(
            Policy::from_json(&crate::read_schema(path)?)
                .with_context(|| format!("in {}", path.display()))?,
        ),
        None => None,
    };
    if let Some(url) = &args.upstream {
        let config = proviso::GatewayConfig {
            url: url.clone(),
            kind: args.upstream_kind,
            model: args.upstream_model.clone(),
            // A key for the upstream comes from the environment, never from the command line.
            api_key: std::env::var("PROVISO_UPSTREAM_KEY").ok(),
            policy: policy.unwrap_or_else(|| LocalBackendConfig::default().policy),
            attempts: 2,
            timeout: server.request_timeout,
        };
        let backend = proviso::GatewayBackend::new(config).map_err(|e| anyhow::anyhow!("{e}"))?;
        let label = format!("{} via {url}", proviso::server::Backend::model_id(&backend));
        return listen(args, backend, server, &label);
    }
    let local = LocalModel::open(args.model.as_deref(), &mut crate::model::report_progress)?;
    let id = args.model_id.clone().unwrap_or_else(|| {
        local
            .path()
            .file_stem()
            .map_or_else(|| "local".to_owned(), |s| s.to_string_lossy().into_owned())
    });
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let threads = RunOptions::default().n_threads;
    let workers = args.workers.max(1);
    // Workers share the cores: each gets its share of llama.cpp threads.
    let per_worker = i32::try_from((cores / workers).max(1))
        .unwrap_or(1)
        .min(threads);
    let config = LocalBackendConfig {
        call_format: args.call_format,
        run: RunOptions {
            n_ctx: args.ctx,
            n_threads: per_worker,
            ..RunOptions::default()
        },
        ..LocalBackendConfig::default()
    };
    let config = LocalBackendConfig {
        policy: policy.unwrap_or(config.policy),
        ..config
    };
    let backend = LocalBackend::new(Arc::new(local), id.clone(), config);
    listen(args, backend, server, &id)
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
        {
            let mut stderr = std::io::stderr().lock();
            writeln!(
                stderr,
                "proviso: serving {id} on http://{bound} ({workers} worker(s), queue {})",
                server.queue
            )?;
        }
        serve(backend, server, listener, shutdown_signal())
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
