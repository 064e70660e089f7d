//! Accepting connections: hyper's HTTP/1 server with a timer, a cap on connections that slow
//! clients cannot hold, and a graceful stop.
//!
//! axum's own `serve` runs hyper without a timer, so a client that sends half a request head
//! and stops holds its connection (and a file descriptor) forever. Here every connection is
//! served by hyper's HTTP/1 connection with [`TokioTimer`] and a header read timeout
//! (`server.header_timeout_secs`): the head must be complete that long after the connection
//! opens, or after the previous response on a kept-alive connection, so the same timer closes
//! idle connections.
//!
//! At most `server.max_connections` are served at once (by default as many as the process's
//! file limit allows, [`memfold_store::sys::limits`]). When they are all taken and another client
//! connects, the oldest connection that has not yet sent a whole request head is closed to
//! make room: a crowd of slow or silent clients (another account on the machine, a stalled
//! proxy) can delay a real request by no more than the time it takes to close one of them. A
//! connection that is inside a request is never closed for another; when every connection
//! is, new ones wait in the kernel's backlog until one ends. Bodies are bounded in [`super`].

use memfold_store::sys::guard as lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot, watch};
use tower::ServiceExt;

use crate::service::metrics::Metrics;
use crate::service::workers::stopped;

/// How the listener treats connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub max_connections: usize,
    /// How long open requests may take to finish once `stop` says so.
    pub drain: Duration,
}

/// A connection being served, as the accept loop sees it.
struct Open {
    id: u64,
    /// Set when hyper has read the connection's first whole request head.
    head_seen: Arc<AtomicBool>,
    /// Closes the connection (taken when it is closed for a newer one).
    close: Option<oneshot::Sender<()>>,
}

/// The connections being served, oldest first.
#[derive(Default)]
struct Connections {
    next: u64,
    open: VecDeque<Open>,
}

impl Connections {
    fn add(&mut self) -> (u64, Arc<AtomicBool>, oneshot::Receiver<()>) {
        let (close, closed) = oneshot::channel();
        let head_seen = Arc::new(AtomicBool::new(false));
        self.next += 1;
        self.open.push_back(Open { id: self.next, head_seen: head_seen.clone(), close: Some(close) });
        (self.next, head_seen, closed)
    }

    fn remove(&mut self, id: u64) {
        self.open.retain(|open| open.id != id);
    }

    /// Close the oldest connection that has not sent a whole request head; false if every
    /// connection has.
    fn close_oldest_silent(&mut self) -> bool {
        let silent = self.open.iter_mut().find(|o| o.close.is_some() && !o.head_seen.load(Ordering::Relaxed));
        match silent.and_then(|open| open.close.take()) {
            Some(close) => close.send(()).is_ok(),
            None => false,
        }
    }
}

/// Serve `app` on `listener` until `stop` says so, then let open connections finish their
/// requests for at most `limits.drain`.
pub async fn serve(
    listener: TcpListener,
    app: super::App,
    limits: Limits,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let connections = Arc::new(Mutex::new(Connections::default()));
    loop {
        let stream = tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // An answer written in parts (head, then body) goes out at once, not after
                    // the client's delayed ACK (40 ms on Linux) to a client that keeps the
                    // connection open.
                    stream.set_nodelay(true).ok();
                    stream
                }
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted:
                    // wait a moment rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if lock(&connections).close_oldest_silent() {
                    metrics.silent_connection_closed();
                    tracing::debug!("every connection taken: closed the oldest that had sent no request head");
                }
                tokio::select! {
                    biased;
                    _ = stopped(&mut stop) => break,
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                }
            }
        };
        let (id, head_seen, closed) = lock(&connections).add();
        metrics.connection(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            head_seen.store(true, Ordering::Relaxed);
            app.clone().oneshot(request.map(Body::new))
        });
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        let (connections, metrics) = (connections.clone(), metrics.clone());
        tokio::spawn(async move {
            tokio::select! {
                served = connection => if let Err(e) = served {
                    tracing::debug!(error = %e, "connection closed");
                },
                // Dropping the connection closes its socket.
                _ = closed => {}
            }
            lock(&connections).remove(id);
            metrics.connection(false);
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.drain) => {
            tracing::warn!(drain_secs = limits.drain.as_secs(), "requests still open after the drain time; closing them");
        }
    }
}
