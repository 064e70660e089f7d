//! Exclusive file locks held as guards that say who holds them.
//!
//! A lock is an OS file lock (`flock` through std) on a file under `.memfold/`; the holder
//! writes its pid, host and start time into the file so that a second process can say who
//! is in the way. The lock is released when the guard drops or the process dies.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    #[error("{what} already running (lock {path} held by {holder})")]
    Held { what: String, path: PathBuf, holder: String },
    #[error("lock {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// A held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct LockGuard {
    file: File,
}

impl LockGuard {
    /// Take the lock or fail, naming the holder. `what` names the activity, e.g. "consolidation".
    ///
    /// A holder that has not stamped the file is a reader asking [`holder`] (it takes the lock
    /// for an instant, there being no way to ask `flock` without taking it), or a holder in
    /// the instant before it stamps: for those the lock is tried again for up to 0.2 s, so a
    /// hook asking whether a daemon runs never makes that daemon's start fail.
    pub fn try_acquire(path: &Path, what: &str) -> Result<LockGuard, LockError> {
        let mut file = open(path)?;
        let mut tries = 0;
        loop {
            match file.try_lock() {
                Ok(()) => return LockGuard::stamp(file, path),
                Err(TryLockError::WouldBlock) => {
                    let holder = read_holder(&mut file);
                    tries += 1;
                    if holder != UNNAMED || tries >= 20 {
                        return Err(LockError::Held { what: what.to_string(), path: path.to_path_buf(), holder });
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(TryLockError::Error(source)) => return Err(LockError::Io { path: path.to_path_buf(), source }),
            }
        }
    }

    /// Wait for the lock (blocking; call from a blocking context).
    pub fn acquire(path: &Path) -> Result<LockGuard, LockError> {
        let file = open(path)?;
        file.lock().map_err(|source| LockError::Io { path: path.to_path_buf(), source })?;
        LockGuard::stamp(file, path)
    }

    fn stamp(mut file: File, path: &Path) -> Result<LockGuard, LockError> {
        let io = |source| LockError::Io { path: path.to_path_buf(), source };
        let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
        let holder = format!(
            "pid {} on {} since {}",
            std::process::id(),
            if host.is_empty() { "this host" } else { &host },
            super::clock::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(holder.as_bytes()).map_err(io)?;
        Ok(LockGuard { file })
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

/// Who holds the lock at `path`, or None when it is free.
pub fn holder(path: &Path) -> Option<String> {
    let mut file = OpenOptions::new().read(true).write(true).open(path).ok()?;
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            None
        }
        Err(_) => Some(read_holder(&mut file)),
    }
}

fn open(path: &Path) -> Result<File, LockError> {
    let io = |source| LockError::Io { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        crate::sys::access::create_dir(dir).map_err(io)?;
    }
    crate::sys::access::check_link(path).map_err(io)?;
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, crate::sys::access::FILE_MODE);
    options.open(path).map_err(io)
}

fn read_holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.seek(SeekFrom::Start(0)).and_then(|_| file.read_to_string(&mut text));
    if text.trim().is_empty() { UNNAMED.into() } else { text.trim().to_string() }
}

/// What a lock held by a process that did not say who it is is said to be held by.
const UNNAMED: &str = "another process";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_with_the_first_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("consolidate.lock");
        let guard = LockGuard::try_acquire(&path, "consolidation").unwrap();
        let err = LockGuard::try_acquire(&path, "consolidation").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("consolidation already running (lock "), "{msg}");
        assert!(msg.contains(&format!("pid {}", std::process::id())), "{msg}");
        assert!(holder(&path).is_some());
        drop(guard);
        assert!(holder(&path).is_none());
        LockGuard::try_acquire(&path, "consolidation").unwrap();
    }

    #[test]
    fn a_reader_asking_who_holds_the_lock_does_not_make_the_taker_fail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.lock");
        drop(LockGuard::try_acquire(&path, "memfold serve").unwrap());
        // A reader holds it, unstamped, for longer than a probe ever does.
        let probe = OpenOptions::new().read(true).write(true).open(&path).unwrap();
        probe.try_lock().unwrap();
        let released = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            probe.unlock().unwrap();
        });
        let guard = LockGuard::try_acquire(&path, "memfold serve").expect("taken once the reader let go");
        released.join().unwrap();
        drop(guard);
        // A reader that never lets go is reported, after a bounded wait.
        let stuck = OpenOptions::new().read(true).write(true).open(&path).unwrap();
        stuck.try_lock().unwrap();
        let err = LockGuard::try_acquire(&path, "memfold serve").unwrap_err().to_string();
        assert!(err.contains("held by another process"), "{err}");
    }
}
