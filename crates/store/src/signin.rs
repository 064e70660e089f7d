//! One-time sign-in codes for the review page, under `.memfold/ui-codes/` of a root (a space's
//! own page) or of a home (the operator's).
//!
//! `memfold ui` mints a random code and stores only its sha256, as a file of its own (private
//! to the owner, like every file of the root). Whoever can write that folder can already edit
//! `memory.md`, so a code grants nothing new, and the CLI needs no token and makes no HTTP call.
//! A code is good for [`CODE_TTL`] and for one sign-in: consuming it removes its file, and only
//! one remover can succeed.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::content_hash;
use crate::sys::random_hex;

/// How long a sign-in code stays good.
pub const CODE_TTL: Duration = Duration::from_secs(120);

fn expired(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map(|t| SystemTime::now().duration_since(t).unwrap_or_default() > CODE_TTL)
        .unwrap_or(true)
}

/// Mint a sign-in code for the root's review page: its hash is stored, the code returned.
/// Expired codes are swept on the way.
pub fn mint_code(dir: &Path) -> std::io::Result<String> {
    crate::sys::access::create_dir(dir)?;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if expired(&entry.path()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let code = random_hex();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, crate::sys::access::FILE_MODE);
    options.open(dir.join(content_hash(&code)))?;
    Ok(code)
}

/// Consume a sign-in code: true once, within [`CODE_TTL`] of its minting.
pub fn consume_code(dir: &Path, code: &str) -> bool {
    if code.len() != 64 || !code.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    let path = dir.join(content_hash(code.to_ascii_lowercase()));
    let fresh = !expired(&path);
    // Removing is the claim: of two sign-ins racing for a code only one removes the file.
    std::fs::remove_file(&path).is_ok() && fresh
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Root;

    #[test]
    fn a_code_signs_in_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let code = mint_code(&root.codes_dir()).unwrap();
        assert!(!consume_code(&root.codes_dir(), &random_hex()), "an unknown code");
        assert!(!consume_code(&root.codes_dir(), "../../state"), "not a code");
        assert!(consume_code(&root.codes_dir(), &code));
        assert!(!consume_code(&root.codes_dir(), &code), "used already");
        let stored: Vec<_> = std::fs::read_dir(root.codes_dir()).unwrap().collect();
        assert!(stored.is_empty(), "the code's file is gone");
    }

    #[test]
    fn an_old_code_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let code = mint_code(&root.codes_dir()).unwrap();
        let file = std::fs::File::options().write(true).open(root.codes_dir().join(content_hash(&code))).unwrap();
        file.set_modified(SystemTime::now() - CODE_TTL - Duration::from_secs(1)).unwrap();
        assert!(!consume_code(&root.codes_dir(), &code));
    }
}
