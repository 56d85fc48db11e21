//! The connection loop: accepts TCP connections up to a cap and serves each with hyper's
//! HTTP/1.1, dropping connections that are slow to send a request head or stay idle.
//!
//! `axum::serve` has no knobs for these, so this loop replaces it. Each connection is
//! watched: a request head must arrive within the header-read timeout of its first byte
//! (or, on a new connection, of the accept), and a connection with no request in progress
//! and no bytes read or written for the idle timeout is closed. A server-sent event stream
//! writes a keep-alive comment more often than the idle timeout, so streams stay open.
//! One client address (an IPv6 /64) may hold at most `max_connections_per_address` of the
//! replica's connections, so no one address can take every slot.
//!
//! A server-sent event stream lives for a whole match, and most of that time it is idle.
//! hyper keeps a read and a write buffer of 8 KiB for every connection, so once a stream's
//! head is on the wire, the loop takes the socket back from hyper, drops hyper's connection
//! with its buffers, and writes the body's chunks itself ([`Detachable`]).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Method, Response, Version, header};
use futures::StreamExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tower::ServiceExt;

/// Marks a response whose body is a long-lived stream (server-sent events): on a
/// connection of this loop, once hyper has sent its head, the loop writes the stream itself
/// and closes the connection after it. It takes the stream as the handler made it, from
/// under the layers' wrappers (an idle stream would otherwise keep the compression layer's
/// body, sized for a brotli encoder, though a stream is never compressed). Elsewhere (a test
/// calling the router directly) the response's body reads the same stream.
#[derive(Clone, Debug)]
pub struct Detachable(Arc<std::sync::Mutex<Option<Body>>>);

impl Detachable {
    /// The mark for a stream answered with `body`, and the body the response carries: it
    /// reads `body` until the connection loop takes it.
    pub fn new(body: Body) -> (Self, Body) {
        let slot = Arc::new(std::sync::Mutex::new(Some(body)));
        let reader = Self(slot.clone());
        (Self(slot), Body::new(reader))
    }

    fn take(&self) -> Option<Body> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl hyper::body::Body for Detachable {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            // Taken by the connection loop, which writes it from now on.
            None => Poll::Pending,
        }
    }
}

/// Limits on connections, per replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// Time a client has to send a whole request head, from its first byte (or from
    /// the accept, for a connection's first request).
    pub header_read_timeout: Duration,
    /// Time a connection may sit with no request in progress and no traffic.
    pub idle_timeout: Duration,
    /// Most open connections; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Most open connections from one client address (an IPv6 /64); one more is closed as
    /// soon as it is accepted. 0: no cap (behind a balancer, which caps per client itself).
    pub max_connections_per_address: usize,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_connections_per_address: 256,
        }
    }
}

/// Open connections per client address, for the per-address cap.
#[derive(Default)]
struct PerAddress {
    open: std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>,
}

/// One connection counted against its address while it lives.
struct AddressSlot {
    table: Arc<PerAddress>,
    key: IpAddr,
}

