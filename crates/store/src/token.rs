//! `.memfold/token`: the daemon's bearer token as a file, random and readable by its owner
//! only, made once (two processes making it at once agree on one) and read as it is.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::sys::access;

/// Random bytes in a token.
pub const TOKEN_BYTES: usize = 32;

/// Why a token file gives no token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenFileError {
    #[error("{path} holds no token; delete it and run `memfold serve` (or `memfold token`) to make a new one")]
    Empty { path: PathBuf },
    #[error("token file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("no random bytes for a token: {0}")]
    Random(String),
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

/// The token in `path`, made (random, 0600) if the file does not exist yet. Two processes
/// making it at once agree on one: the file appears whole, by a hard link, or not at all.
pub fn ensure(path: &Path) -> Result<String, TokenFileError> {
    let io = |source| TokenFileError::Io { path: path.to_path_buf(), source };
    match std::fs::read_to_string(path) {
        Ok(text) => return parse(&text, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| TokenFileError::Random(e.to_string()))?;
    let token = hex::encode(bytes);
    let dir = path.parent().unwrap_or(Path::new("."));
    access::create_dir(dir).map_err(io)?;
    let mut tmp = tempfile::Builder::new().prefix(".token-").tempfile_in(dir).map_err(io)?;
    tmp.write_all(format!("{token}\n").as_bytes()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    match std::fs::hard_link(tmp.path(), path) {
        Ok(()) => {
            crate::atomic::sync_dir(dir).map_err(io)?;
            Ok(token)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            parse(&std::fs::read_to_string(path).map_err(io)?, path)
        }
        Err(e) => Err(io(e)),
    }
}

fn parse(text: &str, path: &Path) -> Result<String, TokenFileError> {
    let token = text.trim();
    if token.is_empty() || token.chars().any(char::is_whitespace) {
        return Err(TokenFileError::Empty { path: path.to_path_buf() });
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(matches!(ensure(&path), Err(TokenFileError::Empty { .. })));
    }
}
