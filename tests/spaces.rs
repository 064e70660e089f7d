//! A home of spaces through the real binary: the token decides the space on every door (each
//! HTTP route, MCP over HTTP, the review page), shared spaces are read by every space's search
//! and written only by `share`, a second home's token is a stranger, a space whose index is
//! damaged fails alone, and `memfold spaces` lists them all.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, eventually};
use crate::common::files;
use crate::common::home::Home;
use crate::common::mcp;

/// What each space holds before the daemon starts: words no other space uses, so a leak shows.
const ALPHA: [&str; 2] = ["The zephyr service listens on port 8125", "The zephyr deploys run from the main branch"];
const BETA: [&str; 2] = ["The quokka service listens on port 9137", "The quokka deploys run from the release branch"];
const TEAM: [&str; 1] = ["The marmot runbook lives in the team wiki"];

/// What a test knows of space beta, the one the others must never reach.
struct Beta {
    entry: String,
    fact: String,
    run: String,
    plan: String,
}

impl Beta {
    /// The strings no answer to another space's token may contain.
    fn marks(&self) -> Vec<&str> {
        // The port with its word: the bare number also turns up in nanoseconds of a timestamp.
        vec!["quokka", "port 9137", &self.entry, &self.fact, &self.run, &self.plan, "spaces/beta"]
    }
}

/// A home with spaces alpha, beta and team (shared), each with entries from a consolidation,
/// a pending fact and an applied run; beta (in review mode, from its own `memfold.toml`) also
/// has a plan waiting.
fn seeded() -> (Home, Beta) {
    let home = Home::new(&["alpha", "beta", "team"], &["team"], "");
    std::fs::write(home.space("beta").join("memfold.toml"), "[consolidation]\nmode = \"review\"\n").unwrap();
    for (space, facts) in [("alpha", &ALPHA[..]), ("team", &TEAM[..])] {
        let mut args = vec!["add"];
        args.extend(facts);
        home.ok(Some(space), &args);
        home.json(Some(space), &["consolidate", "--force", "--json"]);
    }
    home.ok(Some("alpha"), &["add", "The zephyr pager rotation is weekly"]);
    home.ok(Some("beta"), &["add", BETA[0], BETA[1]]);
    let plan = home.json(Some("beta"), &["consolidate", "--force", "--json"]);
    let plan_id = plan["plans"][0].as_str().unwrap_or_else(|| panic!("beta made no plan: {plan}")).to_string();
    home.json(Some("beta"), &["apply", &plan_id, "--json"]);
    let added = home.json(Some("beta"), &["add", "--json", "The quokka pager rotation is daily"]);
    let fact = added["facts"][0]["id"].as_str().unwrap().to_string();
    let waiting = home.json(Some("beta"), &["consolidate", "--force", "--json"]);
    let plan = waiting["plans"][0].as_str().unwrap_or_else(|| panic!("beta made no plan: {waiting}")).to_string();
    let runs = home.json(Some("beta"), &["runs", "--json"]);
    let run = runs["runs"][0]["run"].as_str().unwrap_or_else(|| panic!("no run: {runs}")).to_string();
    let entry = first_entry(&home.space("beta"));
    (home, Beta { entry, fact, run, plan })
}

