//! The review page under `/ui`, through the real daemon: signing in with a one-time code, what
//! the pages show (hostile text as text), that forms are refused without the session's CSRF
//! field or from another origin, that a form apply writes what `memfold apply` writes, that an
//! undo from the page restores `memory.md`, and that browsing search leaves the recall log alone.

use std::path::Path;

use reqwest::header::{COOKIE, HeaderMap, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;
use serde_json::json;

use crate::common::daemon::{Daemon, Fixture, run, verify};

/// A client that shows redirects instead of following them.
fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(Policy::none()).build().unwrap()
}

struct Page {
    status: u16,
    headers: HeaderMap,
    body: String,
}

async fn get(daemon: &Daemon, path: &str, cookie: Option<&str>) -> Page {
    let mut request = client().get(daemon.url(path));
    if let Some(cookie) = cookie {
        request = request.header(COOKIE, cookie);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    Page { status, headers, body: response.text().await.unwrap() }
}

async fn post(
    daemon: &Daemon,
    path: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> Page {
    let mut request = client().post(daemon.url(path)).form(form);
    if let Some(cookie) = cookie {
        request = request.header(COOKIE, cookie);
    }
    for (k, v) in extra {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    Page { status, headers, body: response.text().await.unwrap() }
}

/// The value of `name="csrf"` in a page.
fn csrf(page: &str) -> String {
    let at = page.find(r#"name="csrf" value=""#).unwrap_or_else(|| panic!("no csrf field in\n{page}"));
    page[at + r#"name="csrf" value=""#.len()..].split('"').next().unwrap().to_string()
}

fn memory_md(root: &Path) -> Vec<u8> {
    std::fs::read(root.join("consolidated/memory.md")).unwrap()
}

/// Sign in with `memfold ui`'s address; returns the session cookie (`name=value`).
async fn sign_in(fixture: &Fixture, daemon: &Daemon) -> String {
    let out = run(&fixture.root(), &["ui", "--bind", &daemon.host()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let path = url.strip_prefix(&daemon.base).unwrap_or_else(|| panic!("{url} is not on {}", daemon.base)).to_string();
    let code = path.split("code=").nth(1).unwrap().to_string();

    // Opening the address shows a button and does not use the code up.
    let page = get(daemon, &path, None).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(r#"<button type="submit">Sign in</button>"#), "{}", page.body);
    let signed = post(daemon, "/ui/login", None, &[("code", &code)], &[]).await;
    assert_eq!((signed.status, signed.headers[LOCATION].to_str().unwrap()), (303, "/ui"));
    let cookie = signed.headers[SET_COOKIE].to_str().unwrap().to_string();
    assert!(cookie.starts_with(&format!("memfold-{}=", daemon.port)), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let again = post(daemon, "/ui/login", None, &[("code", &code)], &[]).await;
    assert_eq!(again.status, 403, "a code signs in once");
    assert!(!again.headers.contains_key(SET_COOKIE));
    cookie.split(';').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_page_signs_in_applies_a_group_like_the_cli_and_undoes_it() {
    let fixture = Fixture::new();
    let daemon = fixture.serve(&[("MEMFOLD_CONSOLIDATION__MODE", "review")]).await; // offline decider
    let hostile = "Keeps bees <img src=x onerror=window.__pwned=1> on the roof </textarea><!--m {{x}}";
    let ids = daemon.add(&[hostile, "Plays the cello on Sunday mornings"]).await;
    let (code, report) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{report}");
    let plan = report["plans"][0].as_str().unwrap().to_string();

    let anonymous = get(&daemon, "/ui", None).await;
    assert_eq!((anonymous.status, anonymous.headers[LOCATION].to_str().unwrap()), (303, "/ui/login"));
    let cookie = sign_in(&fixture, &daemon).await;

    let inbox = get(&daemon, "/ui", Some(&cookie)).await;
    assert_eq!(inbox.status, 200, "{}", inbox.body);
    let csp = inbox.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(inbox.headers["cache-control"], "no-store");
    // Not `no-referrer`: under it browsers post forms with `Origin: null`, which the guard refuses.
    assert_eq!(inbox.headers["referrer-policy"], "same-origin");
    assert!(inbox.body.contains(&format!("/ui/plans/{plan}")), "{}", inbox.body);
    assert!(inbox.body.len() < 30_000);

    let page = get(&daemon, &format!("/ui/plans/{plan}"), Some(&cookie)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(!page.body.contains("<img src=x") && !page.body.contains("</textarea><!--m"), "{}", page.body);
    assert!(page.body.contains("Keeps bees &#60;img src=x onerror=window.__pwned=1&#62;"), "{}", page.body);
    let token = csrf(&page.body);
    // The group holding the cello fact: the section it is shown in full in, and its checkbox.
    let cello = page.body.find(&ids[1]).unwrap();
    let group: String = page.body[..cello].rsplit(r#"<h2 id="g"#).next().unwrap().split('"').next().unwrap().into();
    assert!(page.body.contains(&format!(r#"name="group" value="{group}" checked"#)), "{}", page.body);
    let before = memory_md(&fixture.root());

    // Refused: no CSRF field, a foreign origin, a foreign host; nothing written.
    let form = [("action", "checked"), ("group", group.as_str())];
    let refused = post(&daemon, &format!("/ui/plans/{plan}/decide"), Some(&cookie), &form, &[]).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let with = [("csrf", token.as_str()), ("action", "checked"), ("group", group.as_str())];
    let origin =
        post(&daemon, &format!("/ui/plans/{plan}/decide"), Some(&cookie), &with, &[("origin", "http://127.0.0.1:9")])
            .await;
    assert_eq!(origin.status, 403);
    let site =
        post(&daemon, &format!("/ui/plans/{plan}/decide"), Some(&cookie), &with, &[("sec-fetch-site", "same-site")])
            .await;
    assert_eq!(site.status, 403);
    let host = post(&daemon, &format!("/ui/plans/{plan}/decide"), Some(&cookie), &with, &[("host", "evil.test")]).await;
    assert_eq!(host.status, 421);
    let stranger = post(&daemon, &format!("/ui/plans/{plan}/decide"), None, &with, &[]).await;
    assert_eq!(stranger.status, 303, "not signed in: to the sign-in page");
    assert_eq!(memory_md(&fixture.root()), before, "nothing was written");
    // The cookie does not open the JSON API.
    let api = client().get(daemon.url("/entries")).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(api.status(), 401);

    // What `memfold apply --groups` writes on a copy of the root, the form writes here.
    let copy = fixture.dir.path().join("copy");
    assert!(std::process::Command::new("cp").arg("-a").arg(fixture.root()).arg(&copy).status().unwrap().success());
    let cli = run(&copy, &["apply", &plan, "--groups", &group]);
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    let applied =
        post(&daemon, &format!("/ui/plans/{plan}/decide"), Some(&cookie), &with, &[("origin", &daemon.base)]).await;
    assert_eq!(applied.status, 303, "{}", applied.body);
    let to = applied.headers[LOCATION].to_str().unwrap().to_string();
    assert!(to.starts_with("/ui/runs?done=applied"), "{to}");
    let after = memory_md(&fixture.root());
    assert_eq!(after, memory_md(&copy), "the form and the CLI write the same memory.md");
    assert!(String::from_utf8_lossy(&after).contains("cello") && !String::from_utf8_lossy(&after).contains("bees"));
    let runs = get(&daemon, &to, Some(&cookie)).await;
    assert!(
        runs.body.contains(r#"role="status""#) && runs.body.contains(&format!("Applied as run {plan}")),
        "{}",
        runs.body
    );

    // Undo from the page: memory.md as it was before the apply, byte for byte.
    let token = csrf(&runs.body);
    let undone = post(&daemon, &format!("/ui/runs/{plan}/undo"), Some(&cookie), &[("csrf", &token)], &[]).await;
    assert_eq!(undone.status, 303, "{}", undone.body);
    assert_eq!(memory_md(&fixture.root()), before);
    let again = post(&daemon, &format!("/ui/runs/{plan}/undo"), Some(&cookie), &[("csrf", &token)], &[]).await;
    assert_eq!(again.status, 409, "undoing twice shows the conflict");
    assert!(again.body.contains(r#"role="alert""#), "{}", again.body);

    // Browsing search finds the fact and leaves the recall log alone.
    let recall = fixture.root().join(".memfold/recall.jsonl");
    let recall_before = std::fs::read(&recall).unwrap_or_default();
    let found = get(&daemon, "/ui/search?q=bees%20on%20the%20roof", Some(&cookie)).await;
    assert_eq!(found.status, 200);
    assert!(found.body.contains(&ids[0]), "{}", found.body);
    assert_eq!(std::fs::read(&recall).unwrap_or_default(), recall_before, "the recall log is untouched");
    let fact = get(&daemon, &format!("/ui/facts/{}", ids[0]), Some(&cookie)).await;
    assert!(fact.status == 200 && fact.body.contains("Pending"), "{}", fact.body);
    assert_eq!(verify(&fixture.root())["ok"], true);
}

/// Pin, unpin and forget from an entry's page; forget asks first, on a page of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_can_be_pinned_and_forgotten_from_its_page() {
    let fixture = Fixture::new();
    let daemon = fixture.serve(&[]).await; // auto mode, offline decider
    daemon.add(&["Keeps bees on the roof of the garage"]).await;
    let (code, report) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{report}");
    let (_, entries) = daemon.get("/entries").await;
    let id = entries["entries"][0]["id"].as_str().unwrap().to_string();
    let cookie = sign_in(&fixture, &daemon).await;

    let page = get(&daemon, &format!("/ui/entries/{id}"), Some(&cookie)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Keeps bees on the roof"), "{}", page.body);
    let token = csrf(&page.body);
    let pinned = post(&daemon, &format!("/ui/entries/{id}/pin"), Some(&cookie), &[("csrf", &token)], &[]).await;
    assert_eq!(pinned.status, 303);
    let (_, entry) = daemon.get(&format!("/entries/{id}")).await;
    assert_eq!(entry["pinned"], true, "{entry}");
    let unpinned = post(&daemon, &format!("/ui/entries/{id}/unpin"), Some(&cookie), &[("csrf", &token)], &[]).await;
    assert_eq!(unpinned.status, 303);

    let confirm = get(&daemon, &format!("/ui/entries/{id}/forget"), Some(&cookie)).await;
    assert!(confirm.body.contains("Forget it"), "{}", confirm.body);
    let memory_before = memory_md(&fixture.root());
    let forgot = post(&daemon, &format!("/ui/entries/{id}/forget"), Some(&cookie), &[("reason", "test")], &[]).await;
    assert_eq!(forgot.status, 403, "no CSRF field, no forgetting");
    assert_eq!(memory_md(&fixture.root()), memory_before);
    let forgot =
        post(&daemon, &format!("/ui/entries/{id}/forget"), Some(&cookie), &[("csrf", &token), ("reason", "test")], &[])
            .await;
    assert_eq!(forgot.status, 303);
    let (_, entries) = daemon.get("/entries").await;
    assert_eq!(entries["entries"], json!([]), "{entries}");
    assert_eq!(verify(&fixture.root())["ok"], true);
}

/// An entry's page merges and supersedes; a run's page undoes one op of a run and then the
/// rest; the notes written in the forms are shown; `verify` holds after each step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_are_merged_and_superseded_and_one_op_undone_from_the_pages() {
    let fixture = Fixture::new();
    let daemon = fixture.serve(&[]).await; // auto mode, offline decider
    daemon
        .add(&[
            "Keeps bees on the roof of the garage",
            "Plays the cello on Sunday mornings",
            "Drives a green van to work",
        ])
        .await;
    let (code, report) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{report}");
    let (_, entries) = daemon.get("/entries").await;
    let id = |word: &str| -> String {
        let list = entries["entries"].as_array().unwrap();
        let e = list.iter().find(|e| e["content"].as_str().unwrap().contains(word)).unwrap();
        e["id"].as_str().unwrap().to_string()
    };
    let (bees, cello, van) = (id("bees"), id("cello"), id("van"));
    let cookie = sign_in(&fixture, &daemon).await;
    let page = get(&daemon, &format!("/ui/entries/{bees}"), Some(&cookie)).await;
    assert!(
        page.body.contains("Merge with other entries") && page.body.contains("Supersede this entry"),
        "{}",
        page.body
    );
    let token = csrf(&page.body);

    // Merge without the CSRF field: refused, nothing written.
    let before = memory_md(&fixture.root());
    let path = format!("/ui/entries/{bees}/merge");
    let refused = post(&daemon, &path, Some(&cookie), &[("with", &cello)], &[]).await;
    assert_eq!(refused.status, 403);
    assert_eq!(memory_md(&fixture.root()), before);
    // An unknown id: the entry's page again, naming it, under 4xx.
    let unknown = post(&daemon, &path, Some(&cookie), &[("csrf", &token), ("with", "m-nothere")], &[]).await;
    assert!((400..500).contains(&unknown.status), "{}", unknown.status);
    assert!(unknown.body.contains("m-nothere"), "{}", unknown.body);
    let text = "Keeps bees on the garage roof and plays the cello on Sunday mornings";
    let form = [("csrf", token.as_str()), ("with", cello.as_str()), ("text", text), ("note", "one hobby line")];
    let merged = post(&daemon, &path, Some(&cookie), &form, &[]).await;
    assert_eq!(merged.status, 303, "{}", merged.body);
    let location = merged.headers[LOCATION].to_str().unwrap().to_string();
    assert!(location.contains("done=merged"), "{location}");
    let shown = get(&daemon, &location, Some(&cookie)).await;
    assert!(shown.body.contains("Merged as run") && shown.body.contains(text), "{}", shown.body);
    assert_eq!(verify(&fixture.root())["ok"], true);
    assert!(location.starts_with(&format!("/ui/entries/{bees}?")), "the survivor keeps its id: {location}");

    // Supersede the van by a text.
    let path = format!("/ui/entries/{van}/supersede");
    let both = post(&daemon, &path, Some(&cookie), &[("csrf", &token), ("with", &bees), ("text", "x")], &[]).await;
    assert_eq!(both.status, 400, "an entry or a text, not both");
    let form = [("csrf", token.as_str()), ("text", "Drives a blue van to work"), ("note", "repainted")];
    let superseded = post(&daemon, &path, Some(&cookie), &form, &[]).await;
    assert_eq!(superseded.status, 303, "{}", superseded.body);
    assert_eq!(verify(&fixture.root())["ok"], true);

    // The runs list shows the notes and links each run's page.
    let runs = get(&daemon, "/ui/runs", Some(&cookie)).await;
    assert!(runs.body.contains("one hobby line") && runs.body.contains("repainted"), "{}", runs.body);
    let (_, listed) = daemon.get("/runs").await;
    let merge_run =
        listed["runs"].as_array().unwrap().iter().find(|r| r["verb"] == "merge").unwrap_or_else(|| panic!("{listed}"))
            ["run"]
            .as_str()
            .unwrap()
            .to_string();
    assert!(runs.body.contains(&format!("/ui/runs/{merge_run}\"")), "{}", runs.body);

    // The merge's page lists its ops; undoing the first of them alone (with a note).
    let run_page = get(&daemon, &format!("/ui/runs/{merge_run}"), Some(&cookie)).await;
    assert_eq!(run_page.status, 200, "{}", run_page.body);
    assert!(run_page.body.contains(r#"name="op" value="1""#), "{}", run_page.body);
    let memory_after_merge = memory_md(&fixture.root());
    // The merge's ops change the same entries together: one of them alone is refused (the
    // REPLACE, and a REMOVE), the page says why and names the group.
    for op in ["1", "2"] {
        let form = [("csrf", token.as_str()), ("from", "run"), ("op", op), ("note", "wrong call")];
        let one = post(&daemon, &format!("/ui/runs/{merge_run}/undo"), Some(&cookie), &form, &[]).await;
        assert_eq!(one.status, 409, "{}", one.body);
        assert!(one.body.contains(&bees) && one.body.contains("--group 1"), "{}", one.body);
        assert_eq!(memory_md(&fixture.root()), memory_after_merge);
    }
    let form = [("csrf", token.as_str()), ("from", "run"), ("group", "1"), ("note", "wrong call")];
    let group = post(&daemon, &format!("/ui/runs/{merge_run}/undo"), Some(&cookie), &form, &[]).await;
    assert_eq!(group.status, 303, "{}", group.body);
    assert_ne!(memory_md(&fixture.root()), memory_after_merge);
    assert_eq!(verify(&fixture.root())["ok"], true);
    let (_, entries) = daemon.get("/entries").await;
    let texts: Vec<&str> =
        entries["entries"].as_array().unwrap().iter().map(|e| e["content"].as_str().unwrap()).collect();
    assert!(texts.contains(&"Keeps bees on the roof of the garage"), "{texts:?}");
    assert!(texts.contains(&"Plays the cello on Sunday mornings"), "{texts:?}");
    assert!(texts.contains(&"Drives a blue van to work"), "the later supersession stays: {texts:?}");
    let runs = get(&daemon, "/ui/runs", Some(&cookie)).await;
    assert!(runs.body.contains("wrong call"), "{}", runs.body);
}

/// A large plan is decided from any of its pages: every group has its row and checkbox on each
/// page, a window of groups is shown in full, and the whole diff has a page of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_plan_shows_every_group_in_the_form_and_some_in_full() {
    let fixture = Fixture::new();
    let daemon = fixture.serve(&[("MEMFOLD_CONSOLIDATION__MODE", "review")]).await; // offline decider
    let facts: Vec<String> = (0..11).map(|i| format!("Visited lighthouse number {i} on the coast")).collect();
    daemon.add(&facts.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let (code, report) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{report}");
    let plan = report["plans"][0].as_str().unwrap().to_string();
    let (_, detail) = daemon.get(&format!("/plans/{plan}")).await;
    let groups = detail["groups"].as_array().unwrap().len();
    assert!(groups > 8, "{detail}");
    let cookie = sign_in(&fixture, &daemon).await;

    let first = get(&daemon, &format!("/ui/plans/{plan}"), Some(&cookie)).await;
    assert_eq!(first.body.matches(r#"name="group" value=""#).count(), groups, "a checkbox per group");
    assert_eq!(first.body.matches("<section ").count(), 8, "8 groups in full");
    assert!(first.body.contains(&format!(r#"href="/ui/plans/{plan}?from=9""#)), "{}", first.body);
    assert!(first.body.contains(&format!(r#"href="/ui/plans/{plan}?from=9#g9""#)), "a row links its group");
    let rest = get(&daemon, &format!("/ui/plans/{plan}?from=9"), Some(&cookie)).await;
    assert_eq!(rest.body.matches("<section ").count(), groups - 8);
    assert!(rest.body.contains(r#"<h2 id="g9">"#) && !rest.body.contains(r#"<h2 id="g1">"#));
    let far = get(&daemon, &format!("/ui/plans/{plan}?from=999"), Some(&cookie)).await;
    assert_eq!(far.body.matches("<section ").count(), groups - 8, "past the end: the last page");
    let diff = get(&daemon, &format!("/ui/plans/{plan}/diff"), Some(&cookie)).await;
    assert!(diff.status == 200 && diff.body.contains("+++ b/consolidated/memory.md"), "{}", diff.body);

    // Checking one group on the first page and applying it rejects the others, shown or not.
    let token = csrf(&first.body);
    let form = [("csrf", token.as_str()), ("action", "checked"), ("group", "10")];
    let applied = post(&daemon, &format!("/ui/plans/{plan}/decide"), Some(&cookie), &form, &[]).await;
    assert_eq!(applied.status, 303, "{}", applied.body);
    let memory = String::from_utf8(memory_md(&fixture.root())).unwrap();
    let added: Vec<&String> = facts.iter().filter(|f| memory.contains(f.as_str())).collect();
    assert_eq!(added.len(), 1, "{memory}");
    assert_eq!(verify(&fixture.root())["ok"], true);
}

/// A credential let in under `allow` is masked on every page unless the person asks to see it
/// on the entry's own page; a credential typed into a form's note or reason is held to the
/// policy like any other text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_secret_is_masked_on_the_pages_unless_asked_for() {
    let fixture = Fixture::new();
    let secret = "Kestrel#2026";
    let daemon = fixture.serve(&[("MEMFOLD_INGEST__SECRETS", "allow")]).await;
    daemon.add(&[&format!("The router admin password is {secret}"), "Keeps bees on the roof of the garage"]).await;
    let (code, report) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{report}");
    let (_, entries) = daemon.get("/entries").await;
    let id = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["content"].as_str().unwrap().contains("router"))
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let cookie = sign_in(&fixture, &daemon).await;
    for path in [format!("/ui/entries/{id}"), "/ui/search?q=router+admin+password".to_string()] {
        let page = get(&daemon, &path, Some(&cookie)).await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.body.contains("[secret: password]") && !page.body.contains(secret), "{path}: {}", page.body);
    }
    let page = get(&daemon, &format!("/ui/entries/{id}?reveal=true"), Some(&cookie)).await;
    assert!(page.body.contains(secret), "asked for, shown: {}", page.body);
    daemon.stop().await;

    // The default policy: a reason typed into the forget form is redacted before it is kept.
    let daemon = fixture.serve(&[]).await;
    let cookie = sign_in(&fixture, &daemon).await;
    let (_, entries) = daemon.get("/entries").await;
    let other = entries["entries"].as_array().unwrap().iter().find(|e| e["id"] != id.as_str()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let token = csrf(&get(&daemon, &format!("/ui/entries/{other}"), Some(&cookie)).await.body);
    let reason = "the hive password is Honeycomb-77x";
    let forgot = post(
        &daemon,
        &format!("/ui/entries/{other}/forget"),
        Some(&cookie),
        &[("csrf", &token), ("reason", reason)],
        &[],
    )
    .await;
    assert_eq!(forgot.status, 303, "{}", forgot.body);
    daemon.stop().await;
    let tombstones = std::fs::read_to_string(fixture.root().join(".memfold/tombstones.jsonl")).unwrap();
    assert!(tombstones.contains("[secret: password]") && !tombstones.contains("Honeycomb-77x"), "{tombstones}");
}

/// The names memory speaks of have pages: the list of names, a page per name with its entries,
/// an entry's page linking to the names it speaks of and to its related entries, and the inbox
/// counting related, named and stale entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_has_a_page_linked_from_its_entries() {
    let fixture = Fixture::new();
    let daemon = fixture.serve(&[]).await; // offline decider: it links a shared name
    daemon.add(&["Has a dog named Rex."]).await;
    let (code, report) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{report}");
    daemon.add(&["Walks Rex every morning before work."]).await;
    let (code, report) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{report}");
    let (_, entries) = daemon.get("/entries").await;
    let id_of = |words: &str| {
        entries["entries"].as_array().unwrap().iter().find(|e| e["content"].as_str().unwrap().contains(words)).unwrap()
            ["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (dog, walks) = (id_of("named Rex"), id_of("Walks Rex"));
    let cookie = sign_in(&fixture, &daemon).await;

    let names = get(&daemon, "/ui/about", Some(&cookie)).await;
    assert_eq!(names.status, 200, "{}", names.body);
    assert!(names.body.contains("href=\"/ui/about/Rex\">Rex</a></td><td>2</td>"), "{}", names.body);
    let rex = get(&daemon, "/ui/about/Rex", Some(&cookie)).await;
    assert!(
        rex.body.contains(&format!("/ui/entries/{dog}")) && rex.body.contains(&format!("/ui/entries/{walks}")),
        "{}",
        rex.body
    );
    let entry = get(&daemon, &format!("/ui/entries/{walks}"), Some(&cookie)).await;
    assert!(entry.body.contains("Names: <a href=\"/ui/about/Rex\">Rex</a>"), "{}", entry.body);
    assert!(
        entry.body.contains(&format!("Related: <a href=\"/ui/entries/{dog}\">{dog}</a> (shares Rex)")),
        "{}",
        entry.body
    );
    let inbox = get(&daemon, "/ui", Some(&cookie)).await;
    assert!(inbox.body.contains("2 linked to related entries, 2 naming someone or something"), "{}", inbox.body);
    assert!(inbox.body.contains("0 unused for long"), "{}", inbox.body);
    let (_, status) = daemon.get("/status").await;
    assert_eq!((status["related_entries"].as_u64(), status["named_entries"].as_u64()), (Some(2), Some(2)), "{status}");
    daemon.stop().await;
}
