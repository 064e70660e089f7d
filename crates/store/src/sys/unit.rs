//! The service manager's files `memfold service install` writes (a systemd unit or a launchd
//! plist, and the unit's settings file), and only those: a file is known for memfold's by
//! the line it starts with.

use std::path::Path;

/// What a file is, for `service install` and `uninstall`.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    Absent,
    /// memfold wrote it (it holds the mark), with this text.
    Ours(String),
    /// A file memfold did not write.
    Theirs,
}

/// What is at `path`, given the mark memfold's files hold.
pub fn find(path: &Path, mark: &str) -> Result<Found, String> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.contains(mark) => Ok(Found::Ours(text)),
        Ok(_) => Ok(Found::Theirs),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Found::Absent),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

/// Write `text` to `path`, making its folder.
pub fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Create `path` empty and private (0600), making its folder (private too); false when it
/// was there already.
pub fn create_private(path: &Path) -> Result<bool, String> {
    if path.exists() {
        return Ok(false);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    super::access::create_dir(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    super::access::write_private(path, b"").map_err(|e| format!("creating {}: {e}", path.display()))?;
    Ok(true)
}

/// Remove `path`; false when it was not there.
pub fn remove(path: &Path) -> Result<bool, String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!("removing {}: {e}", path.display())),
    }
}

/// Whether `path` is an empty file.
pub fn is_empty(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0)
}
