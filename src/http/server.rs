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

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

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
        }
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
        Pin::new(&mut self.stream).poll_flush(cx)
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
            let mut request = request.map(axum::body::Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            let answered = app.clone().oneshot(request);
            let activity = activity.clone();
            async move {
                let response = answered.await;
                activity.request_answered();
                response.map_err(|never: Infallible| match never {})
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
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut draining = *closing.borrow();
    if draining {
        connection.as_mut().graceful_shutdown();
    }
    let mut check = activity.verdict(&settings);
    loop {
        let wait = match check {
            Verdict::Keep(wait) => wait,
            Verdict::Close(reason) => {
                metrics::counter!("statki_connections_dropped_total", "reason" => reason)
                    .increment(1);
                tracing::debug!(%peer, reason, "closing a connection");
                break;
            }
        };
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(error) = served {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
                break;
            }
            () = tokio::time::sleep(wait) => check = activity.verdict(&settings),
            _ = closing.changed(), if !draining => {
                draining = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
    metrics::gauge!("statki_connections_open").decrement(1.0);
}
