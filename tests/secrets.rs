//! Secrets: the detector's quality on a corpus written for it (`fixtures/secrets/`), half of
//! which the rules were never tuned on; and every door, where a posted credential must leave
//! no byte in any file under the root, and no byte in any request to the LLM.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::daemon::{Fixture, run, verify};
use crate::common::llm_env;
use memfold::store::secrets;

/// A small deterministic generator of made-up credentials.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick(&mut self, alphabet: &str, n: usize) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        (0..n).map(|_| chars[self.next() as usize % chars.len()]).collect()
    }
}

const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_NUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
const HEX: &str = "0123456789abcdef";

fn base62(mut n: u32) -> String {
    let digits: Vec<char> = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".chars().collect();
    let mut out = vec!['0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = digits[(n % 62) as usize];
        n /= 62;
    }
    out.into_iter().collect()
}

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A made-up credential of kind `name`, and the part of it that is the secret.
fn credential(name: &str, g: &mut Gen) -> (String, String) {
    let crc = |prefix: &str, g: &mut Gen| {
        let random = g.pick(ALNUM, 30);
        format!("{prefix}{random}{}", base62(crc32fast::hash(random.as_bytes())))
    };
    let whole = |s: String| (s.clone(), s);
    match name {
        "github" => whole(crc(["ghp_", "gho_", "ghs_", "ghu_"][g.next() as usize % 4], g)),
        "npm" => whole(crc("npm_", g)),
        "fine" => whole(format!("github_pat_{}_{}", g.pick(ALNUM, 22), g.pick(ALNUM, 59))),
        "aws_id" => whole(format!("AKIA{}", g.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16))),
        "aws_secret" => whole(g.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+", 40)),
        "gitlab" => whole(format!("glpat-{}", g.pick(URLSAFE, 20))),
        "slack" => {
            whole(format!("xoxb-{}-{}-{}", g.pick("0123456789", 12), g.pick("0123456789", 13), g.pick(ALNUM, 24)))
        }
        "slack_user" => whole(format!(
            "xoxp-{}-{}-{}-{}",
            g.pick("0123456789", 12),
            g.pick("0123456789", 12),
            g.pick("0123456789", 13),
            g.pick(HEX, 32)
        )),
        "slack_hook" => whole(format!(
            "https://hooks.slack.com/services/T{}/B{}/{}",
            g.pick(UPPER_NUM, 9),
            g.pick(UPPER_NUM, 10),
            g.pick(ALNUM, 24)
        )),
        "stripe" => {
            let n = 24 + g.next() as usize % 70;
            whole(format!("sk_live_{}", g.pick(ALNUM, n)))
        }
        "stripe_test" => whole(format!("sk_test_{}", g.pick(ALNUM, 24))),
        "stripe_restricted" => whole(format!("rk_live_{}", g.pick(ALNUM, 24))),
        "openai" => whole(format!("sk-{}T3BlbkFJ{}", g.pick(ALNUM, 20), g.pick(ALNUM, 20))),
        "openai_proj" => whole(format!("sk-proj-{}T3BlbkFJ{}", g.pick(URLSAFE, 74), g.pick(URLSAFE, 74))),
        "anthropic" => whole(format!("sk-ant-api03-{}AA", g.pick(URLSAFE, 93))),
        "google" => whole(format!("AIza{}", g.pick(URLSAFE, 35))),
        "gocspx" => whole(format!("GOCSPX-{}", g.pick(URLSAFE, 28))),
        "hf" => whole(format!("hf_{}", g.pick(ALNUM, 34))),
        "sendgrid" => whole(format!("SG.{}.{}", g.pick(URLSAFE, 22), g.pick(URLSAFE, 43))),
        "jwt" => {
            let header = b64url(br#"{"alg":"HS256","typ":"JWT"}"#);
            let payload = b64url(
                format!(r#"{{"sub":"user-{}","iat":{}}}"#, g.next() % 10_000, 1_700_000_000 + g.next() % 1_000_000)
                    .as_bytes(),
            );
            whole(format!("{header}.{payload}.{}", g.pick(URLSAFE, 43)))
        }
        "pem" => whole(format!(
            "-----BEGIN OPENSSH PRIVATE KEY----- {} {} -----END OPENSSH PRIVATE KEY-----",
            g.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 70),
            g.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 70)
        )),
        "url_pw" | "url_redis" | "url_amqp" | "url_mongo" => {
            let scheme = match name {
                "url_redis" => "redis",
                "url_amqp" => "amqp",
                "url_mongo" => "mongodb",
                _ => "postgres",
            };
            let n = 10 + g.next() as usize % 8;
            let password = g.pick(ALNUM, n);
            (format!("{scheme}://app_user:{password}@db{}.internal:5432/app", g.next() % 9), password)
        }
        "azure" => whole(format!(
            "{}{}==",
            g.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 85),
            ["A", "Q", "g", "w"][g.next() as usize % 4]
        )),
        "generic" => whole(format!("{}{}", g.pick(ALNUM, 20), g.pick("0123456789", 4))),
        "generic_bearer" => {
            let token = format!("{}{}", g.pick(ALNUM, 28), g.pick("0123456789", 3));
            (format!("Bearer {token}"), token)
        }
        "sha1" => whole(g.pick(HEX, 40)),
        "sha256" => whole(g.pick(HEX, 64)),
        "short_sha" => whole(g.pick(HEX, 7)),
        "uuid" => whole(format!(
            "{}-{}-4{}-a{}-{}",
            g.pick(HEX, 8),
            g.pick(HEX, 4),
            g.pick(HEX, 3),
            g.pick(HEX, 3),
            g.pick(HEX, 12)
        )),
        other => panic!("no generator for {{{other}}}"),
    }
}

