//! The error every use case returns, and the one place that says what kind of failure it is.
//!
//! Adapters map [`Kind`] to their own terms (HTTP status, MCP tool error, CLI exit code) and
//! show the message as it is; the message is the same everywhere.

use memfold_index::IndexError;
use memfold_models::embed::EmbedError;
use memfold_models::llm::LlmError;
use memfold_store::archive::ArchiveError;
use memfold_store::atomic::WriteError;
use memfold_store::commit::CommitError;
use memfold_store::ledger::LedgerError;
use memfold_store::state::StateError;
use memfold_store::sys::lock::LockError;

/// What went wrong in a use case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The root has not been initialised.
    #[error("{0}")]
    NotARoot(String),
    /// A process running as root was asked to use a root another account owns.
    #[error("{0}")]
    OtherOwner(String),
    /// No such entry, fact, plan or run.
    #[error("{message}")]
    NotFound { message: String },
    /// A malformed request: an id that cannot name anything, an empty fact, a bad parameter.
    #[error("{0}")]
    BadInput(String),
    /// A fact longer than `ingest.max_fact_bytes`; nothing was stored.
    #[error("{0}")]
    TooLarge(String),
    /// The write would put an entry where `memory.md` cannot read it back (inside a block a
    /// person or an older version left unclosed); nothing was written.
    #[error("{0}")]
    Unreadable(memfold_store::Problem),
    /// Refused because of what the files hold now (an undo whose entries changed since, a
    /// rejected plan, a run undone already); `ids` names what is in the way.
    #[error("{message}")]
    Conflict { message: String, ids: Vec<String> },
    /// `memory.md` changed under a write (a person's edit): nothing was written.
    #[error("{message}")]
    Stale { message: String, ids: Vec<String> },
    /// Another pass, apply, undo or forget holds the consolidation lock.
    #[error(transparent)]
    Busy(LockError),
    /// The use case needs an LLM and none is configured.
    #[error("{0}")]
    NoLlm(String),
    /// The LLM failed (unreachable, overloaded, or an unusable reply).
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// Extracting a turn's facts failed at the LLM; nothing was stored.
    #[error("{0}; nothing was stored, send the turn again later")]
    TurnNotStored(LlmError),
    /// The daemon's pass queue is full.
    #[error("{0} consolidation requests are already waiting; try again later")]
    QueueFull(usize),
    /// The daemon is shutting down and takes no more work.
    #[error("the daemon is shutting down")]
    ShuttingDown,
    /// The LLM answered twice with something that is not the JSON asked for.
    #[error("{0}")]
    LlmReply(String),
    /// The embedder failed.
    #[error("embedding: {0}")]
    Embed(#[from] EmbedError),
    #[error(transparent)]
    Lock(LockError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Commit(CommitError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("finding neighbours: {0}")]
    Neighbours(#[from] candle_core::Error),
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} is not a valid record ({message}); move it aside")]
    Corrupt { path: String, message: String },
    /// The index cannot be read (LanceDB failed or panicked opening it). It is derived from
    /// the markdown, which is untouched.
    #[error(
        "the index at {path} cannot be read ({message}); it is derived from the markdown, which is untouched: `memfold reindex --clear` rebuilds it"
    )]
    IndexUnreadable { path: String, message: String },
    #[error("{0}")]
    Other(String),
    /// git failed during a sync (no network, authentication, a remote that refuses).
    #[error("sync: {0}")]
    Git(#[from] memfold_store::git::GitError),
    /// A request that names a space its credentials do not reach, or a space name where none
    /// may be named.
    #[error("{0}")]
    Forbidden(String),
    /// No such space in this home (and none is made on first write).
    #[error("no space {0} in this home")]
    NoSpace(String),
    /// A space that cannot be opened (its index corrupted, a file unreadable); the daemon's
    /// other spaces keep serving.
    #[error("space {space} cannot be opened: {message}")]
    SpaceUnavailable { space: String, message: String },
    /// A failure inside a space, named so a home's operator knows which.
    #[error("space {space}: {source}")]
    InSpace { space: String, source: Box<Error> },
}

/// The kinds of failure adapters tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    BadInput,
    /// Larger than a configured limit.
    TooLarge,
    NotFound,
    Conflict,
    /// A write refused because `memory.md` changed under it; trying again later works.
    Stale,
    /// The consolidation lock is held.
    Busy,
    /// No LLM configured, or the LLM or embedder unreachable or overloaded.
    Unavailable,
    /// The LLM answered with something unusable.
    BadGateway,
    /// Credentials that do not reach what the request names.
    Forbidden,
    Internal,
}

