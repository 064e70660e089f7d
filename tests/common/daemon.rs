//! A `memfold serve` for a test: the real binary on a free loopback port over a fresh memory
//! root, and the client calls the tests make of it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a daemon may take to answer `/healthz` after it was started.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a daemon may take to exit after SIGTERM (the bound).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// The port of the daemon `child` serving `root`, once it listens: it binds port 0 and records
/// the port the system gave it (`.memfold/serve.json`). Panics, with its logs, if it exits first
/// or takes longer than [`START_TIMEOUT`].
pub async fn listening_port(root: &Path, child: &mut Child, logs: impl Fn() -> String) -> u16 {
    let root = memfold::store::Root::new(root);
    let started = Instant::now();
    loop {
        if let Some(listening) = memfold::store::listening::Listening::read(&root)
            && listening.pid == child.id()
        {
            return listening.addr.port();
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("memfold serve exited with {status} before listening:\n{}", logs());
        }
        assert!(started.elapsed() < START_TIMEOUT, "memfold serve did not listen in time:\n{}", logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn memfold(root: &Path) -> Command {
    let mut command = crate::common::bin();
    command.arg("--root").arg(root);
    for var in ["MEMFOLD_ROOT", "MEMFOLD_CONFIG", "MEMFOLD_HOME", "MEMFOLD_SPACE"] {
        command.env_remove(var);
    }
    command
}

pub fn run(root: &Path, args: &[&str]) -> Output {
    memfold(root).args(args).env("MEMFOLD_LOG", "warn").output().expect("memfold runs")
}

pub fn verify(root: &Path) -> Value {
    let out = run(root, &["verify", "--json"]);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

/// A memory root in a temp dir, with a place for daemon logs next to it.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let fixture = Fixture { dir };
        assert!(run(&fixture.root(), &["init"]).status.success());
        fixture
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// The token a daemon started with `env` requires: the variable `server.token_env` names,
    /// none with `server.auth = false`, else the root's token file.
    fn token(&self, env: &[(&str, &str)]) -> Option<String> {
        let get = |key: &str| env.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_string());
        if let Some(var) = get("MEMFOLD_SERVER__TOKEN_ENV") {
            return get(&var);
        }
        if get("MEMFOLD_SERVER__AUTH").as_deref() == Some("false") {
            return None;
        }
        let text = std::fs::read_to_string(self.root().join(".memfold/token")).expect("the daemon made its token");
        Some(text.trim().to_string())
    }

    /// Start `memfold serve` with these extra environment variables and wait until it answers.
    pub async fn serve(&self, env: &[(&str, &str)]) -> Daemon {
        let mut command = memfold(&self.root());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut daemon = start(command, &self.root(), self.dir.path()).await;
        daemon.token = self.token(env);
        daemon
    }
}

/// Run `command` (a `memfold` with its global flags and environment) as `serve --bind
/// 127.0.0.1:0`, logging into a new file in `logs`, and wait until it answers `/healthz`; `dir`
/// is the root or home it serves. The daemon has no token yet.
pub async fn start(mut command: Command, dir: &Path, logs: &Path) -> Daemon {
    static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = logs.join(format!("serve-{n}.log"));
    command
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("MEMFOLD_LOG", "info")
        .stdout(Stdio::null())
        .stderr(File::create(&log).unwrap());
    let mut child = command.spawn().expect("memfold serve starts");
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let port = listening_port(dir, &mut child, read_log).await;
    let mut daemon = Daemon {
        child,
        port,
        base: format!("http://127.0.0.1:{port}"),
        log,
        client: reqwest::Client::new(),
        token: None,
    };
    let started = Instant::now();
    loop {
        if let Ok(r) = daemon.client.get(daemon.url("/healthz")).send().await
            && r.status() == 200
        {
            return daemon;
        }
        if let Some(status) = daemon.child.try_wait().unwrap() {
            panic!("memfold serve exited with {status} before answering:\n{}", daemon.logs());
        }
        assert!(started.elapsed() < START_TIMEOUT, "memfold serve did not answer in time:\n{}", daemon.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running `memfold serve`; killed on drop if still running.
pub struct Daemon {
    pub child: Child,
    pub port: u16,
    pub base: String,
    pub log: PathBuf,
    /// A client without credentials; [`Daemon::send`] adds the token.
    pub client: reqwest::Client,
    /// The bearer token the daemon requires.
    pub token: Option<String>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The token as `memfold token` prints it ("" when the daemon needs none).
    pub fn token(&self) -> &str {
        self.token.as_deref().unwrap_or_default()
    }

    /// The Authorization header a client of this daemon sends.
    pub fn bearer(&self) -> (&'static str, String) {
        ("Authorization", format!("Bearer {}", self.token()))
    }

    /// Send a request with the daemon's token unless it carries an Authorization header already.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        let mut request = request.build().unwrap();
        if let Some(token) = &self.token
            && !request.headers().contains_key(reqwest::header::AUTHORIZATION)
        {
            let value = format!("Bearer {token}").parse().unwrap();
            request.headers_mut().insert(reqwest::header::AUTHORIZATION, value);
        }
        self.execute(request).await
    }

    /// Send a request as it is: no token unless it has one.
    pub async fn send_anonymous(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        self.execute(request.build().unwrap()).await
    }

    async fn execute(&self, request: reqwest::Request) -> (u16, Value) {
        let response =
            self.client.execute(request).await.unwrap_or_else(|e| panic!("request failed: {e}\n{}", self.logs()));
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        (status, body)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.client.get(self.url(path))).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(self.client.post(self.url(path)).json(&body)).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.send(self.client.delete(self.url(path))).await
    }

    /// Send `METHOD /path` with these headers (no Host unless given; the daemon's token unless
    /// they carry an Authorization header) and `body` over a plain TCP connection, as a browser
    /// or curl would, and read the JSON answer.
    pub async fn raw(&self, request_line: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
        let bearer = self.bearer();
        let mut all = headers.to_vec();
        if self.token.is_some() && !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("authorization")) {
            all.push((bearer.0, &bearer.1));
        }
        self.raw_anonymous(request_line, &all, body).await
    }

    /// [`Daemon::raw`] with exactly these headers: no token unless they carry one.
    pub async fn raw_anonymous(&self, request_line: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut head = format!("{request_line} HTTP/1.1\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\nconnection: close\r\n\r\n", body.len()));
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        stream.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        let (status_line, rest) = answer.split_once("\r\n").unwrap_or_else(|| panic!("no status line: {answer}"));
        let status = status_line.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{answer}"));
        let (_, text) = rest.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no body: {answer}"));
        let body = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"));
        (status, body)
    }

    /// The Host header a client sends for this daemon.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub async fn metrics(&self) -> String {
        let response = self.client.get(self.url("/metrics")).bearer_auth(self.token()).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
        response.text().await.unwrap()
    }

    /// Add facts and return their ids.
    pub async fn add(&self, texts: &[&str]) -> Vec<String> {
        let facts: Vec<Value> = texts.iter().map(|t| json!({"text": t})).collect();
        let (status, body) = self.post("/facts", json!({ "facts": facts })).await;
        assert_eq!(status, 200, "{body}");
        body["facts"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap().to_string()).collect()
    }

    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Send SIGTERM and wait for the exit, at most [`STOP_TIMEOUT`].
    pub async fn terminate(&mut self) -> (ExitStatus, Duration) {
        let started = Instant::now();
        assert!(Command::new("kill").args(["-TERM", &self.pid()]).status().unwrap().success());
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, started.elapsed());
            }
            assert!(started.elapsed() < STOP_TIMEOUT, "still running {STOP_TIMEOUT:?} after SIGTERM:\n{}", self.logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, and the exit must be clean.
    pub async fn stop(mut self) {
        let (status, _) = self.terminate().await;
        assert!(status.success(), "exit {status} after SIGTERM:\n{}", self.logs());
    }
}

/// Poll `check` until it returns Some, for at most `limit`.
pub async fn eventually<T>(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn with<'a>(base: &'a [(&'static str, String)], more: &[(&'static str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    base.iter().map(|(k, v)| (*k, v.as_str())).chain(more.iter().copied()).collect()
}

pub fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(temp_files(&path));
        } else if path.file_name().unwrap().to_string_lossy().starts_with(".memfold-") {
            found.push(path);
        }
    }
    found
}

pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap()
}
