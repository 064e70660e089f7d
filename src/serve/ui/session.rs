//! Who may use the review page: one-time sign-in codes and browser sessions.
//!
//! **Codes.** `memfold ui` mints a random code and stores only its sha256, as a file of its own
//! under `.memfold/ui-codes/` (private to the owner, like every file of the root). Whoever can
//! write that folder can already edit `memory.md`, so a code grants nothing new, and the CLI
//! needs no token and makes no HTTP call. A code is good for [`CODE_TTL`] and for one sign-in:
//! consuming it removes its file, and only one remover can succeed.
//!
//! **Sessions** live in the daemon's memory, stored by the sha256 of their id (a restart signs
//! everyone out): at most [`MAX_SESSIONS`], each dropped after [`SESSION_IDLE`] without a
//! request. Each has its own CSRF token, which every form carries and every POST must return.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::files::{Root, content_hash};

/// How long a sign-in code stays good.
pub const CODE_TTL: Duration = Duration::from_secs(120);
/// Sessions kept at once; the least recently used goes first.
pub const MAX_SESSIONS: usize = 32;
/// A session unused this long is dropped.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);

/// 32 random bytes as lowercase hex.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    crate::files::hex(&bytes)
}

fn codes_dir(root: &Root) -> PathBuf {
    root.state_dir().join("ui-codes")
}

fn expired(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map(|t| SystemTime::now().duration_since(t).unwrap_or_default() > CODE_TTL)
        .unwrap_or(true)
}

/// Mint a sign-in code for the root's review page: its hash is stored, the code returned.
/// Expired codes are swept on the way.
pub fn mint_code(root: &Root) -> std::io::Result<String> {
    let dir = codes_dir(root);
    crate::files::access::create_dir(&dir)?;
    if let Ok(entries) = std::fs::read_dir(&dir) {
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
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, crate::files::access::FILE_MODE);
    options.open(dir.join(content_hash(&code)))?;
    Ok(code)
}

/// Consume a sign-in code: true once, within [`CODE_TTL`] of its minting.
pub fn consume_code(root: &Root, code: &str) -> bool {
    if code.len() != 64 || !code.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    let path = codes_dir(root).join(content_hash(code.to_ascii_lowercase()));
    let fresh = !expired(&path);
    // Removing is the claim: of two sign-ins racing for a code only one removes the file.
    std::fs::remove_file(&path).is_ok() && fresh
}

struct Session {
    csrf: String,
    used: Instant,
}

/// The signed-in browsers, by the sha256 of their session id.
#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// A new session: its id (for the cookie) and its CSRF token.
    pub fn create(&self) -> (String, String) {
        let (id, csrf) = (random_hex(), random_hex());
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| s.used.elapsed() < SESSION_IDLE);
        while map.len() >= MAX_SESSIONS {
            let oldest = map.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| k.clone());
            match oldest {
                Some(key) => map.remove(&key),
                None => break,
            };
        }
        map.insert(content_hash(&id), Session { csrf: csrf.clone(), used: Instant::now() });
        (id, csrf)
    }

    /// The CSRF token of the session `id`, if it is signed in; marks it used.
    pub fn csrf(&self, id: &str) -> Option<String> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let key = content_hash(id);
        match map.get_mut(&key) {
            Some(s) if s.used.elapsed() < SESSION_IDLE => {
                s.used = Instant::now();
                Some(s.csrf.clone())
            }
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_signs_in_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let code = mint_code(&root).unwrap();
        assert!(!consume_code(&root, &random_hex()), "an unknown code");
        assert!(!consume_code(&root, "../../state"), "not a code");
        assert!(consume_code(&root, &code));
        assert!(!consume_code(&root, &code), "used already");
        let stored: Vec<_> = std::fs::read_dir(codes_dir(&root)).unwrap().collect();
        assert!(stored.is_empty(), "the code's file is gone");
    }

    #[test]
    fn an_old_code_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        let code = mint_code(&root).unwrap();
        let file = std::fs::File::options().write(true).open(codes_dir(&root).join(content_hash(&code))).unwrap();
        file.set_modified(SystemTime::now() - CODE_TTL - Duration::from_secs(1)).unwrap();
        assert!(!consume_code(&root, &code));
    }

    #[test]
    fn sessions_are_found_by_id_and_bounded() {
        let sessions = Sessions::default();
        let (id, csrf) = sessions.create();
        assert_eq!(sessions.csrf(&id), Some(csrf));
        assert_eq!(sessions.csrf(&random_hex()), None);
        for _ in 0..MAX_SESSIONS {
            sessions.create();
        }
        assert_eq!(sessions.csrf(&id), None, "the least recently used went first");
    }
}
