//! OpenAI-compatible HTTP plumbing shared by the chat and embedding clients: auth, timeouts, retries.
//!
//! An [`Endpoint`] is one base URL (e.g. `http://127.0.0.1:11434/v1`) with its API key, timeout and
//! retry budget. [`Endpoint::post_json`] retries connection errors, timeouts, 429 and 5xx with
//! exponential backoff (honouring `Retry-After` seconds) and fails at once on any other 4xx. The
//! chat client ([`crate::llm`]) and the embedder ([`crate::embed::remote`]) add their own request
//! and reply shapes on top.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

/// First backoff delay; attempt `n` waits `base × 2^n`.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// Longest backoff delay between two attempts.
const BACKOFF_CAP: Duration = Duration::from_secs(10);
/// Longest wait a `Retry-After` header can ask for.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);
/// Characters of an error body kept in [`HttpError::Status`].
const BODY_EXCERPT_CHARS: usize = 300;

/// Errors from an OpenAI-compatible endpoint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The base URL does not parse.
    #[error("{what} endpoint {url} is not a valid URL: {message}")]
    InvalidUrl { what: &'static str, url: String, message: String },
    /// The HTTP client could not be built (TLS setup).
    #[error("{what} endpoint {url}: cannot build http client: {message}")]
    Client { what: &'static str, url: String, message: String },
    /// Connection refused or reset, or no answer within the timeout, on every attempt.
    #[error("{what} endpoint {url} unreachable after {attempts} attempts: {message}")]
    Unreachable { what: &'static str, url: String, attempts: u32, message: String },
    /// The server answered with an error status (after retries for 429 and 5xx).
    #[error("{what} endpoint {url} answered {status}{}: {body}", attempts_note(*.attempts))]
    Status { what: &'static str, url: String, status: u16, attempts: u32, body: String },
    /// The server answered 2xx with something that is not the expected JSON.
    #[error("{what} reply from {url} is malformed: {message}")]
    BadReply { what: &'static str, url: String, message: String },
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 { format!(" after {attempts} attempts") } else { String::new() }
}

impl HttpError {
    /// The URL the error is about.
    pub fn url(&self) -> &str {
        match self {
            HttpError::InvalidUrl { url, .. }
            | HttpError::Client { url, .. }
            | HttpError::Unreachable { url, .. }
            | HttpError::Status { url, .. }
            | HttpError::BadReply { url, .. } => url,
        }
    }
}

/// One OpenAI-compatible base URL with its key, timeout and retry budget. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Endpoint {
    what: &'static str,
    base_url: String,
    api_key: Option<String>,
    client: reqwest::Client,
    max_retries: u32,
    backoff_base: Duration,
    backoff_cap: Duration,
}

impl Endpoint {
    /// An endpoint named `what` ("chat", "embedding") in messages. The API key is read once, here,
    /// from the environment variable *named* `api_key_env`; an empty name or an unset variable
    /// means no `Authorization` header (local servers need none).
    pub fn new(
        what: &'static str,
        base_url: &str,
        api_key_env: &str,
        timeout: Duration,
        max_retries: u32,
    ) -> Result<Endpoint, HttpError> {
        let base_url = base_url.trim().trim_end_matches('/').to_string();
        reqwest::Url::parse(&base_url).map_err(|e| HttpError::InvalidUrl {
            what,
            url: base_url.clone(),
            message: e.to_string(),
        })?;
        let api_key = match api_key_env.trim() {
            "" => None,
            name => std::env::var(name).ok().map(|k| k.trim().to_string()).filter(|k| !k.is_empty()),
        };
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| HttpError::Client { what, url: base_url.clone(), message: e.to_string() })?;
        Ok(Endpoint {
            what,
            base_url,
            api_key,
            client,
            max_retries,
            backoff_base: BACKOFF_BASE,
            backoff_cap: BACKOFF_CAP,
        })
    }

    /// Replace the backoff schedule (attempt `n` waits `base × 2^n`, at most `cap`).
    pub fn with_backoff(mut self, base: Duration, cap: Duration) -> Endpoint {
        self.backoff_base = base;
        self.backoff_cap = cap;
        self
    }

    /// The base URL without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The full URL of `path` (which starts with `/`) under the base URL.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// POST `body` to `path` and return the JSON reply, retrying transient failures.
    /// A loop of its own rather than a backoff crate's: the delay comes from the server's
    /// `Retry-After` when it sends one, and the error names the attempts made, which a crate
    /// would leave to closures as long as this loop.
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value, HttpError> {
        let url = self.url(path);
        let attempts = self.max_retries + 1;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (retry_after, failure) = match self.try_once(&url, body).await {
                Attempt::Done(reply) => return reply,
                Attempt::Transient { retry_after, failure } => (retry_after, failure),
            };
            if attempt >= attempts {
                return Err(failure.into_error(self.what, url, attempt));
            }
            let delay = retry_after.unwrap_or_else(|| self.backoff(attempt - 1));
            tracing::warn!(endpoint = self.what, %url, attempt, delay_ms = delay.as_millis() as u64,
                error = %failure, "request failed, retrying");
            tokio::time::sleep(delay).await;
        }
    }

    fn backoff(&self, n: u32) -> Duration {
        self.backoff_base.saturating_mul(2u32.saturating_pow(n.min(16))).min(self.backoff_cap)
    }

    async fn try_once(&self, url: &str, body: &Value) -> Attempt {
        let mut request = self.client.post(url).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return Attempt::Transient { retry_after: None, failure: Failure::Unreachable(error_chain(e)) },
        };
        let status = response.status();
        let retry_after = retry_after(&response);
        let text = match response.text().await {
            Ok(text) => text,
            Err(e) => return Attempt::Transient { retry_after: None, failure: Failure::Unreachable(error_chain(e)) },
        };
        if status.is_success() {
            let reply = serde_json::from_str(&text).map_err(|e| HttpError::BadReply {
                what: self.what,
                url: url.to_string(),
                message: format!("{e} in {:?}", excerpt(&text)),
            });
            return Attempt::Done(reply);
        }
        let failure = Failure::Status(status.as_u16(), excerpt(&text));
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            Attempt::Transient { retry_after, failure }
        } else {
            Attempt::Done(Err(failure.into_error(self.what, url.to_string(), 1)))
        }
    }
}

