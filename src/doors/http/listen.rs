//! Accepting connections: hyper's HTTP/1 server with a timer, a cap on connections, and a
//! graceful stop.
//!
//! axum's own `serve` runs hyper without a timer, so a client that sends half a request head
//! and stops holds its connection (and a file descriptor) forever. Here every connection is
//! served by hyper's HTTP/1 connection with [`TokioTimer`] and a header read timeout
//! (`server.header_timeout_secs`): the head must be complete that long after the connection
//! opens, or after the previous response on a kept-alive connection, so the same timer closes
//! idle connections. At most `server.max_connections` are served at once; past that, new
//! connections wait in the kernel's backlog until one closes, so a flood of slow clients
//! cannot exhaust the daemon's file descriptors. Bodies are bounded in [`super`].

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt;

use crate::service::workers::stopped;

/// How the listener treats connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub max_connections: usize,
    /// How long open requests may take to finish once `stop` says so.
    pub drain: Duration,
}

/// Serve `app` on `listener` until `stop` says so, then let open connections finish their
/// requests for at most `limits.drain`.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, mut stop: watch::Receiver<bool>) {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let slot = tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let stream = tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before it was accepted:
                    // wait a moment rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let app = app.clone();
        let service =
            hyper::service::service_fn(move |request: Request<Incoming>| app.clone().oneshot(request.map(Body::new)));
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection closed");
            }
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
