//! What the benches that run the `memfold` binary share: the command, the commit, and a
//! running `memfold serve`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
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

/// `memfold add --stdin` of `texts` into `root`, one per line, as a whole process.
pub fn add_stdin(root: &Path, texts: &[String]) {
    let mut add = memfold(root)
        .args(["add", "--stdin"])
        .env("MEMFOLD_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = add.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, texts.join("\n").as_bytes()).unwrap();
    drop(stdin);
    assert!(add.wait().unwrap().success(), "memfold add --stdin failed");
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

/// Start `memfold serve` on `root` at a free loopback port, logging warnings only, with `env`
/// added; its process and base URL once `/healthz` answers, which must be within `limit`.
pub async fn serve(root: &Path, env: &[(&str, &str)], client: &reqwest::Client, limit: Duration) -> (Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut command = memfold(root);
    command.args(["serve", "--bind", &format!("127.0.0.1:{port}")]).env("MEMFOLD_LOG", "warn").stdout(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let child = command.spawn().expect("memfold serve starts");
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(started.elapsed() < limit, "memfold serve did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (child, base)
}

/// Wait until the daemon at `base` has settled its index once (it does at start), within
/// `limit`; how long that took.
pub async fn settled(client: &reqwest::Client, base: &str, token: Option<&str>, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let mut request = client.get(format!("{base}/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let metrics = request.send().await.unwrap().text().await.unwrap();
        let done = metrics
            .lines()
            .any(|l| l.strip_prefix(r#"memfold_index_settles_total{result="ok"} "#).is_some_and(|n| n.trim() != "0"));
        if done {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "memfold serve did not settle its index");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A numeric knob from the environment, or `default`.
pub fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// Milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `q` quantile of `times` (sorted here).
pub fn quantile(times: &mut [Duration], q: f64) -> Duration {
    times.sort();
    times[((times.len() - 1) as f64 * q).round() as usize]
}

/// The resident memory of process `pid` in MiB: all of it, and its anonymous part (heap and
/// stacks: what the process allocated, without the pages of its own executable it has run).
pub fn rss(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("RssAnon:"))
}