/// The outcome of one request.
enum Attempt {
    Done(Result<Value, HttpError>),
    Transient { retry_after: Option<Duration>, failure: Failure },
}

/// Why an attempt failed, before we know whether it was the last one.
enum Failure {
    Unreachable(String),
    Status(u16, String),
}

impl Failure {
    fn into_error(self, what: &'static str, url: String, attempts: u32) -> HttpError {
        match self {
            Failure::Unreachable(message) => HttpError::Unreachable { what, url, attempts, message },
            Failure::Status(status, body) => HttpError::Status { what, url, status, attempts, body },
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(message) => f.write_str(message),
            Failure::Status(status, body) => write!(f, "status {status}: {body}"),
        }
    }
}

/// `Retry-After` in seconds (the HTTP-date form is ignored), capped.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs).min(RETRY_AFTER_CAP))
}

/// reqwest's message plus its causes ("error sending request: connection refused").
fn error_chain(error: reqwest::Error) -> String {
    let timed_out = error.is_timeout();
    let error = error.without_url();
    let mut message = if timed_out { "timed out".to_string() } else { error.to_string() };
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = cause.source();
    }
    message
}

/// The first characters of a body on one line.
fn excerpt(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(BODY_EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{FakeOpenAi, FakeReply};
    use std::time::Instant;

    fn endpoint(base_url: &str, retries: u32) -> Endpoint {
        Endpoint::new("chat", base_url, "", Duration::from_millis(500), retries)
            .unwrap()
            .with_backoff(Duration::from_millis(5), Duration::from_millis(20))
    }

    fn body() -> Value {
        serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    }

    #[tokio::test]
    async fn server_error_then_success_is_retried() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::Status(500));
        fake.push_chat(FakeReply::Status(503));
        fake.push_chat(FakeReply::Content("ok".into()));
        let reply = endpoint(&fake.base_url(), 3).post_json("/chat/completions", &body()).await.unwrap();
        assert_eq!(reply["choices"][0]["message"]["content"], "ok");
        assert_eq!(fake.chat_calls(), 3);
    }

    #[tokio::test]
    async fn too_many_requests_is_retried() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::Status(429));
        fake.push_chat(FakeReply::Content("ok".into()));
        endpoint(&fake.base_url(), 1).post_json("/chat/completions", &body()).await.unwrap();
        assert_eq!(fake.chat_calls(), 2);
    }

    #[tokio::test]
    async fn client_error_fails_at_once() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::StatusMessage(400, "model not found".into()));
        fake.push_chat(FakeReply::Content("never".into()));
        let err = endpoint(&fake.base_url(), 3).post_json("/chat/completions", &body()).await.unwrap_err();
        assert_eq!(fake.chat_calls(), 1, "no retries on 400");
        let msg = err.to_string();
        assert!(matches!(err, HttpError::Status { status: 400, attempts: 1, .. }), "{err:?}");
        assert!(msg.contains(&fake.base_url()) && msg.contains("400") && msg.contains("model not found"), "{msg}");
    }

    #[tokio::test]
    async fn retries_exhausted_reports_status_and_attempts() {
        let fake = FakeOpenAi::start().await;
        let err = endpoint(&fake.base_url(), 2).post_json("/chat/completions", &body()).await.unwrap_err();
        assert_eq!(fake.chat_calls(), 3);
        let msg = err.to_string();
        assert!(msg.contains("answered 500 after 3 attempts") && msg.contains("no scripted reply"), "{msg}");
    }

    #[tokio::test]
    async fn down_endpoint_is_unreachable_and_named() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let base = format!("http://127.0.0.1:{port}/v1");
        let started = Instant::now();
        let err = endpoint(&base, 3).post_json("/chat/completions", &body()).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
        let msg = err.to_string();
        assert!(matches!(err, HttpError::Unreachable { attempts: 4, .. }), "{err:?}");
        assert!(
            msg.starts_with(&format!("chat endpoint {base}/chat/completions unreachable after 4 attempts")),
            "{msg}"
        );
    }

    #[tokio::test]
    async fn stalled_reply_times_out_and_is_retried() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::Stall(Duration::from_secs(5)));
        fake.push_chat(FakeReply::Content("late but fine".into()));
        let endpoint = Endpoint::new("chat", &fake.base_url(), "", Duration::from_millis(200), 1).unwrap();
        let reply = endpoint.post_json("/chat/completions", &body()).await.unwrap();
        assert_eq!(reply["choices"][0]["message"]["content"], "late but fine");
    }

    #[tokio::test]
    async fn retry_after_header_is_honoured() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::RetryAfter(1));
        fake.push_chat(FakeReply::Content("ok".into()));
        let started = Instant::now();
        endpoint(&fake.base_url(), 1).post_json("/chat/completions", &body()).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(900), "waited only {:?}", started.elapsed());
    }

    #[test]
    fn invalid_base_url_is_named() {
        let err = Endpoint::new("embedding", "not a url", "", Duration::from_secs(1), 0).unwrap_err();
        assert!(err.to_string().starts_with("embedding endpoint not a url is not a valid URL"), "{err}");
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let e = Endpoint::new("chat", "http://127.0.0.1:1/v1", "", Duration::from_secs(1), 3).unwrap();
        let delays: Vec<_> = (0..8).map(|n| e.backoff(n).as_millis()).collect();
        assert_eq!(delays, [200, 400, 800, 1600, 3200, 6400, 10000, 10000]);
    }
}
