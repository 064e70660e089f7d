//! The bearer token the daemon requires on every route but `/healthz`.
//!
//! By default it is a random token kept in the root's private state, `.memfold/token` (0600):
//! `memfold init` or the first `memfold serve` creates it (a root made by an older version gets
//! one at its next `serve`), and `memfold token` prints it, so a script can send
//! `Authorization: Bearer $(memfold token)`. `server.token_env` names a variable to take it
//! from instead. `server.auth = false` turns it off, which is refused unless the daemon listens
//! on loopback only. `memfold mcp` on stdin/stdout needs none: it is the user's own process.

use std::net::SocketAddr;
use std::path::PathBuf;

use memfold_store::Root;
use memfold_store::config::Config;
pub use memfold_store::token::{Stamp, TokenFileError, ensure, stamp};

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
    #[error(transparent)]
    File(#[from] TokenFileError),
    #[error(
        "{first} and {second} hold the same token ({path}; a space folder copied to make another?): a space's \
         token must reach that space alone. Delete {path} and start again: a new token is made"
    )]
    Shared { first: String, second: String, path: PathBuf },
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
