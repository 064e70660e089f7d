//! The bearer token the daemon requires on every route but `/healthz`.
//!
//! By default it is a random token kept in the root's private state, `.memfold/token` (0600):
//! `memfold init` or the first `memfold serve` creates it (a root made by an older version gets
//! one at its next `serve`), and `memfold token` prints it, so a script can send
//! `Authorization: Bearer $(memfold token)`. `server.token_env` names a variable to take it
//! from instead. `server.auth = false` turns it off, which is refused unless the daemon listens
//! on loopback only. `memfold mcp` on stdin/stdout needs none: it is the user's own process.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use memfold_store::Root;
use memfold_store::config::Config;
use memfold_store::sys::access;

/// Random bytes in a token.
const TOKEN_BYTES: usize = 32;

/// Why there is no token to serve with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    #[error("server.token_env names {var}, which is unset or empty; refusing to serve without the token it asks for")]
    EnvMissing { var: String },
    #[error(
        "server.auth = false, but memfold would listen on {addr}, beyond loopback: anyone who can reach it could \
         read and change memory. Keep auth on (the default), or bind to 127.0.0.1"
    )]
    OffBeyondLoopback { addr: SocketAddr },
    #[error("server.auth = false: the daemon requires no token, so there is none to print")]
    Off,
    #[error("{path} holds no token; delete it and run `memfold serve` (or `memfold token`) to make a new one")]
    Empty { path: PathBuf },
    #[error("token file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("no random bytes for a token: {0}")]
    Random(String),
    #[error(
        "{first} and {second} hold the same token ({path}; a space folder copied to make another?): a space's \
         token must reach that space alone. Delete {path} and start again: a new token is made"
    )]
    Shared { first: String, second: String, path: PathBuf },
}

/// What a token file looked like: length, modification time (ns), inode. A file replaced or
/// rewritten reads differently.
pub type Stamp = (u64, i128, u64);

/// A token file's [`Stamp`], None when it cannot be read.
pub fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()), meta.ino()))
}

/// Where the daemon's token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The root's token file.
    File(PathBuf),
    /// The variable `server.token_env` names.
    Env(String),
}

/// What the daemon requires of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    Token {
        token: String,
        source: Source,
    },
    /// `server.auth = false`, on loopback.
    Off,
}

impl Auth {
    pub fn token(&self) -> Option<&str> {
        match self {
            Auth::Token { token, .. } => Some(token),
            Auth::Off => None,
        }
    }
}

/// The token the daemon on `config`'s root requires, creating the root's token file if it is
/// missing. `addr`, when known, is where it listens: `server.auth = false` is refused beyond
/// loopback.
pub fn resolve(config: &Config, root: &Root, addr: Option<SocketAddr>) -> Result<Auth, TokenError> {
    if !config.server.token_env.is_empty() {
        return match config.server_token_env() {
            Some(token) => Ok(Auth::Token { token, source: Source::Env(config.server.token_env.clone()) }),
            None => Err(TokenError::EnvMissing { var: config.server.token_env.clone() }),
        };
    }
    if !config.server.auth {
        return match addr {
            Some(addr) if !addr.ip().is_loopback() => Err(TokenError::OffBeyondLoopback { addr }),
            _ => Ok(Auth::Off),
        };
    }
    let path = root.token_file();
    Ok(Auth::Token { token: ensure(&path)?, source: Source::File(path) })
}

/// The token in `path`, made (random, 0600) if the file does not exist yet. Two processes
/// making it at once agree on one: the file appears whole, by a hard link, or not at all.
pub fn ensure(path: &Path) -> Result<String, TokenError> {
    let io = |source| TokenError::Io { path: path.to_path_buf(), source };
    match std::fs::read_to_string(path) {
        Ok(text) => return parse(&text, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    let token = hex::encode(bytes);
    let dir = path.parent().unwrap_or(Path::new("."));
    access::create_dir(dir).map_err(io)?;
    let mut tmp = tempfile::Builder::new().prefix(".token-").tempfile_in(dir).map_err(io)?;
    tmp.write_all(format!("{token}\n").as_bytes()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    match std::fs::hard_link(tmp.path(), path) {
        Ok(()) => {
            memfold_store::atomic::sync_dir(dir).map_err(io)?;
            Ok(token)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            parse(&std::fs::read_to_string(path).map_err(io)?, path)
        }
        Err(e) => Err(io(e)),
    }
}

fn parse(text: &str, path: &Path) -> Result<String, TokenError> {
    let token = text.trim();
    if token.is_empty() || token.chars().any(char::is_whitespace) {
        return Err(TokenError::Empty { path: path.to_path_buf() });
    }
    Ok(token.to_string())
}

/// Compare secrets (bearer tokens, CSRF tokens) in constant time for a given length.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert!(!same(b"", b"x"));
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"abc", b"ab"));
    }

    #[test]
    fn the_token_file_is_made_once_private_and_then_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".memfold/token");
        let first = ensure(&path).unwrap();
        assert_eq!(first.len(), 2 * TOKEN_BYTES);
        assert_eq!(ensure(&path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let other = tempfile::tempdir().unwrap();
        assert_ne!(ensure(&other.path().join("token")).unwrap(), first, "tokens are random");
        std::fs::write(&path, "\n").unwrap();
        assert!(matches!(ensure(&path), Err(TokenError::Empty { .. })));
    }

    #[test]
    fn auth_off_only_on_loopback_and_the_variable_wins() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let mut config = Config { root: dir.path().to_path_buf(), ..Config::default() };
        let loopback: SocketAddr = "127.0.0.1:7878".parse().unwrap();
        let wide: SocketAddr = "0.0.0.0:7878".parse().unwrap();
        let Auth::Token { source, .. } = resolve(&config, &root, Some(wide)).unwrap() else { panic!() };
        assert_eq!(source, Source::File(root.token_file()));
        config.server.auth = false;
        assert_eq!(resolve(&config, &root, Some(loopback)).unwrap(), Auth::Off);
        assert!(matches!(resolve(&config, &root, Some(wide)), Err(TokenError::OffBeyondLoopback { .. })));
        config.server.token_env = "MEMFOLD_TEST_UNSET_TOKEN_VARIABLE".into();
        assert!(matches!(resolve(&config, &root, Some(loopback)), Err(TokenError::EnvMissing { .. })));
    }
}