impl Error {
    pub fn not_found(what: &str, id: &str) -> Error {
        Error::NotFound { message: format!("no {what} {id}") }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Error::NotFound { .. } => Kind::NotFound,
            Error::BadInput(_) | Error::NotARoot(_) | Error::OtherOwner(_) => Kind::BadInput,
            Error::TooLarge(_) => Kind::TooLarge,
            Error::Unreadable(_) => Kind::Conflict,
            Error::Conflict { .. } => Kind::Conflict,
            Error::Stale { .. } => Kind::Stale,
            Error::Busy(_) | Error::QueueFull(_) => Kind::Busy,
            Error::ShuttingDown => Kind::Unavailable,
            Error::NoLlm(_) | Error::Embed(_) => Kind::Unavailable,
            Error::Llm(e) | Error::TurnNotStored(e) if e.is_unavailable() => Kind::Unavailable,
            Error::Llm(_) | Error::TurnNotStored(_) | Error::LlmReply(_) => Kind::BadGateway,
            Error::Forbidden(_) => Kind::Forbidden,
            Error::NoSpace(_) => Kind::NotFound,
            Error::SpaceUnavailable { .. } | Error::IndexUnreadable { .. } | Error::Git(_) => Kind::Unavailable,
            Error::InSpace { source, .. } => source.kind(),
            _ => Kind::Internal,
        }
    }

    /// A short machine-readable code for the kind.
    pub fn code(&self) -> &'static str {
        match self {
            Error::NoLlm(_) | Error::Llm(_) | Error::TurnNotStored(_) if self.kind() == Kind::Unavailable => {
                "llm_unavailable"
            }
            Error::QueueFull(_) => "busy",
            Error::ShuttingDown => "shutting_down",
            Error::Embed(_) => "embedding_unavailable",
            Error::Unreadable(_) => "memory_unreadable",
            Error::SpaceUnavailable { .. } => "space_unavailable",
            Error::IndexUnreadable { .. } => "index_unreadable",
            Error::InSpace { source, .. } => source.code(),
            _ => match self.kind() {
                Kind::BadInput => "bad_request",
                Kind::TooLarge => "fact_too_large",
                Kind::NotFound => "not_found",
                Kind::Conflict => "conflict",
                Kind::Stale => "stale_write",
                Kind::Busy => "lock_held",
                Kind::Unavailable => "unavailable",
                Kind::BadGateway => "llm_bad_reply",
                Kind::Forbidden => "forbidden",
                Kind::Internal => "internal",
            },
        }
    }

    /// The entries, facts, plans or runs a conflict names (empty for other errors).
    pub fn ids(&self) -> &[String] {
        match self {
            Error::Conflict { ids, .. } | Error::Stale { ids, .. } => ids,
            Error::InSpace { source, .. } => source.ids(),
            _ => &[],
        }
    }
}

impl From<LockError> for Error {
    fn from(e: LockError) -> Self {
        match e {
            LockError::Held { .. } => Error::Busy(e),
            other => Error::Lock(other),
        }
    }
}

impl From<CommitError> for Error {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::Stale => Error::Stale { message: e.to_string(), ids: Vec::new() },
            CommitError::Hidden(problem) => Error::Unreadable(problem),
            other => Error::Commit(other),
        }
    }
}

impl From<memfold_index::corpus::RefreshError> for Error {
    fn from(e: memfold_index::corpus::RefreshError) -> Self {
        match e {
            memfold_index::corpus::RefreshError::Ledger(e) => e.into(),
            memfold_index::corpus::RefreshError::Index(e) => e.into(),
            memfold_index::corpus::RefreshError::Archive(e) => e.into(),
            memfold_index::corpus::RefreshError::Look { path, source } => Error::Read { path, source },
        }
    }
}

impl From<memfold_index::corpus::OpenError> for Error {
    fn from(e: memfold_index::corpus::OpenError) -> Self {
        match e {
            memfold_index::corpus::OpenError::Embed(e) => e.into(),
            memfold_index::corpus::OpenError::Index(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_codes() {
        let cases = [
            (Error::not_found("run", "r-1"), Kind::NotFound, "not_found"),
            (Error::BadInput("x".into()), Kind::BadInput, "bad_request"),
            (Error::Conflict { message: "x".into(), ids: vec!["m-1".into()] }, Kind::Conflict, "conflict"),
            (Error::Stale { message: "x".into(), ids: Vec::new() }, Kind::Stale, "stale_write"),
            (Error::NoLlm("x".into()), Kind::Unavailable, "llm_unavailable"),
            (Error::LlmReply("x".into()), Kind::BadGateway, "llm_bad_reply"),
            (Error::Corrupt { path: "p".into(), message: "m".into() }, Kind::Internal, "internal"),
            (Error::QueueFull(16), Kind::Busy, "busy"),
            (Error::ShuttingDown, Kind::Unavailable, "shutting_down"),
        ];
        for (err, kind, code) in cases {
            assert_eq!((err.kind(), err.code()), (kind, code), "{err}");
        }
    }
}