impl PerAddress {
    fn admit(self: &Arc<Self>, peer: IpAddr, cap: usize) -> Option<AddressSlot> {
        let key = super::limits::address_key(peer);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(key).or_insert(0);
        if cap > 0 && *count >= cap {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            table: self.clone(),
            key,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self
            .table
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// The connection's read buffer: twice the largest head the service reads, so a head
/// over that limit still arrives whole and is refused with a coded problem.
const MAX_BUFFER_BYTES: usize = 2 * super::MAX_HEAD_BYTES;
/// "No time recorded" in an activity stamp.
const NEVER: u64 = u64::MAX;

/// What the watchdog of one connection knows, stamped in milliseconds since its start.
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    last_io: AtomicU64,
    head_started: AtomicU64,
    /// A stream's body taken from its response, waiting for hyper to send the head.
    detached: std::sync::Mutex<Option<Body>>,
    /// Bytes were written since the body was detached: the head (hyper answers one request
    /// at a time, so nothing else is waiting to be written).
    wrote_head: std::sync::atomic::AtomicBool,
    /// Told at the first flush after the head was written: hyper flushes its socket only
    /// once everything it buffered is written.
    head_sent: Notify,
}

enum Verdict {
    Keep(Duration),
    Close(&'static str),
}

impl Activity {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_io: AtomicU64::new(0),
            // A new connection owes its first request head from the accept on.
            head_started: AtomicU64::new(0),
            detached: std::sync::Mutex::new(None),
            wrote_head: std::sync::atomic::AtomicBool::new(false),
            head_sent: Notify::new(),
        }
    }

    /// Takes the stream of a [`Detachable`] answer to a `GET` over HTTP/1.1 (hyper frames
    /// its body in chunks, which [`pump`] goes on with) that no layer encoded: hyper gets
    /// the same head, with `Connection: close`, and a body that never yields.
    fn detach(&self, response: Response<Body>) -> Response<Body> {
        let Some(detachable) = response.extensions().get::<Detachable>().cloned() else {
            return response;
        };
        if response.headers().contains_key(header::CONTENT_ENCODING) {
            return response;
        }
        let Some(stream) = detachable.take() else {
            return response;
        };
        let (mut parts, _wrapped) = response.into_parts();
        parts.extensions.remove::<Detachable>();
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        parts.headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        parts.headers.remove(header::CONTENT_LENGTH);
        *self.detached.lock().unwrap_or_else(PoisonError::into_inner) = Some(stream);
        self.wrote_head.store(false, Ordering::Release);
        let never = futures::stream::pending::<Result<axum::body::Bytes, Infallible>>();
        Response::from_parts(parts, Body::from_stream(never))
    }

    fn flushed(&self) {
        if self.wrote_head.load(Ordering::Acquire)
            && self
                .detached
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        {
            self.head_sent.notify_one();
        }
    }

    fn take_detached(&self) -> Option<Body> {
        self.detached
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(NEVER - 1)
    }

    fn read(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let now = self.now();
        self.last_io.store(now, Ordering::Relaxed);
        if self.in_flight.load(Ordering::Acquire) == 0 {
            let _ =
                self.head_started
                    .compare_exchange(NEVER, now, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    fn wrote(&self, bytes: usize) {
        if bytes > 0 {
            self.last_io.store(self.now(), Ordering::Relaxed);
            self.wrote_head.store(true, Ordering::Release);
        }
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_started.store(NEVER, Ordering::Release);
    }

    fn request_answered(&self) {
        self.last_io.store(self.now(), Ordering::Relaxed);
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    fn verdict(&self, settings: &ConnectionSettings) -> Verdict {
        let now = self.now();
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(NEVER - 1);
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Verdict::Keep(settings.idle_timeout.min(settings.header_read_timeout));
        }
        let head_started = self.head_started.load(Ordering::Acquire);
        if head_started != NEVER {
            let deadline = head_started.saturating_add(millis(settings.header_read_timeout));
            if now >= deadline {
                return Verdict::Close("header_read_timeout");
            }
            return Verdict::Keep(Duration::from_millis(deadline - now));
        }
        let deadline = self
            .last_io
            .load(Ordering::Relaxed)
            .saturating_add(millis(settings.idle_timeout));
        if now >= deadline {
            return Verdict::Close("idle_timeout");
        }
        Verdict::Keep(Duration::from_millis(deadline - now))
    }
}

/// A socket that tells its connection's [`Activity`] about every read and write.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.activity.read(buf.filled().len() - before);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = polled {
            self.activity.wrote(written);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let flushed = Pin::new(&mut self.stream).poll_flush(cx);
        if let Poll::Ready(Ok(())) = flushed {
            self.activity.flushed();
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(written)) = polled {
            self.activity.wrote(written);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets open requests finish
/// (waiting at most `grace`) and returns.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    settings: ConnectionSettings,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let slots = Arc::new(Semaphore::new(settings.max_connections));
    let per_address = Arc::new(PerAddress::default());
    let (closing_tx, closing_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, or a connection reset before the accept:
                    // pause briefly rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(address_slot) = per_address.admit(peer.ip(), settings.max_connections_per_address)
        else {
            metrics::counter!("statki_connections_refused_total", "reason" => "per_address")
                .increment(1);
            drop(stream);
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics::counter!("statki_connections_refused_total", "reason" => "replica")
                .increment(1);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let closing = closing_rx.clone();
        tokio::spawn(async move {
            serve_connection(stream, peer, app, settings, closing).await;
            drop(slot);
            drop(address_slot);
        });
    }
    let _ = closing_tx.send(true);
    let all = u32::try_from(settings.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(grace, slots.acquire_many(all)).await;
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    settings: ConnectionSettings,
    mut closing: watch::Receiver<bool>,
) {
    metrics::gauge!("statki_connections_open").increment(1.0);
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        stream,
        activity: activity.clone(),
    });
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            activity.request_started();
            let detachable =
                request.method() == Method::GET && request.version() == Version::HTTP_11;
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            let answered = app.clone().oneshot(request);
            let activity = activity.clone();
            async move {
                let Ok(response) = answered.await;
                activity.request_answered();
                Ok::<_, Infallible>(if detachable {
                    activity.detach(response)
                } else {
                    response
                })
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The watchdog below times request heads; hyper's own timer would also run
        // between requests and cut keep-alive connections at the header timeout.
        .header_read_timeout(None)
        .max_buf_size(MAX_BUFFER_BYTES);
    // Boxed, so that a detached stream's task holds none of it.
    let mut connection = Box::new(builder.serve_connection(io, service));
    let mut draining = *closing.borrow();
    if draining {
        Pin::new(&mut *connection).graceful_shutdown();
    }
    let mut check = activity.verdict(&settings);
    let detached = loop {
        let wait = match check {
            Verdict::Keep(wait) => wait,
            Verdict::Close(reason) => {
                metrics::counter!("statki_connections_dropped_total", "reason" => reason)
                    .increment(1);
                tracing::debug!(%peer, reason, "closing a connection");
                break None;
            }
        };
        tokio::select! {
            served = &mut *connection => {
                if let Err(error) = served {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
                break None;
            }
            () = activity.head_sent.notified() => {
                if let Some(body) = activity.take_detached() {
                    break Some(body);
                }
            }
            () = tokio::time::sleep(wait) => check = activity.verdict(&settings),
            _ = closing.changed(), if !draining => {
                draining = true;
                Pin::new(&mut *connection).graceful_shutdown();
            }
        }
    };
    if let Some(body) = detached {
        // The head is written and hyper holds nothing unsent: what it read beyond the
        // request (a pipelined request) goes unanswered, as the head said `Connection: close`.
        let stream = connection.into_parts().io.into_inner().stream;
        if let Err(error) = pump(stream, body, settings.idle_timeout).await {
            tracing::debug!(%peer, %error, "a stream's connection ended with an error");
        }
    }
    metrics::gauge!("statki_connections_open").decrement(1.0);
}

/// Writes a detached stream's body in HTTP/1.1 chunks until it ends (then the last chunk)
/// or the client goes away. The client sends nothing more on such a connection: anything it
/// does send, or its closing, ends the stream; so does a write that waits `idle_timeout`
/// for a client that reads nothing (as the watchdog closes such a connection in hyper).
async fn pump(mut stream: TcpStream, body: Body, idle_timeout: Duration) -> std::io::Result<()> {
    let mut body = body.into_data_stream();
    loop {
        let data = tokio::select! {
            data = body.next() => data,
            ready = stream.readable() => {
                ready?;
                let mut probe = [0_u8; 64];
                match stream.try_read(&mut probe) {
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(error) => return Err(error),
                    Ok(_) => return Ok(()),
                }
            }
        };
        let (chunk, last) = match data {
            None => (b"0\r\n\r\n".to_vec(), true),
            Some(data) => {
                let data = data.map_err(std::io::Error::other)?;
                if data.is_empty() {
                    continue;
                }
                let mut chunk = Vec::with_capacity(data.len() + 20);
                chunk.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                chunk.extend_from_slice(&data);
                chunk.extend_from_slice(b"\r\n");
                (chunk, false)
            }
        };
        tokio::time::timeout(idle_timeout, stream.write_all(&chunk))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        if last {
            return stream.shutdown().await;
        }
    }
}
