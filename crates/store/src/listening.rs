//! `.memfold/serve.json`: where the running daemon listens, so that a client on the same
//! machine (an agent's hook, a test) finds it without knowing the configuration, and a daemon
//! started with `--bind 127.0.0.1:0` can be reached on the port the system chose.
//!
//! The daemon writes it once it listens and removes it when it stops. A daemon killed outright
//! leaves it behind, so a reader trusts it only while the serve lock (`.memfold/serve.lock`,
//! which the daemon holds as long as it runs) is held.

use std::net::SocketAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Root;
use super::atomic::{WriteError, write_atomic};

/// Where a daemon listens, and its process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listening {
    pub addr: SocketAddr,
    pub pid: u32,
}

impl Listening {
    /// Record that this process listens on `addr`.
    pub fn write(root: &Root, addr: SocketAddr) -> Result<(), WriteError> {
        Listening::write_to(&root.listening_file(), addr)
    }

    /// Record in `file` (a root's or a home's `serve.json`) that this process listens on `addr`.
    pub fn write_to(file: &Path, addr: SocketAddr) -> Result<(), WriteError> {
        let listening = Listening { addr, pid: std::process::id() };
        let bytes = serde_json::to_vec(&listening).expect("an address serialises");
        write_atomic(file, &bytes, None)
    }

    /// The daemon recorded in `root`, while one holds the serve lock.
    pub fn read(root: &Root) -> Option<Listening> {
        Listening::read_from(&root.listening_file(), &root.serve_lock())
    }

    /// The daemon recorded in `file`, while one holds `serve_lock`.
    pub fn read_from(file: &Path, serve_lock: &Path) -> Option<Listening> {
        crate::sys::lock::holder(serve_lock)?;
        let bytes = std::fs::read(file).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Forget the record, if it is this process's.
    pub fn remove(root: &Root) {
        Listening::remove_from(&root.listening_file());
    }

    /// Forget the record in `file`, if it is this process's.
    pub fn remove_from(path: &Path) {
        let ours = std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Listening>(&bytes).ok())
            .is_some_and(|l| l.pid == std::process::id());
        if ours {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_counts_while_the_serve_lock_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        root.init().unwrap();
        assert_eq!(Listening::read(&root), None);
        let addr: SocketAddr = "127.0.0.1:4242".parse().unwrap();
        Listening::write(&root, addr).unwrap();
        assert_eq!(Listening::read(&root), None, "no daemon holds the serve lock: a record left by a killed one");
        let lock = crate::sys::lock::LockGuard::try_acquire(&root.serve_lock(), "memfold serve").unwrap();
        assert_eq!(Listening::read(&root), Some(Listening { addr, pid: std::process::id() }));
        let other = Listening { addr, pid: std::process::id() + 1 };
        std::fs::write(root.listening_file(), serde_json::to_vec(&other).unwrap()).unwrap();
        Listening::remove(&root);
        assert!(root.listening_file().exists(), "another process's record is left alone");
        drop(lock);
    }
}