/// `template` with each `{name}` filled; the secrets it holds.
fn fill(template: &str, g: &mut Gen) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut secrets = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').map(|c| open + c).expect("a closed placeholder");
        let name = &rest[open + 1..close];
        // Only `{name}` is a placeholder; other braces (`${{ secrets.X }}`) are text.
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            text.push_str(&rest[..=open]);
            rest = &rest[open + 1..];
            continue;
        }
        text.push_str(&rest[..open]);
        let (value, secret) = credential(name, g);
        text.push_str(&value);
        secrets.push(secret);
        rest = &rest[close + 1..];
    }
    text.push_str(rest);
    (text, secrets)
}

/// The corpus lines of a fixture, with the half each is in (tuned: odd lines).
fn lines(name: &str) -> Vec<(bool, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/secrets").join(name);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| (i % 2 == 0, l.to_string()))
        .collect()
}

#[derive(Default, Debug)]
struct Score {
    caught: usize,
    total: usize,
    missed: Vec<String>,
}

impl Score {
    fn rate(&self) -> f64 {
        self.caught as f64 / self.total.max(1) as f64
    }
}

/// Scores of one half of the corpus.
#[derive(Default, Debug)]
struct Scores {
    /// Credentials in known formats, filled into templates.
    typed: Score,
    /// Passwords, passphrases and PINs said in prose.
    prose: Score,
    /// Credentials in config shapes: environment files, settings, connection strings.
    config: Score,
    /// Look-alikes changed (lower is better).
    changed: Score,
}

/// Score the lines of a `text<TAB>secret` fixture of one half.
fn score_pairs(name: &str, tuned: bool, score: &mut Score) {
    for (half, line) in lines(name) {
        if half != tuned {
            continue;
        }
        let (text, secret) = line.split_once('\t').expect("text, a tab, the secret");
        let (redacted, _) = secrets::redact(text);
        score.total += 1;
        if !redacted.contains(secret) {
            score.caught += 1;
        } else {
            score.missed.push(format!("{text} → {redacted}"));
        }
    }
}

fn score(tuned: bool) -> Scores {
    let mut g = Gen(if tuned { 7 } else { 11 });
    let mut scores = Scores::default();
    for (half, template) in lines("typed.txt") {
        if half != tuned {
            continue;
        }
        for _ in 0..3 {
            let (text, secrets) = fill(&template, &mut g);
            let (redacted, _) = secrets::redact(&text);
            scores.typed.total += 1;
            if secrets.iter().all(|s| !redacted.contains(s.as_str())) {
                scores.typed.caught += 1;
            } else {
                scores.typed.missed.push(format!("{text} → {redacted}"));
            }
        }
    }
    score_pairs("prose.txt", tuned, &mut scores.prose);
    score_pairs("env.txt", tuned, &mut scores.config);
    for (half, template) in lines("lookalikes.txt") {
        if half != tuned {
            continue;
        }
        let (text, _) = fill(&template, &mut g);
        scores.changed.total += 1;
        if !secrets::find(&text).is_empty() {
            scores.changed.caught += 1;
            scores.changed.missed.push(format!("{text} → {}", secrets::redact(&text).0));
        }
    }
    scores
}

