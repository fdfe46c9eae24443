//! Connections: accepting them under a cap, timing out the ones that stall, and closing them
//! all within a deadline on shutdown.
//!
//! axum's own `serve` has no header, body or idle timeouts and waits without limit for every
//! connection on shutdown, so one client that stops halfway through its headers can hold a
//! connection (and a graceful shutdown) forever. Here each connection is served by hyper
//! under a watchdog that knows whether a request is in flight:
//!
//! * between requests, a connection that has started a request must finish its headers
//!   within the header timeout (counted from the first byte), and one that sends nothing is
//!   closed after the idle timeout (the header timeout before its first request);
//! * while a request is in flight the handler bounds the body read (the body timeout) and the
//!   generation (the request timeout);
//! * on shutdown, idle connections close at once, busy ones get until the shutdown deadline,
//!   and whatever is left is dropped.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tower::ServiceExt;

/// Connection-level limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    pub(crate) header_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) shutdown_timeout: Duration,
}

/// What the watchdog knows of one connection.
#[derive(Debug)]
struct Activity {
    opened: Instant,
    in_flight: AtomicUsize,
    /// Requests whose body is still being received.
    uploading: AtomicUsize,
    served: AtomicUsize,
    state: Mutex<Idle>,
}

#[derive(Debug, Clone, Copy)]
struct Idle {
    /// When the connection last became idle (opened, or a response finished).
    since: Instant,
    /// The first byte of a request whose headers are not complete yet.
    first_byte: Option<Instant>,
}

impl Activity {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            opened: now,
            in_flight: AtomicUsize::new(0),
            uploading: AtomicUsize::new(0),
            served: AtomicUsize::new(0),
            state: Mutex::new(Idle {
                since: now,
                first_byte: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        // The state is two timestamps; a poisoned lock still holds valid ones.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn bytes_read(&self) {
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            let mut state = self.lock();
            if state.first_byte.is_none() {
                state.first_byte = Some(Instant::now());
            }
        }
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.served.fetch_add(1, Ordering::SeqCst);
        self.lock().first_byte = None;
    }

    fn request_finished(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let mut state = self.lock();
        state.since = Instant::now();
        state.first_byte = None;
    }

    /// Why the connection should be closed now, if it should.
    fn expired(&self, limits: &ConnLimits, now: Instant) -> Option<&'static str> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let state = *self.lock();
        if let Some(first) = state.first_byte {
            return (now.duration_since(first) > limits.header_timeout).then_some("header_timeout");
        }
        if self.served.load(Ordering::SeqCst) == 0 {
            // Nothing at all yet: a client that connects must start talking promptly.
            return (now.duration_since(self.opened) > limits.header_timeout)
                .then_some("header_timeout");
        }
        (now.duration_since(state.since) > limits.idle_timeout).then_some("idle_timeout")
    }
}

/// The TCP stream, reporting the bytes it reads to the watchdog.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.bytes_read();
        }
        result
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Marks the request finished when the response body is done or dropped (a streamed
/// response keeps the connection busy until its last event).
struct Finished(Arc<Activity>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// A response body that holds `guard` until the body is finished or dropped: how the
/// connection watchdog and the request log learn that a response (a stream included) ended.
pub(crate) struct GuardedBody<G> {
    inner: Body,
    _guard: G,
}

impl<G: Send + Unpin + 'static> GuardedBody<G> {
    pub(crate) fn wrap(inner: Body, guard: G) -> Body {
        Body::new(Self {
            inner,
            _guard: guard,
        })
    }
}

impl<G: Send + Unpin + 'static> hyper::body::Body for GuardedBody<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body being received: counted in its connection's `uploading` until its last
/// frame has arrived (or it is dropped unread).
struct UploadBody {
    inner: hyper::body::Incoming,
    activity: Option<Arc<Activity>>,
}

impl UploadBody {
    fn new(inner: hyper::body::Incoming, activity: Arc<Activity>) -> Self {
        let activity = if hyper::body::Body::is_end_stream(&inner) {
            None
        } else {
            activity.uploading.fetch_add(1, Ordering::SeqCst);
            Some(activity)
        };
        Self { inner, activity }
    }

    fn done(&mut self) {
        if let Some(activity) = self.activity.take() {
            activity.uploading.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for UploadBody {
    fn drop(&mut self) {
        self.done();
    }
}

impl hyper::body::Body for UploadBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) || self.inner.is_end_stream() {
            self.done();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Accepts connections on `listener` and serves `router` on them until `shutdown` turns
/// true; then closes them within the shutdown deadline.
pub(crate) async fn run(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    mut shutdown: watch::Receiver<bool>,
    rejected: impl Fn() + Send + Sync + 'static,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut connections = JoinSet::new();
    let rejected = Arc::new(rejected);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of file descriptors and the like: back off briefly, keep serving.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    rejected();
                    connections.spawn(refuse(stream));
                    continue;
                };
                let router = router.clone();
                let shutdown = shutdown.clone();
                connections.spawn(async move {
                    serve_connection(stream, router, limits, shutdown).await;
                    drop(permit);
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    drop(router);
    // Every connection has been told to finish; give them until the deadline.
    let drained = tokio::time::timeout(limits.shutdown_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = connections.len(),
            "shutdown deadline passed: dropping the connections still open"
        );
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }
}

/// Over the connection cap: a short 503 and close, without reading the request.
async fn refuse(mut stream: TcpStream) {
    use tokio::io::AsyncWriteExt;
    let body = r#"{"error":{"message":"the server has too many open connections; retry shortly","type":"server_error","param":null,"code":"too_many_connections"}}"#;
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: ConnLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let service_activity = activity.clone();
    let service =
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            service_activity.request_started();
            let finished = Finished(service_activity.clone());
            let router = router.clone();
            let uploading = service_activity.clone();
            async move {
                let request: Request =
                    request.map(|incoming| Body::new(UploadBody::new(incoming, uploading)));
                let response: Response = match router.oneshot(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok::<_, std::convert::Infallible>(
                    response.map(|inner| GuardedBody::wrap(inner, finished)),
                )
            }
        });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The watchdog below times headers out; hyper's own timer would also cut idle
        // keep-alive connections at the header timeout.
        .header_read_timeout(None)
        .keep_alive(true)
        .max_buf_size(64 * 1024);
    let connection = builder.serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let tick = limits
        .header_timeout
        .min(limits.idle_timeout)
        .min(Duration::from_millis(250))
        .max(Duration::from_millis(10));
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut closing = *shutdown.borrow();
    if closing {
        connection.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            _ = connection.as_mut() => return,
            _ = interval.tick() => {
                if let Some(reason) = activity.expired(&limits, Instant::now()) {
                    tracing::debug!(reason, "closing a stalled connection");
                    return;
                }
                // During shutdown an idle connection is closed at once; hyper's graceful
                // shutdown waits for a request whose headers never finish. So is one still
                // sending its body: nothing has been computed for it yet, and a stalled
                // upload would otherwise hold the shutdown for the whole body timeout.
                if closing
                    && (activity.in_flight.load(Ordering::SeqCst) == 0
                        || activity.uploading.load(Ordering::SeqCst) > 0)
                {
                    tracing::debug!("closing a connection at shutdown");
                    return;
                }
            }
            changed = shutdown.changed(), if !closing => {
                if changed.is_err() || *shutdown.borrow() {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
        }
    }
}
