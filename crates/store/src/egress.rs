//! `.memfold/egress.jsonl`: every request memfold sent to an LLM or embedding endpoint, one
//! line each (time, endpoint host, purpose, bytes sent, a hash of the body, how many secrets
//! were masked in it). What left the machine, and why; never what it said.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

/// What a request to an endpoint was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    /// Facts picked out of a conversation turn.
    Extract,
    /// A consolidation call: the ops for a cluster.
    Consolidate,
    /// The keying call of a pass: what each new fact is about.
    Keys,
    /// The lines of `MEMORY.md`.
    Promote,
    /// The text of entries merged by hand.
    Merge,
    /// Vectors from an embedding endpoint.
    Embed,
}

impl Purpose {
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Extract => "extract",
            Purpose::Consolidate => "consolidate",
            Purpose::Keys => "keys",
            Purpose::Promote => "promote",
            Purpose::Merge => "merge",
            Purpose::Embed => "embed",
        }
    }
}

impl std::fmt::Display for Purpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request that left the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    pub time: DateTime<Utc>,
    /// The endpoint's host (and port), never its path or key.
    pub host: String,
    pub purpose: Purpose,
    pub bytes: usize,
    /// SHA-256 of the body as sent, 16 hex characters.
    pub body_hash: String,
    /// Secrets replaced by markers before it was sent.
    pub masked: usize,
}

/// Requests recorded by this process (for `/metrics`), and the secrets masked in them.
static SENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static MASKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Requests this process sent to endpoints, and the secrets masked in them.
pub fn counted() -> (u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    (SENT.load(Relaxed), MASKED.load(Relaxed))
}

/// Where a root's requests are recorded. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Egress {
    file: Arc<PathBuf>,
}

impl Egress {
    pub fn new(file: PathBuf) -> Egress {
        Egress { file: Arc::new(file) }
    }

    /// Record a request (a failure to record is logged, never fatal to the request).
    pub fn record(&self, url: &str, purpose: Purpose, body: &[u8], masked: usize) {
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| {
                u.host_str().map(|h| match u.port() {
                    Some(port) => format!("{h}:{port}"),
                    None => h.to_string(),
                })
            })
            .unwrap_or_default();
        let sent = Sent {
            time: crate::sys::clock::now(),
            host,
            purpose,
            bytes: body.len(),
            body_hash: super::content_hash(body)[..16].to_string(),
            masked,
        };
        SENT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        MASKED.fetch_add(masked as u64, std::sync::atomic::Ordering::Relaxed);
        if let Err(e) = super::state::append_jsonl(&self.file, &[sent]) {
            tracing::warn!(error = %e, "a request that left the machine was not recorded");
        }
    }
}

/// The requests recorded in `file` since `since` (all without), oldest first; lines that do
/// not parse are skipped.
pub fn read(file: &Path, since: Option<NaiveDate>) -> Result<Vec<Sent>, super::state::StateError> {
    let (sent, _) = super::state::read_jsonl::<Sent>(file, "egress.jsonl")?;
    Ok(sent.into_iter().filter(|s| since.is_none_or(|d| s.time.date_naive() >= d)).collect())
}