#[test]
fn the_detector_catches_credentials_and_leaves_look_alikes_on_the_half_it_was_not_tuned_on() {
    for tuned in [true, false] {
        let s = score(tuned);
        let rate = |s: &Score| format!("{}/{} ({:.3})", s.caught, s.total, s.rate());
        println!(
            "{} half: typed credentials caught {}, prose passwords {}, config lines {}, look-alikes changed {}",
            if tuned { "tuned" } else { "untouched" },
            rate(&s.typed),
            rate(&s.prose),
            rate(&s.config),
            rate(&s.changed)
        );
        for missed in s.typed.missed.iter().chain(&s.prose.missed).chain(&s.config.missed) {
            println!("  missed: {missed}");
        }
        for wrong in &s.changed.missed {
            println!("  changed: {wrong}");
        }
        if !tuned {
            assert!(s.typed.total >= 100 && s.prose.total >= 40 && s.config.total >= 35 && s.changed.total >= 75);
            assert!(s.typed.rate() >= 0.98, "typed {:.3}", s.typed.rate());
            assert!(s.prose.rate() >= 0.90, "prose {:.3}", s.prose.rate());
            assert!(s.config.rate() >= 0.95, "config {:.3}", s.config.rate());
            assert!(s.changed.rate() <= 0.015, "look-alikes {:.3}", s.changed.rate());
        }
    }
}

