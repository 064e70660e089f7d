//! The hook's way to the daemon: one HTTP/1.1 exchange (hyper's client) on a fresh connection
//! to the address the daemon recorded (`.memfold/serve.json`), with a deadline, on a runtime of
//! its own. A hook answers within its agent's budget, so anything slower than the deadline
//! counts as "the daemon is down".

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A running daemon: where it listens, the token it wants, and the path prefix of the space
/// (`/spaces/<name>` with a home's operator token, empty for a root).
#[derive(Debug, Clone)]
pub struct Daemon {
    pub addr: SocketAddr,
    pub token: Option<String>,
    pub prefix: String,
}

/// What the daemon answered: the status and the body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
}

impl Answer {
    /// The body read as `T`.
    pub fn read<T: DeserializeOwned>(&self) -> Result<T, String> {
        serde_json::from_slice(&self.body)
            .map_err(|e| format!("the daemon's answer ({}) does not read as expected: {e}", self.status))
    }

    /// The message of an error answer (`{"error": {"message"}}`), else the body as text.
    pub fn error(&self) -> String {
        #[derive(serde::Deserialize)]
        struct Failed {
            error: Message,
        }
        #[derive(serde::Deserialize)]
        struct Message {
            message: String,
        }
        match serde_json::from_slice::<Failed>(&self.body) {
            Ok(failed) => failed.error.message,
            Err(_) => String::from_utf8_lossy(&self.body).chars().take(200).collect(),
        }
    }
}

impl Daemon {
    /// `GET prefix+path` (the query already encoded in `path`).
    pub fn get(&self, path: &str, deadline: Duration) -> Result<Answer, String> {
        self.request(Method::GET, path, None, deadline)
    }

    /// `POST prefix+path` with `body` as JSON.
    pub fn post<B: Serialize>(&self, path: &str, body: &B, deadline: Duration) -> Result<Answer, String> {
        let body = serde_json::to_vec(body).map_err(|e| format!("the request does not serialise: {e}"))?;
        self.request(Method::POST, path, Some(body), deadline)
    }

    /// `POST prefix+path` without a body.
    pub fn post_empty(&self, path: &str, deadline: Duration) -> Result<Answer, String> {
        self.request(Method::POST, path, None, deadline)
    }

    fn request(&self, method: Method, path: &str, body: Option<Vec<u8>>, deadline: Duration) -> Result<Answer, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting the client: {e}"))?;
        runtime.block_on(async {
            tokio::time::timeout(deadline, self.exchange(method, path, body))
                .await
                .map_err(|_| format!("no answer within {} ms", deadline.as_millis()))?
        })
    }

    async fn exchange(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<Answer, String> {
        let stream =
            tokio::net::TcpStream::connect(self.addr).await.map_err(|e| format!("connecting to {}: {e}", self.addr))?;
        stream.set_nodelay(true).ok();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("talking to {}: {e}", self.addr))?;
        tokio::spawn(connection);
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.prefix))
            .header(HOST, self.addr.to_string())
            .header(ACCEPT, "application/json");
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        if let Some(token) = &self.token {
            request = request.header(AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| format!("the request to {path}: {e}"))?;
        let response = sender.send_request(request).await.map_err(|e| format!("sending: {e}"))?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| format!("reading the answer: {e}"))?.to_bytes();
        Ok(Answer { status, body })
    }
}
