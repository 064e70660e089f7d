//! What the benches that run the `memfold` binary share: the command and the commit.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// `memfold --root ROOT` with the local embedder, and without the bench's own knobs
/// (`MEMFOLD_BENCH_*`), which memfold would read as configuration keys.
pub fn memfold(root: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_memfold"));
    command.env("MEMFOLD_EMBEDDING__PROVIDER", "local");
    command.arg("--root").arg(root).env_remove("MEMFOLD_ROOT").env_remove("MEMFOLD_CONFIG");
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("MEMFOLD_BENCH_")) {
        command.env_remove(name);
    }
    command
}

/// The commit the bench ran on: the short hash of HEAD, and whether tracked files had uncommitted changes.
pub fn commit() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let hash = Command::new("git").args(["rev-parse", "--short", "HEAD"]).current_dir(dir).output();
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .current_dir(dir)
        .output()
        .is_ok_and(|o| !o.stdout.is_empty());
    let hash = hash.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    if dirty { format!("{hash} (with uncommitted changes)") } else { hash }
}

/// Stop a spawned `memfold serve` as its service manager would: SIGTERM, then SIGKILL if it
/// has not exited within `patience`.
pub fn stop(child: &mut Child, patience: Duration) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + patience;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}