/// Every file under `dir` (the index included), as bytes, with its path.
fn every_file(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(every_file(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
    out
}

/// Where any of `secrets` appears under `dir`.
fn leaks(dir: &Path, secrets: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, bytes) in every_file(dir) {
        for secret in secrets {
            if bytes.windows(secret.len()).any(|w| w == secret.as_bytes()) {
                found.push(format!("{path} holds {secret}"));
            }
        }
    }
    found
}

/// Made-up credentials for the door tests, one per line of `typed.txt`'s kinds.
fn some_secrets() -> Vec<(String, String)> {
    let mut g = Gen(99);
    ["github", "aws_id", "openai_proj", "slack", "url_pw", "jwt"]
        .iter()
        .map(|kind| credential(kind, &mut g))
        .chain([("the wifi password is Kestrel#2026".to_string(), "Kestrel#2026".to_string())])
        .collect()
}

#[tokio::test]
async fn a_credential_sent_through_any_door_leaves_no_byte_in_any_file() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let secrets = some_secrets();
    let values: Vec<String> = secrets.iter().map(|(_, s)| s.clone()).collect();
    // The command line.
    let out = run(&root, &["add", &format!("CI pushes with {}", secrets[0].0)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let daemon = fixture.serve(&[]).await;
    // HTTP.
    let (code, body) = daemon
        .post(
            "/facts",
            json!({"facts": [{"text": format!("the backup key id is {}", secrets[1].0), "source": secrets[6].0}]}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert!(body.to_string().contains("[secret: aws access key]"), "the answer shows what was stored: {body}");
    // MCP.
    let (client, _) = crate::common::mcp::http(&daemon.url("/mcp"), daemon.token()).await;
    crate::common::mcp::ok(
        &client,
        "memory_add",
        json!({"facts": [format!("OPENAI_API_KEY={}", secrets[2].0), format!("slack bot {}", secrets[3].0)]}),
    )
    .await;
    // A hook's capture.
    let transcript = fixture.dir.path().join("t.jsonl");
    let said = format!("Remember that the db url is {} and the wifi password is Kestrel#2026", secrets[4].0);
    std::fs::write(&transcript, format!("{}\n", json!({"type": "user", "message": {"role": "user", "content": said}})))
        .unwrap();
    let mut hook = crate::common::bin()
        .arg("--root")
        .arg(&root)
        .args(["hook", "stop"])
        .env_remove("MEMFOLD_LLM__BASE_URL")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    hook.stdin
        .take()
        .unwrap()
        .write_all(
            json!({"session_id": "s", "transcript_path": transcript, "cwd": fixture.dir.path()}).to_string().as_bytes(),
        )
        .unwrap();
    assert!(hook.wait().unwrap().success());
    // The offline pass and promotion, over all of it.
    let (code, body) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{body}");
    let (_, found) = daemon.get("/search?q=backup+key+id").await;
    assert!(found.to_string().contains("[secret: aws access key]"), "{found}");
    daemon.stop().await;
    let report = verify(&root);
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["facts"], 5, "one from each door, two from MCP, one request in the transcript");
    // The transcript is the agent's file; under the root there is none of it.
    let leaked = leaks(&root, &values);
    assert!(leaked.is_empty(), "{leaked:?}");
}

#[tokio::test]
async fn the_llm_never_sees_a_secret_and_every_request_is_recorded_with_its_purpose() {
    let fake = memfold::testkit::FakeOpenAi::start_in_thread();
    fake.set_chat_handler(|request: &Value| {
        let system = request["messages"][0]["content"].as_str().unwrap_or_default();
        if system.contains("extract") || system.contains("Extract") {
            let user = request["messages"][1]["content"].as_str().unwrap_or_default();
            let facts: Vec<Value> =
                user.lines().filter_map(|l| l.strip_prefix("user: ")).map(|l| json!({"text": l})).collect();
            return memfold::testkit::FakeReply::Content(json!({ "facts": facts }).to_string());
        }
        crate::common::add_everything(request)
    });
    let env = llm_env(&fake);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let fixture = Fixture::new();
    let root = fixture.root();
    let secrets = some_secrets();
    // A credential typed into memory.md by hand, and one let in with `allow`.
    std::fs::write(
        root.join("consolidated/memory.md"),
        format!("<!-- m-handtyped -->\nThe deploy token is {}\n", secrets[0].0),
    )
    .unwrap();
    let mut allow = env.clone();
    allow.push(("MEMFOLD_INGEST__SECRETS", "allow"));
    let daemon = fixture.serve(&allow).await;
    let (code, body) = daemon
        .post("/facts", json!({"facts": [{"text": format!("the grafana datasource uses {}", secrets[4].0)}]}))
        .await;
    assert_eq!(code, 200, "{body}");
    let turn = format!("user: the stripe webhook secret for the shop is {}\nassistant: noted", secrets[2].0);
    let (code, body) = daemon.post("/turns", json!({"text": turn})).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{body}");
    daemon.stop().await;

    let requests: Vec<Value> = fake.chat_requests().into_iter().chain(fake.keying_requests()).collect();
    assert!(requests.len() >= 2, "extraction and a decision at least: {}", requests.len());
    for request in &requests {
        let text = request.to_string();
        for (_, secret) in &secrets {
            assert!(!text.contains(secret.as_str()), "an LLM request holds {secret}: {text}");
        }
    }
    assert!(requests.iter().any(|r| r.to_string().contains("[secret: ")), "what was masked says its kind");
    let out = run(&root, &["egress", "--json"]);
    let egress: Value = serde_json::from_slice(&out.stdout).unwrap();
    let purposes: Vec<&str> =
        egress["requests"].as_array().unwrap().iter().map(|r| r["purpose"].as_str().unwrap()).collect();
    assert_eq!(purposes.len(), requests.len(), "{egress}");
    assert!(purposes.contains(&"extract") && purposes.contains(&"consolidate"), "{purposes:?}");
    assert!(egress["requests"].as_array().unwrap().iter().any(|r| r["masked"].as_u64().unwrap() > 0), "{egress}");
    // `allow` stored the credential, and MEMORY.md never holds one.
    let memory_md = std::fs::read_to_string(root.join("MEMORY.md")).unwrap_or_default();
    for (_, secret) in &secrets {
        assert!(!memory_md.contains(secret.as_str()), "MEMORY.md holds {secret}");
    }
    // verify names the kind, file and line of each, never the value.
    let report = verify(&root);
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("consolidated/memory.md") && warnings.contains("github token"), "{warnings}");
    assert!(warnings.contains("password in a url"), "{warnings}");
    for (_, secret) in &secrets {
        assert!(!report.to_string().contains(secret.as_str()), "verify printed {secret}");
    }
}

#[tokio::test]
async fn refuse_stores_nothing_and_names_the_kind_and_position_without_the_value() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let daemon = fixture.serve(&[("MEMFOLD_INGEST__SECRETS", "refuse")]).await;
    let secrets = some_secrets();
    let (code, body) = daemon
        .post(
            "/facts",
            json!({"facts": [{"text": "a plain fact"}, {"text": format!("token {} for CI", secrets[0].0)}]}),
        )
        .await;
    assert_eq!(code, 400, "{body}");
    let message = body.to_string();
    assert!(
        message.contains("fact 2") && message.contains("github token") && message.contains("character 7"),
        "{message}"
    );
    assert!(!message.contains(secrets[0].1.as_str()));
    let out = crate::common::memfold(
        &root,
        &["add", "the wifi password is Kestrel#2026"],
        &[("MEMFOLD_INGEST__SECRETS", "refuse")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("password"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("Kestrel#2026"));
    daemon.stop().await;
    assert_eq!(verify(&root)["facts"], 0, "nothing of a refused request is stored");
    assert!(leaks(&root, &["Kestrel#2026".to_string(), secrets[0].1.clone()]).is_empty());
}

#[tokio::test]
async fn with_no_endpoint_configured_nothing_leaves_and_the_record_stays_empty() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let daemon = fixture.serve(&[]).await;
    daemon.add(&["The checkout service runs on port 8443", "Ana owns billing"]).await;
    let (code, _) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200);
    let metrics = daemon.metrics().await;
    assert!(metrics.contains("memfold_egress_requests_total 0\n"), "{metrics}");
    daemon.stop().await;
    assert!(!root.join(".memfold/egress.jsonl").exists());
    let out = run(&root, &["egress"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("no request has left this machine"));
}

/// The ids of the current entries, first to last.
fn entry_ids(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap();
    memfold::store::entries::EntryFile::parse(&text, "memory.md").entries().map(|e| e.id().to_string()).collect()
}

fn ok(out: std::process::Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A run id from a curation verb's `--json` answer.
fn run_of(out: &str) -> String {
    serde_json::from_str::<Value>(out).unwrap()["run"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_credential_in_a_curation_text_a_note_or_a_reason_is_held_at_every_door() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let mut g = Gen(2026);
    let creds: Vec<(String, String)> = [
        "github",
        "openai_proj",
        "slack",
        "url_pw",
        "stripe",
        "jwt",
        "aws_id",
        "gitlab",
        "npm",
        "google",
        "hf",
        "sendgrid",
    ]
    .iter()
    .map(|k| credential(k, &mut g))
    .collect();
    let mut next = creds.iter();
    let mut cred = move || next.next().expect("enough made-up credentials").0.clone();
    let values: Vec<String> = creds.iter().map(|(_, s)| s.clone()).collect();
    let people = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kim", "Lea"];
    for (i, who) in people.iter().enumerate() {
        ok(run(&root, &["add", &format!("{who} owns service number {i}")]));
    }
    ok(run(&root, &["consolidate", "--force"]));
    let ids = entry_ids(&root);
    assert!(ids.len() >= 12, "{ids:?}");

    // The command line: supersede --text and --note, merge --text and --note, forget --reason,
    // undo --note.
    let out = ok(run(
        &root,
        &[
            "supersede",
            &ids[0],
            "--text",
            &format!("CI pushes with {}", cred()),
            "--note",
            &format!("rotated {}", cred()),
            "--json",
        ],
    ));
    ok(run(&root, &["undo", &run_of(&out), "--note", &format!("undone, token {}", cred())]));
    ok(run(
        &root,
        &["merge", &ids[1], &ids[2], "--text", &format!("both use {}", cred()), "--note", &cred(), "--json"],
    ));
    ok(run(&root, &["forget", &ids[3], "--reason", &format!("leaked {}", cred())]));
    let daemon = fixture.serve(&[]).await;
    // HTTP.
    let (code, body) = daemon
        .post(
            &format!("/entries/{}/supersede", ids[4]),
            json!({"text": format!("deploys with {}", cred()), "note": cred()}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = daemon.delete(&format!("/entries/{}?reason={}", ids[5], cred())).await;
    assert_eq!(code, 200, "{body}");
    // MCP.
    let (client, _) = crate::common::mcp::http(&daemon.url("/mcp"), daemon.token()).await;
    crate::common::mcp::ok(
        &client,
        "memory_supersede",
        json!({"id": ids[6], "text": format!("the bot token is {}", cred()), "note": cred()}),
    )
    .await;
    crate::common::mcp::ok(&client, "memory_forget", json!({"id": ids[7], "reason": cred()})).await;
    // Plans reviewed with a note: apply one, reject another.
    let plan = |n: usize| {
        let review = [("MEMFOLD_CONSOLIDATION__MODE", "review")];
        crate::common::memfold(&root, &["add", &format!("Mo owns service number {n} now")], &review);
        let out = crate::common::memfold(&root, &["consolidate", "--force", "--json"], &review);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["plan"].as_str().map(str::to_string)
    };
    daemon.stop().await;
    if let Some(p) = plan(1) {
        ok(run(&root, &["apply", &p, "--note", &format!("ok {}", cred())]));
    }
    if let Some(p) = plan(2) {
        ok(run(&root, &["reject", &p, "--note", &cred()]));
    }
    let leaked = leaks(&root, &values);
    assert!(leaked.is_empty(), "{leaked:?}");
    let report = verify(&root);
    assert_eq!(report["ok"], true, "{report}");
    assert!(std::fs::read_to_string(root.join(".memfold/tombstones.jsonl")).unwrap().contains("[secret: "));

    // Under `refuse`, each is refused and nothing is written.
    let refuse = [("MEMFOLD_INGEST__SECRETS", "refuse")];
    let before = crate::common::files(&root);
    let ids = entry_ids(&root);
    let (_, secret) = credential("github", &mut g);
    for args in [
        vec!["supersede", &ids[0], "--text", &secret],
        vec!["merge", &ids[0], &ids[1], "--note", &secret],
        vec!["forget", &ids[0], "--reason", &secret],
    ] {
        let out = crate::common::memfold(&root, &args, &refuse);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("github token") && !said.contains(&secret), "{said}");
    }
    let after = crate::common::files(&root);
    let memory_files = |files: &std::collections::BTreeMap<String, Vec<u8>>| -> Vec<(String, Vec<u8>)> {
        files
            .iter()
            .filter(|(p, _)| p.ends_with(".md") || p.ends_with(".jsonl"))
            .map(|(p, b)| (p.clone(), b.clone()))
            .collect()
    };
    assert_eq!(memory_files(&before), memory_files(&after), "a refused curation writes nothing");
}

#[test]
fn an_import_of_a_memory_holding_a_credential_stores_it_once_redacted() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let mut g = Gen(5);
    let (text, secret) = credential("openai_proj", &mut g);
    let export = fixture.dir.path().join("mem0.jsonl");
    std::fs::write(
        &export,
        format!(
            "{}\n{}\n",
            json!({"id": "m1", "memory": format!("OPENAI_API_KEY={text} is in the shell profile")}),
            json!({"id": "m2", "memory": "Prefers pnpm over npm"})
        ),
    )
    .unwrap();
    for round in 0..3 {
        let out = run(&root, &["import", "--from", "mem0", export.to_str().unwrap(), "--json"]);
        let answer: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(answer["added"], if round == 0 { 2 } else { 0 }, "round {round}: {answer}");
    }
    let report = verify(&root);
    assert_eq!(report["facts"], 2, "one copy each: {report}");
    assert!(leaks(&root, &[secret]).is_empty());
}

#[tokio::test]
async fn a_stored_secret_never_reaches_an_agent_through_a_hook_or_an_mcp_answer() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let secrets = some_secrets();
    let allow = [("MEMFOLD_INGEST__SECRETS", "allow")];
    // Let in with `allow`, and typed into MEMORY.md and memory.md by hand.
    for (text, _) in &secrets[..4] {
        ok(crate::common::memfold(&root, &["add", &format!("kubernetes deploy credential {text}")], &allow));
    }
    ok(crate::common::memfold(&root, &["consolidate", "--force"], &allow));
    std::fs::write(root.join("MEMORY.md"), format!("- The kubernetes admin password is {}\n", "Kestrel#2026")).unwrap();
    let daemon = fixture.serve(&allow).await;
    let values: Vec<String> = secrets.iter().map(|(_, s)| s.clone()).collect();
    let clean = |what: &str, text: &str| {
        for v in &values {
            assert!(!text.contains(v.as_str()), "{what} holds {v}: {text}");
        }
    };
    // Hooks: session start and a prompt, as the agent runs them.
    for (event, payload) in [
        ("session-start", json!({"session_id": "s", "cwd": fixture.dir.path(), "hook_event_name": "SessionStart"})),
        (
            "user-prompt-submit",
            // Another session: the one above was told its project's entries already.
            json!({"session_id": "s2", "cwd": fixture.dir.path(), "prompt": "which kubernetes deploy credential do we use?"}),
        ),
    ] {
        let mut hook = crate::common::bin()
            .arg("--root")
            .arg(&root)
            .args(["hook", event])
            .envs(allow)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        hook.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
        let out = hook.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("[secret: "), "{event}: the stored secrets are there, masked: {said}");
        clean(event, &said);
    }
    // MCP: search, get, and the resources.
    let (client, _) = crate::common::mcp::http(&daemon.url("/mcp"), daemon.token()).await;
    let found =
        crate::common::mcp::call(&client, "memory_search", json!({"query": "kubernetes deploy credential"})).await;
    let text = format!("{} {}", crate::common::mcp::text(&found), found.structured_content.clone().unwrap_or_default());
    assert!(text.contains("[secret: "), "{text}");
    clean("memory_search", &text);
    let id = entry_ids(&root)[0].clone();
    let got = crate::common::mcp::call(&client, "memory_get", json!({"id": id})).await;
    clean(
        "memory_get",
        &format!("{} {}", crate::common::mcp::text(&got), got.structured_content.clone().unwrap_or_default()),
    );
    for uri in ["memfold://MEMORY.md", "memfold://memory.md"] {
        let text = crate::common::mcp::read(&client, uri).await;
        assert!(text.contains("[secret: "), "{uri}: {text}");
        clean(uri, &text);
    }
    daemon.stop().await;
}

/// The shapes a credential is pasted in, with the value's place: `(text, value)`.
fn shaped(shape: usize, prefix: &str, word: &str, value: &str) -> String {
    let upper = format!("{prefix}{word}").to_uppercase();
    let lower = format!("{prefix}{word}").to_lowercase();
    match shape {
        0 => format!("{upper}={value}"),
        1 => format!("export {upper}=\"{value}\""),
        2 => format!("{lower}: '{value}'"),
        3 => format!("{{\"user\": \"app\", \"{lower}\": \"{value}\", \"port\": 5432}}"),
        4 => format!("set {upper}: {value} in the staging env"),
        _ => format!("{lower} = \"{value}\"  # from the vault"),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// A setting named for a password or a key is caught in every shape, and redacted to the
    /// value's end: no tail of it survives, whatever characters it holds.
    #[test]
    fn a_setting_is_caught_and_redacted_to_the_end_of_its_value(
        shape in 0usize..6,
        prefix in "(?:(?:DB|POSTGRES|SMTP|APP|STRIPE|SLACK|AWS|X)_){0,2}",
        word in proptest::sample::select(vec!["PASSWORD", "PASS", "PWD", "SECRET", "TOKEN", "API_KEY", "SECRET_KEY", "ACCESS_TOKEN", "CLIENT_SECRET", "WEBHOOK_SECRET"]),
        head in "[A-Za-z]{3,6}[0-9]{2,4}",
        tail in "[!#%*@^~+=/A-Za-z0-9-]{6,14}",
        quoted_extra in "[$&;, !]{0,3}[A-Za-z0-9]{1,3}",
    ) {
        // Unquoted values end at a space, a quote or a separator of pairs; quoted ones may hold them.
        let quoted = matches!(shape, 1 | 2 | 3 | 5);
        let value = if quoted { format!("{head}{tail}{quoted_extra}") } else { format!("{head}{tail}") };
        // A run that reads as a placeholder ("****", "xxxx") is left alone by design.
        proptest::prop_assume!(!["***", "xxxx", "XXXX", "..."].iter().any(|p| value.contains(p)));
        let text = shaped(shape, &prefix, word, &value);
        let at = text.find(&value).unwrap();
        let found = memfold::store::secrets::find(&text);
        let covered = |i: usize| found.iter().any(|f| f.start <= i && i < f.end);
        // Caught: a password by its name alone; a token, a secret or a key when it is long and
        // varied enough to be one (docs/security.md: 12 characters, 8 of them different, 3 bits each).
        let password = ["PASSWORD", "PASS", "PWD"].contains(&word);
        let mut counts = std::collections::HashMap::new();
        for c in value.chars() {
            *counts.entry(c).or_insert(0usize) += 1;
        }
        let n = value.chars().count() as f64;
        let bits: f64 = counts.values().map(|&c| c as f64 / n).map(|p| -p * p.log2()).sum();
        if password || (value.chars().count() >= 12 && counts.len() >= 8 && bits >= 3.0) {
            proptest::prop_assert!(!found.is_empty(), "not caught: {}", text);
        }
        // What is caught of the value is all of it.
        if (at..at + value.len()).any(covered) {
            for i in at..at + value.len() {
                proptest::prop_assert!(covered(i), "{:?} keeps {:?} of {:?}: {:?}", text, &value[i..], value, found);
            }
        }
    }
}

#[test]
fn a_private_key_pasted_on_stdin_is_caught_as_a_block_and_no_caught_value_reaches_a_file() {
    let fixture = Fixture::new();
    let root = fixture.root();
    let mut g = Gen(31);
    let body: Vec<String> =
        (0..6).map(|_| g.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 64)).collect();
    let pem = format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----", body.join("\n"));
    // Settings in every shape, formats, prose, and the key, as one paste.
    let mut values: Vec<String> = body.clone();
    let mut lines = vec!["The deploy box is web-3.".to_string(), pem.clone()];
    let words = ["PASSWORD", "SECRET", "TOKEN", "API_KEY", "PASS"];
    for i in 0..60 {
        let value = format!(
            "{}{}{}",
            g.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", 5),
            g.pick("0123456789", 3),
            g.pick("!#%*@^~+=-ABCDEFGHJKabcdefgh", 8)
        );
        let prefix = ["DB_", "APP_", "", "SMTP_", "X_"][i % 5];
        lines.push(shaped(i % 6, prefix, words[i % words.len()], &value));
        values.push(value);
    }
    for kind in ["github", "slack", "openai_proj", "url_redis", "aws_id", "jwt", "stripe", "sendgrid"] {
        let (text, secret) = credential(kind, &mut g);
        lines.push(format!("note for later: {text}"));
        values.push(secret);
    }
    let input = lines.join("\n") + "\n";
    let mut add = crate::common::bin()
        .arg("--root")
        .arg(&root)
        .args(["add", "--stdin", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    add.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = add.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let added: Value = serde_json::from_slice(&out.stdout).unwrap();
    let texts: Vec<&str> = added["facts"].as_array().unwrap().iter().map(|f| f["text"].as_str().unwrap()).collect();
    assert!(texts.iter().any(|t| t.contains("[secret: private key]")), "{texts:?}");
    assert_eq!(texts.len(), lines.len(), "the key is one fact, each other line one");
    ok(run(&root, &["consolidate", "--force"]));
    let leaked = leaks(&root, &values);
    assert!(leaked.is_empty(), "{leaked:?}");
    assert_eq!(verify(&root)["ok"], true);
    // Under refuse, the paste is refused whole and nothing is written.
    let mut add = crate::common::bin()
        .arg("--root")
        .arg(&root)
        .args(["add", "--stdin"])
        .env("MEMFOLD_INGEST__SECRETS", "refuse")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    add.stdin.take().unwrap().write_all(format!("a plain line\n{pem}\n").as_bytes()).unwrap();
    let out = add.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("private key"));
    assert!(leaks(&root, &["a plain line".to_string()]).is_empty(), "nothing of a refused paste is stored");
}