/// The id of the first entry of a root's `memory.md`.
fn first_entry(root: &Path) -> String {
    let text = std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap();
    let at = text.find(r#""id":"m-"#).unwrap_or_else(|| panic!("no entry in\n{text}"));
    text[at + 6..].split('"').next().unwrap().to_string()
}

async fn send(daemon: &Daemon, token: &str, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = daemon.client.request(method, daemon.url(path)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    daemon.send(request).await
}

fn assert_no_leak(marks: &[&str], what: &str, body: &Value) {
    let text = body.to_string();
    for mark in marks {
        assert!(!text.contains(mark), "{what} showed {mark:?} of another space: {text}");
    }
}

/// Every file of a space, to prove a request left it alone (the recall log and the index aside:
/// nothing but the space's own daemon side writes them).
fn space_files(home: &Home, space: &str) -> BTreeMap<String, Vec<u8>> {
    files(&home.space(space))
        .into_iter()
        .filter(|(path, _)| !path.starts_with(".memfold/index") && !path.ends_with(".lock"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_token_reaches_its_own_and_the_shared_space_on_every_route_and_nothing_else() {
    let (home, beta) = seeded();
    let daemon = home.serve(&[]).await;
    let alpha = home.token(Some("alpha"));
    let marks = beta.marks();
    let beta_before = space_files(&home, "beta");

    // Every route, with alpha's token, naming beta's ids where a route takes one.
    let id = |path: &str| {
        path.replace("{entry}", &beta.entry)
            .replace("{fact}", &beta.fact)
            .replace("{run}", &beta.run)
            .replace("{plan}", &beta.plan)
    };
    let routes: Vec<(Method, &str, Option<Value>, u16)> = vec![
        (Method::GET, "/healthz", None, 200),
        (Method::GET, "/status", None, 200),
        (Method::GET, "/search?q=quokka+service+port+deploys+pager", None, 200),
        (Method::GET, "/search?q=quokka&k=50&history=true", None, 200),
        (Method::GET, "/entries", None, 200),
        (Method::GET, "/entries/{entry}", None, 404),
        (Method::GET, "/entries/{entry}/history", None, 404),
        (Method::POST, "/entries/{entry}/pin", None, 404),
        (Method::POST, "/entries/{entry}/unpin", None, 404),
        (Method::POST, "/entries/{entry}/share", Some(json!({"to": "team"})), 404),
        (Method::DELETE, "/entries/{entry}", None, 404),
        (Method::GET, "/facts/{fact}", None, 404),
        (Method::GET, "/runs", None, 200),
        (Method::POST, "/runs/{run}/undo", None, 404),
        (Method::GET, "/plans", None, 200),
        (Method::GET, "/plans/{plan}", None, 404),
        (Method::POST, "/plans/{plan}/apply", Some(json!({})), 404),
        (Method::POST, "/plans/{plan}/reject", None, 404),
        (Method::POST, "/reindex", Some(json!({})), 200),
        (Method::POST, "/consolidate", Some(json!({"dry_run": true, "force": true})), 200),
        (Method::POST, "/turns/spooled", None, 202),
        // Naming another space: a path, a query parameter, a header, a body field.
        (Method::GET, "/spaces/beta/entries", None, 403),
        (Method::GET, "/spaces/beta/search?q=quokka", None, 403),
        (Method::GET, "/spaces", None, 403),
        (Method::GET, "/metrics", None, 403),
        (Method::GET, "/search?q=quokka&space=beta", None, 400),
        (Method::POST, "/facts", Some(json!({"facts": [{"text": "The zephyr owner is Ana"}], "space": "beta"})), 400),
        (Method::POST, "/facts", Some(json!({"facts": [{"text": "The zephyr owner is Ana", "space": "beta"}]})), 400),
    ];
    for (method, path, body, want) in routes {
        let path = id(path);
        let (code, answer) = send(&daemon, &alpha, method.clone(), &path, body).await;
        assert_eq!(code, want, "{method} {path}: {answer}");
        // An id the request named may come back in its error; nothing else of beta may.
        let unnamed: Vec<&str> = marks.iter().copied().filter(|m| !path.contains(m)).collect();
        assert_no_leak(&unnamed, &format!("{method} {path}"), &answer);
    }
    let request = daemon.client.get(daemon.url("/entries")).bearer_auth(&alpha).header("X-Memfold-Space", "beta");
    let (code, answer) = daemon.send(request).await;
    assert_eq!(code, 200);
    assert_no_leak(&marks, "a header naming beta", &answer);
    assert_eq!(space_files(&home, "beta"), beta_before, "a request with alpha's token changed space beta");

    // Search reads the shared space too, and every hit says where it came from.
    let (_, found) = send(&daemon, &alpha, Method::GET, "/search?q=zephyr+marmot+runbook&k=20", None).await;
    let hits = found["hits"].as_array().unwrap();
    let from = |space: &str| hits.iter().filter(|h| h["space"] == space).count();
    assert!(from("alpha") >= 1 && from("team") >= 1, "{found}");
    assert_eq!(from("alpha") + from("team"), hits.len(), "{found}");

    // Writes land in the token's space only.
    let team_before = space_files(&home, "team");
    let (code, added) =
        send(&daemon, &alpha, Method::POST, "/facts", Some(json!({"facts": [{"text": "The zephyr owner is Ana"}]})))
            .await;
    assert_eq!(code, 200, "{added}");
    let archive = |space: &str| {
        std::fs::read_dir(home.space(space).join("archive"))
            .unwrap()
            .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
            .collect::<String>()
    };
    assert!(archive("alpha").contains("The zephyr owner is Ana"));
    assert_eq!(space_files(&home, "beta"), beta_before);
    assert_eq!(space_files(&home, "team"), team_before);

    // Beta's own token sees beta, and the shared space, and not alpha.
    let beta_token = home.token(Some("beta"));
    let (_, found) = send(&daemon, &beta_token, Method::GET, "/search?q=quokka+zephyr+marmot&k=50", None).await;
    let text = found.to_string();
    assert!(text.contains("quokka") && text.contains("marmot") && !text.contains("zephyr"), "{found}");

    // The operator names a space; a plain route is refused.
    let operator = home.token(None);
    let (code, entries) =
        send(&daemon, &operator, Method::GET, &format!("/spaces/beta/entries/{}", beta.entry), None).await;
    assert_eq!(code, 200, "{entries}");
    let (code, refused) = send(&daemon, &operator, Method::GET, "/entries", None).await;
    assert_eq!(code, 403, "{refused}");
    let (code, listed) = send(&daemon, &operator, Method::GET, "/spaces", None).await;
    assert_eq!(code, 200, "{listed}");
    let names: Vec<&str> = listed["spaces"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "beta", "team"]);
    let (code, missing) = send(&daemon, &operator, Method::GET, "/spaces/gamma/entries", None).await;
    assert_eq!(code, 404, "{missing}");
    assert!(!home.space("gamma").exists(), "a read made a space");

    // Another home's tokens are strangers here.
    let other = Home::new(&["alpha"], &[], "");
    for token in [other.token(None), other.token(Some("alpha"))] {
        let (code, answer) = send(&daemon, &token, Method::GET, "/search?q=zephyr", None).await;
        assert_eq!(code, 401, "{answer}");
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_copies_an_entry_into_a_shared_space_with_its_provenance() {
    let (home, _) = seeded();
    let daemon = home.serve(&[]).await;
    let alpha = home.token(Some("alpha"));
    let entry = first_entry(&home.space("alpha"));

    let (code, shared) =
        send(&daemon, &alpha, Method::POST, &format!("/entries/{entry}/share"), Some(json!({"to": "team"}))).await;
    assert_eq!(code, 200, "{shared}");
    let fact = shared["facts"][0]["id"].as_str().unwrap().to_string();
    let (code, refused) =
        send(&daemon, &alpha, Method::POST, &format!("/entries/{entry}/share"), Some(json!({"to": "beta"}))).await;
    assert_eq!(code, 403, "{refused}");

    // The copy is a pending fact of team whose source names alpha's entry; alpha is unchanged.
    let operator = home.token(None);
    let (code, copy) = send(&daemon, &operator, Method::GET, &format!("/spaces/team/facts/{fact}"), None).await;
    assert_eq!(code, 200, "{copy}");
    assert_eq!(copy["src"], format!("share:alpha/{entry}"), "{copy}");
    let (_, status) = send(&daemon, &alpha, Method::GET, "/status", None).await;
    assert_eq!(status["pending_facts"], 1, "{status}");

    // The CLI shares the same way; a lone root has nowhere to share to.
    let out = home.json(Some("alpha"), &["share", &entry, "--to", "team", "--json"]);
    let fact = out["facts"][0]["id"].as_str().unwrap();
    let (_, copy) = send(&daemon, &operator, Method::GET, &format!("/spaces/team/facts/{fact}"), None).await;
    assert_eq!(copy["src"], format!("share:alpha/{entry}"), "{copy}");
    let refused = home.run(Some("alpha"), &["share", &entry, "--to", "beta"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a shared space"), "{refused:?}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_serves_the_token_space() {
    let (home, beta) = seeded();
    let daemon = home.serve(&[]).await;
    let marks = beta.marks();
    let (client, _) = mcp::http(&daemon.url("/mcp"), &home.token(Some("alpha"))).await;

    let found = mcp::ok(&client, "memory_search", json!({"query": "quokka service port zephyr marmot", "k": 50})).await;
    assert_no_leak(&marks, "memory_search", &found);
    assert!(found.to_string().contains("zephyr") && found.to_string().contains("marmot"), "{found}");
    for (tool, args) in [
        ("memory_get", json!({"id": beta.entry})),
        ("memory_forget", json!({"id": beta.fact})),
        ("memory_pin", json!({"id": beta.entry})),
        ("memory_undo", json!({"run": beta.run})),
        ("memory_plan", json!({"plan": beta.plan})),
        ("memory_apply_plan", json!({"plan": beta.plan})),
        ("memory_reject_plan", json!({"plan": beta.plan})),
        ("memory_share", json!({"id": beta.entry, "to": "team"})),
        ("memory_search", json!({"query": "quokka", "space": "beta"})),
        ("memory_add", json!({"facts": ["The zephyr owner is Ana"], "space": "beta"})),
    ] {
        let refused = mcp::call(&client, tool, args).await;
        assert_eq!(refused.is_error, Some(true), "{tool} answered: {}", mcp::text(&refused));
        assert!(!mcp::text(&refused).contains("quokka"), "{tool}: {}", mcp::text(&refused));
    }
    for (tool, args) in [("memory_status", json!({})), ("memory_runs", json!({})), ("memory_plans", json!({}))] {
        let answer = mcp::ok(&client, tool, args).await;
        assert_no_leak(&marks, tool, &answer);
    }
    let memory = mcp::read(&client, "memfold://memory.md").await;
    assert!(memory.contains("zephyr") && !memory.contains("quokka"), "{memory}");
    let added = mcp::ok(&client, "memory_add", json!({"facts": ["The zephyr owner is Ana"]})).await;
    let id = added["facts"][0]["id"].as_str().unwrap();
    let archive = std::fs::read_dir(home.space("alpha").join("archive")).unwrap();
    assert!(archive.map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap()).any(|t| t.contains(id)));
    client.cancel().await.unwrap();

    // The operator's token reaches a space's MCP only through its prefix.
    let (code, _) = send(&daemon, &home.token(None), Method::POST, "/mcp", Some(json!({}))).await;
    assert_eq!(code, 403);
    let (client, _) = mcp::http(&daemon.url("/spaces/beta/mcp"), &home.token(None)).await;
    let found = mcp::ok(&client, "memory_search", json!({"query": "quokka service", "k": 5})).await;
    assert!(found.to_string().contains("quokka"), "{found}");
    client.cancel().await.unwrap();
    daemon.stop().await;
}

/// A client that shows redirects instead of following them.
fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

async fn page(daemon: &Daemon, path: &str, cookie: &str) -> (u16, String) {
    let response = browser().get(daemon.url(path)).header(COOKIE, cookie).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// Sign in with the address `memfold ui` prints for `space` (None: the home's operator).
async fn sign_in(home: &Home, daemon: &Daemon, space: Option<&str>) -> String {
    let url = home.ok(space, &["ui", "--bind", &daemon.host()]).trim().to_string();
    let query = url.split_once('?').unwrap().1;
    let form: Vec<(&str, &str)> = query.split('&').filter_map(|pair| pair.split_once('=')).collect();
    let response = browser().post(daemon.url("/ui/login")).form(&form).send().await.unwrap();
    assert_eq!(response.status(), 303, "{url}");
    assert_eq!(response.headers()[LOCATION], "/ui");
    response.headers()[SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_page_shows_a_space_to_its_sign_in_and_every_space_to_the_operator() {
    let (home, beta) = seeded();
    let daemon = home.serve(&[]).await;
    let alpha_entry = first_entry(&home.space("alpha"));

    let alpha = sign_in(&home, &daemon, Some("alpha")).await;
    let (code, inbox) = page(&daemon, "/ui", &alpha).await;
    assert_eq!(code, 200, "{inbox}");
    let (code, shown) = page(&daemon, &format!("/ui/entries/{alpha_entry}"), &alpha).await;
    assert_eq!(code, 200);
    assert!(shown.contains("zephyr"), "{shown}");
    let (_, searched) = page(&daemon, "/ui/search?q=service+port+runbook+deploys", &alpha).await;
    assert!(searched.contains("zephyr") && !searched.contains("quokka"), "{searched}");
    assert!(searched.contains(r#"<span class="badge">from team</span>"#), "{searched}");
    for path in
        [format!("/ui/entries/{}", beta.entry), format!("/ui/plans/{}", beta.plan), format!("/ui/facts/{}", beta.fact)]
    {
        let (code, body) = page(&daemon, &path, &alpha).await;
        assert_eq!(code, 404, "{path}: {body}");
        assert!(!body.contains("quokka"), "{path}: {body}");
    }
    for path in ["/ui/s/beta", "/ui/s/beta/entries/x", "/ui/s/alpha"] {
        let (code, body) = page(&daemon, path, &alpha).await;
        assert_eq!(code, 403, "{path}: {body}");
    }
    // A space's sign-in code works for that space only.
    let url = home.ok(Some("beta"), &["ui", "--bind", &daemon.host()]).trim().to_string();
    let code = url.split("code=").nth(1).unwrap().split('&').next().unwrap().to_string();
    let refused = browser().post(daemon.url("/ui/login")).form(&[("code", code.as_str()), ("space", "alpha")]);
    assert_eq!(refused.send().await.unwrap().status(), 403);

    let operator = sign_in(&home, &daemon, None).await;
    let (code, picker) = page(&daemon, "/ui", &operator).await;
    assert_eq!(code, 200);
    for space in ["alpha", "beta", "team"] {
        assert!(picker.contains(&format!(r#"href="/ui/s/{space}""#)), "{picker}");
    }
    let (code, shown) = page(&daemon, &format!("/ui/s/beta/entries/{}", beta.entry), &operator).await;
    assert_eq!(code, 200, "{shown}");
    assert!(shown.contains("quokka") && shown.contains("/ui/s/beta/"), "{shown}");
    let (code, waiting) = page(&daemon, "/ui/s/beta", &operator).await;
    assert_eq!(code, 200, "{waiting}");
    assert!(waiting.contains(&beta.plan), "{waiting}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_with_a_damaged_index_fails_alone_and_heals_with_reindex() {
    let (home, _) = seeded();
    // Every file of beta's table overwritten with noise.
    let table = home.space("beta").join(".memfold/index/docs.lance");
    let mut damaged = 0;
    let mut dirs = vec![table.clone()];
    while let Some(dir) = dirs.pop() {
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                std::fs::write(&path, b"not a lance file, not at all").unwrap();
                damaged += 1;
            }
        }
    }
    assert!(damaged > 0, "no table at {}", table.display());
    let daemon = home.serve(&[]).await;
    let (alpha, beta_token) = (home.token(Some("alpha")), home.token(Some("beta")));

    let (code, failed) = send(&daemon, &beta_token, Method::GET, "/search?q=quokka", None).await;
    assert!((500..600).contains(&code), "{code} {failed}");
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("space beta:") && message.contains("reindex --clear"), "{failed}");
    // Writes still land: the archive is not the index.
    let (code, added) = send(
        &daemon,
        &beta_token,
        Method::POST,
        "/facts",
        Some(json!({"facts": [{"text": "The quokka owner is Rui"}]})),
    )
    .await;
    assert_eq!(code, 200, "{added}");
    // The other spaces go on, shared search included.
    let (code, found) = send(&daemon, &alpha, Method::GET, "/search?q=zephyr+marmot", None).await;
    assert_eq!(code, 200, "{found}");
    assert!(found.to_string().contains("zephyr"), "{found}");
    let (code, listed) = send(&daemon, &home.token(None), Method::GET, "/spaces", None).await;
    assert_eq!(code, 200, "{listed}");

    // Rebuilt from the markdown, while the daemon runs, it answers again.
    home.ok(Some("beta"), &["reindex", "--clear"]);
    let (code, found) = send(&daemon, &beta_token, Method::GET, "/search?q=quokka+owner", None).await;
    assert_eq!(code, 200, "{found}");
    assert!(found.to_string().contains("The quokka owner is Rui"), "{found}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spaces_lists_every_space_with_its_counts() {
    let (home, _) = seeded();
    let listed = home.json(None, &["spaces", "--json"]);
    let spaces = listed["spaces"].as_array().unwrap();
    let by_name: BTreeMap<&str, &Value> = spaces.iter().map(|s| (s["name"].as_str().unwrap(), s)).collect();
    assert_eq!(by_name.keys().copied().collect::<Vec<_>>(), ["alpha", "beta", "team"]);
    for (name, space) in &by_name {
        let status = home.json(Some(name), &["status", "--json"]);
        assert_eq!(space["entries"], status["entries"], "{name}: {space} vs {status}");
        assert_eq!(space["pending_facts"], status["pending_facts"], "{name}: {space} vs {status}");
        assert!(space["last_pass"].is_string(), "{name}: {space}");
        assert!(space["disk_bytes"].as_u64().unwrap() > 0, "{name}: {space}");
        assert!(space["last_use"].is_string(), "{name}: {space}");
    }
    assert_eq!(by_name["team"]["shared"], true);
    assert_eq!(by_name["alpha"]["shared"], false);
    assert!(by_name["alpha"]["entries"].as_u64().unwrap() >= 1);
    assert_eq!(by_name["alpha"]["pending_facts"], 1);
    let text = home.ok(None, &["spaces"]);
    assert!(text.lines().any(|l| l.starts_with("team (shared):")), "{text}");
    // A space's own commands need its name; a home's listing needs the home.
    let out = home.run(None, &["status"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--space NAME"), "{out:?}");
    // A root is not a home: taking one for the other is refused, naming the way to move it in.
    let mut as_home = crate::common::bin();
    as_home.arg("--home").arg(home.space("alpha")).args(["spaces"]).env_remove("MEMFOLD_HOME");
    let out = as_home.output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a memory root, not a home"), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_root_moved_into_a_home_is_served_as_a_space_with_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("memfold");
    let run = |args: &[&str]| crate::common::memfold(&root, args, &[]);
    assert!(run(&["init"]).status.success());
    assert!(run(&["add", "Moved to Lisbon in October", "Has a dog named Rex"]).status.success());
    assert!(run(&["consolidate", "--force"]).status.success());
    std::fs::write(root.join("memfold.toml"), "[server]\nbind = \"127.0.0.1:7999\"\n").unwrap();
    let token = String::from_utf8(run(&["token"]).stdout).unwrap().trim().to_string();
    let before = crate::common::daemon::verify(&root);

    let home = Home::new(&[], &[], "");
    std::fs::rename(&root, home.space("me")).unwrap();
    let daemon = home.serve(&[]).await;
    let (code, found) = send(&daemon, &token, Method::GET, "/search?q=where+do+I+live", None).await;
    assert_eq!(code, 200, "{found}");
    assert!(found.to_string().contains("Lisbon"), "{found}");
    daemon.stop().await;
    // Its [server] section is the home's to set: ignored, with a warning naming the file.
    assert!(daemon_logs_warn(&home), "no warning about the space's [server]");
    let after = home.json(Some("me"), &["verify", "--json"]);
    assert_eq!(
        (after["ok"].clone(), after["facts"].clone()),
        (before["ok"].clone(), before["facts"].clone()),
        "{after}"
    );
}

/// Whether a daemon of `home` warned that a space's `[server]` is ignored.
fn daemon_logs_warn(home: &Home) -> bool {
    std::fs::read_dir(home.dir.path())
        .unwrap()
        .flatten()
        .filter(|f| f.file_name().to_string_lossy().ends_with(".log"))
        .any(|f| {
            std::fs::read_to_string(f.path())
                .unwrap_or_default()
                .contains("[server] in a space's memfold.toml is ignored")
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_makes_a_space_on_its_first_write_when_auto_create_is_on() {
    let home = Home::new(&["alpha"], &[], "auto_create = true\n");
    let daemon = home.serve(&[]).await;
    let operator = home.token(None);
    let fact = json!({"facts": [{"text": "The newt project builds with make"}]});

    // Reads never make a space; a name that is not one is refused before anything is made.
    let (code, _) = send(&daemon, &operator, Method::GET, "/spaces/newt/search?q=make", None).await;
    assert_eq!(code, 404);
    let (code, refused) = send(&daemon, &operator, Method::POST, "/spaces/..%2Fescape/facts", Some(fact.clone())).await;
    assert_eq!(code, 400, "{refused}");
    let (code, added) = send(&daemon, &operator, Method::POST, "/spaces/newt/facts", Some(fact.clone())).await;
    assert_eq!(code, 200, "{added}");
    assert!(home.space("newt").join("archive").is_dir());
    // The new space has its own token, which reaches it and nothing else.
    let newt = home.token(Some("newt"));
    let (code, found) = send(&daemon, &newt, Method::GET, "/search?q=newt+project+make", None).await;
    assert_eq!(code, 200, "{found}");
    assert!(found.to_string().contains("The newt project builds with make"), "{found}");
    let listed = home.json(None, &["spaces", "--json"]);
    assert_eq!(listed["spaces"].as_array().unwrap().len(), 2, "{listed}");
    daemon.stop().await;

    // Without auto_create, a write to a space that does not exist is refused.
    let strict = Home::new(&["alpha"], &[], "");
    let daemon = strict.serve(&[]).await;
    let (code, missing) = send(&daemon, &strict.token(None), Method::POST, "/spaces/newt/facts", Some(fact)).await;
    assert_eq!(code, 404, "{missing}");
    assert!(!strict.space("newt").exists());
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_stdio_serves_the_named_space_and_reads_the_shared_one() {
    let (home, beta) = seeded();
    let mut command = home.command(Some("alpha"));
    command.arg("mcp");
    let mut command = tokio::process::Command::from(command);
    command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let (recorder, _) = mcp::Recorder::new();
    let client = rmcp::ServiceExt::serve(recorder, (stdout, stdin)).await.expect("memfold mcp answers");
    let found = mcp::ok(&client, "memory_search", json!({"query": "service port runbook wiki", "k": 50})).await;
    assert_no_leak(&beta.marks(), "memory_search over stdio", &found);
    let hits = found["hits"].as_array().unwrap();
    assert!(hits.iter().any(|h| h["space"] == "team") && hits.iter().any(|h| h["space"] == "alpha"), "{found}");
    let entry = first_entry(&home.space("alpha"));
    let shared = mcp::ok(&client, "memory_share", json!({"id": entry, "to": "team"})).await;
    assert!(shared["facts"][0]["id"].is_string(), "{shared}");
    client.cancel().await.unwrap();
    let team = std::fs::read_dir(home.space("team").join("archive")).unwrap();
    let copied = format!("share:alpha/{entry}");
    assert!(team.map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap()).any(|t| t.contains(&copied)));
}

type Stamp = chrono::DateTime<chrono::Utc>;

/// The `[started, finished]` of each finished run of a space, oldest first (a run whose
/// journal is written but whose record is not yet has no `started`).
fn run_times(home: &Home, space: &str) -> Vec<(Stamp, Stamp)> {
    let runs = home.json(Some(space), &["runs", "--json"]);
    let stamp = |v: &Value| v.as_str()?.parse::<Stamp>().ok();
    let mut times: Vec<(Stamp, Stamp)> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| Some((stamp(&r["started"])?, stamp(&r["time"])?)))
        .collect();
    times.sort();
    times
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_run_one_at_a_time_across_spaces_and_a_busy_space_cannot_starve_the_others() {
    let gate = "\n[consolidation]\nmin_hours = 0.0\nmin_facts = 1\ninterval_seconds = 1\n";
    let home = Home::new(&["a", "b", "c"], &[], gate);
    // Every decision takes longer than a tick, so a's gate is open again at each tick while
    // its pass runs.
    let fake = memfold::testkit::FakeOpenAi::start_in_thread();
    fake.set_chat_handler(crate::common::add_everything);
    for _ in 0..30 {
        fake.push_chat(memfold::testkit::FakeReply::Stall(Duration::from_millis(1500)));
    }
    let env = crate::common::llm_env(&fake);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let daemon = home.serve(&env).await;
    // Space a is written to all the time, so its gate opens again after each of its passes.
    let busy = {
        let (client, url, token) = (daemon.client.clone(), daemon.url("/facts"), home.token(Some("a")));
        tokio::spawn(async move {
            for n in 0.. {
                let fact = json!({"facts": [{"text": format!("Space a logged event number {n}")}]});
                let _ = client.post(&url).bearer_auth(&token).json(&fact).send().await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    eventually(Duration::from_secs(60), "a to pass twice", async || (run_times(&home, "a").len() >= 2).then_some(()))
        .await;
    // b and c get facts while a's gate is open, has been for long, and opens again and again.
    let added = chrono::Utc::now();
    for space in ["b", "c"] {
        let fact = json!({"facts": [{"text": format!("Space {space} keeps its notes in markdown")}]});
        let (code, body) = send(&daemon, &home.token(Some(space)), Method::POST, "/facts", Some(fact)).await;
        assert_eq!(code, 200, "{body}");
    }
    let (b, c) = eventually(Duration::from_secs(60), "b and c to pass", async || {
        let (b, c) = (run_times(&home, "b"), run_times(&home, "c"));
        (!b.is_empty() && !c.is_empty()).then(|| (b[0], c[0]))
    })
    .await;
    busy.abort();
    daemon.stop().await;

    let a = run_times(&home, "a");
    let between = |first: &(Stamp, Stamp)| a.iter().filter(|run| run.0 > added && run.0 < first.0).count();
    assert!(
        between(&b) <= 1 && between(&c) <= 1,
        "a passed {} and {} times before b and c: {a:?}",
        between(&b),
        between(&c)
    );
    // No two passes at once (spaces.max_concurrent_passes = 1).
    let mut all: Vec<(Stamp, Stamp)> = a.into_iter().chain([b, c]).collect();
    all.sort();
    for pair in all.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "passes overlapped: {pair:?}");
    }
}

/// The spaces the daemon holds open, as the operator's `/spaces` lists them.
async fn open_spaces(daemon: &Daemon, operator: &str) -> Vec<String> {
    let (_, listed) = send(daemon, operator, Method::GET, "/spaces", None).await;
    let spaces = listed["spaces"].as_array().unwrap().clone();
    spaces.iter().filter(|s| s["open"] == true).map(|s| s["name"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spaces_open_on_use_and_the_least_recently_used_close_past_max_open() {
    let names = ["s1", "s2", "s3", "s4"];
    let home = Home::new(&names, &[], "max_open = 2\n");
    for name in names {
        home.ok(Some(name), &["add", &format!("Space {name} remembers the colour {name}-blue")]);
    }
    let daemon = home.serve(&[]).await;
    let operator = home.token(None);
    let open = async || open_spaces(&daemon, &operator).await;
    assert_eq!(open().await, Vec::<String>::new(), "no space opens before it is used");
    for name in names {
        let (code, found) = send(&daemon, &home.token(Some(name)), Method::GET, "/search?q=colour", None).await;
        assert_eq!(code, 200, "{found}");
        assert!(found.to_string().contains(&format!("{name}-blue")), "{found}");
    }
    assert_eq!(open().await, ["s3", "s4"]);
    // A closed space reopens on its next request, with everything it had.
    let (code, found) = send(&daemon, &home.token(Some("s1")), Method::GET, "/search?q=colour", None).await;
    assert_eq!(code, 200, "{found}");
    assert!(found.to_string().contains("s1-blue"), "{found}");
    assert_eq!(open().await, ["s1", "s4"]);
    daemon.stop().await;
}

#[tokio::test]
async fn a_space_nobody_uses_closes_after_close_idle_secs_and_reopens_on_its_next_request() {
    let names = ["s1", "s2"];
    let home = Home::new(&names, &[], "close_idle_secs = 1\n");
    for name in names {
        home.ok(Some(name), &["add", &format!("Space {name} remembers the colour {name}-green")]);
    }
    let daemon = home.serve(&[]).await;
    let operator = home.token(None);
    let open = async || open_spaces(&daemon, &operator).await;
    for name in names {
        let (code, found) = send(&daemon, &home.token(Some(name)), Method::GET, "/search?q=colour", None).await;
        assert_eq!(code, 200, "{found}");
    }
    assert_eq!(open().await, ["s1", "s2"]);
    // The daemon looks for idle spaces on its trimming tick (every few seconds).
    let waited = std::time::Instant::now();
    while !open().await.is_empty() {
        assert!(waited.elapsed() < Duration::from_secs(60), "idle spaces still open: {:?}", open().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (code, found) = send(&daemon, &home.token(Some("s2")), Method::GET, "/search?q=colour", None).await;
    assert_eq!(code, 200, "{found}");
    assert!(found.to_string().contains("s2-green"), "{found}");
    assert_eq!(open().await, ["s2"]);
    daemon.stop().await;
}

/// Copy a folder with everything in it.
fn copy_dir(from: &Path, to: &Path) {
    let out = std::process::Command::new("cp").arg("-a").arg(from).arg(to).output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_space_is_refused_at_start_and_tokens_made_or_deleted_meanwhile_count_within_seconds() {
    let home = Home::new(&["alpha", "beta"], &[], "");
    home.ok(Some("alpha"), &["add", ALPHA[0]]);
    // A space folder copied to make another holds the same token: refused at start, by name.
    copy_dir(&home.space("alpha"), &home.space("gamma"));
    let mut serve = home
        .command(None)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while serve.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if serve.try_wait().unwrap().is_none() {
        serve.kill().unwrap();
    }
    let out = serve.wait_with_output().unwrap();
    assert!(!out.status.success(), "served with two spaces on one token");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("space alpha") && said.contains("space gamma") && said.contains("same token"), "{said}");
    std::fs::remove_file(home.space("gamma").join(".memfold/token")).unwrap();

    let daemon = home.serve(&[]).await;
    let alpha = home.token(Some("alpha"));
    let gamma = home.token(Some("gamma"));
    assert_ne!(alpha, gamma, "gamma got a token of its own");
    let reaches = async |token: &str, words: &str| {
        let (code, found) = send(&daemon, token, Method::GET, &format!("/search?q={words}"), None).await;
        (code, found.to_string())
    };
    // A space made while the daemon runs: its token is let in without a restart.
    home.ok(Some("delta"), &["init"]);
    home.ok(Some("delta"), &["add", "The delta pipeline runs hourly"]);
    let delta = home.token(Some("delta"));
    eventually(Duration::from_secs(10), "the new space's token let in", async || {
        let (code, found) = reaches(&delta, "delta+pipeline").await;
        (code == 200 && found.contains("hourly")).then_some(())
    })
    .await;
    // A token file deleted to revoke it: the old token is refused within seconds.
    let beta = home.token(Some("beta"));
    assert_eq!(reaches(&beta, "anything").await.0, 200);
    std::fs::remove_file(home.space("beta").join(".memfold/token")).unwrap();
    eventually(Duration::from_secs(10), "the revoked token refused", async || {
        (reaches(&beta, "anything").await.0 == 401).then_some(())
    })
    .await;
    let renewed = home.token(Some("beta"));
    assert_ne!(renewed, beta);
    assert_eq!(reaches(&renewed, "anything").await.0, 200);
    // A folder copied while the daemon runs: alpha's token keeps reaching alpha, and only alpha.
    copy_dir(&home.space("alpha"), &home.space("epsilon"));
    std::fs::write(home.space("epsilon").join("archive/x.md"), "- The epsilon secret plan\n").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (code, found) = reaches(&alpha, "zephyr+service").await;
    assert_eq!(code, 200, "{found}");
    assert!(found.contains("zephyr"), "{found}");
    let (_, found) = reaches(&alpha, "epsilon+secret+plan").await;
    assert!(!found.contains("epsilon"), "alpha's token reached the copy: {found}");
    daemon.stop().await;
}
