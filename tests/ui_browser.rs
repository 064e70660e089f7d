//! The review page in a real browser: Debian's chromium, headless, driven through chromedriver.
//! Signs in with `memfold ui`'s address, applies one group of a plan, undoes the run (checking
//! `memory.md` on disk after each step), does it again with JavaScript off, reaches every button
//! with the Tab key, and shows that a page of another loopback port cannot post a decision.
//! Screenshots of the inbox and of a plan are kept under the target directory.
//!
//! Runs when chromedriver is installed (`MEMFOLD_TEST_CHROMEDRIVER`, else `chromedriver` on
//! the PATH); `.ci/run` installs `chromium` and `chromium-driver`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::daemon::{Daemon, Fixture, eventually, run, verify};
use crate::common::webdriver::{Browser, Driver, TAB};

fn chromedriver() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MEMFOLD_TEST_CHROMEDRIVER") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("chromedriver")).find(|p| p.is_file())
}

fn memory_md(root: &Path) -> String {
    std::fs::read_to_string(root.join("consolidated/memory.md")).unwrap()
}

/// Where the screenshots are kept for a person to look at.
fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-browser")
}

/// Sign in through `memfold ui`'s one-time address: the page shows a button, the click signs in
/// and lands on the inbox, the address no longer holds the code, scripts cannot read the
/// session cookie, and the address does not sign in twice.
async fn sign_in(browser: &Browser, fixture: &Fixture, daemon: &Daemon, javascript: bool) {
    let out = run(&fixture.root(), &["ui", "--bind", &daemon.host()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let address = String::from_utf8(out.stdout).unwrap().trim().to_string();
    browser.goto(&address).await;
    let button = browser.find("form[action='/ui/login'] button").await;
    browser.click_away(&button).await;
    assert_eq!(
        browser.url().await,
        daemon.url("/ui"),
        "signed in, on the inbox: {}\n{}",
        browser.source().await,
        daemon.logs()
    );
    assert_eq!(browser.title().await, "Inbox · memfold");
    let session = format!("memfold-{}", daemon.port);
    let cookies = browser.cookies().await;
    let cookie = cookies.iter().find(|c| c["name"] == session.as_str()).unwrap_or_else(|| panic!("{cookies:?}"));
    assert_eq!((&cookie["httpOnly"], &cookie["sameSite"]), (&json!(true), &json!("Strict")), "{cookie}");
    if javascript {
        assert_eq!(browser.script("return document.cookie").await, json!(""), "scripts cannot read the session");
    }
    // The address is used up; the session stays.
    browser.goto(&address).await;
    let button = browser.find("form[action='/ui/login'] button").await;
    browser.click_away(&button).await;
    assert!(browser.source().await.contains("role=\"alert\""), "a code signs in once:\n{}", browser.source().await);
    browser.goto(&daemon.url("/ui")).await;
    assert_eq!(browser.title().await, "Inbox · memfold");
}

/// On a plan's page, uncheck every group but the one holding `fact`, apply, and come back to
/// the runs page.
async fn apply_one_group(browser: &Browser, daemon: &Daemon, plan: &str, fact: &str) {
    browser.goto(&daemon.url(&format!("/ui/plans/{plan}"))).await;
    let groups = browser.find_all("section[aria-labelledby^='g']").await;
    assert_eq!(groups.len(), 2, "a group per fact");
    for n in 1..=groups.len() {
        let section = browser.find(&format!("section[aria-labelledby='g{n}']")).await;
        let holds = browser.text(&section).await.contains(fact);
        let checkbox = browser.find(&format!("#pick{n}")).await;
        if browser.property(&checkbox, "checked").await != json!(holds) {
            browser.click(&checkbox).await;
        }
    }
    let apply = browser.find("button[value='checked']").await;
    browser.click_away(&apply).await;
    let url = browser.url().await;
    assert!(url.starts_with(&daemon.url("/ui/runs?done=applied")), "{url}\n{}", browser.source().await);
}

/// Undo the run `plan` from the runs page.
async fn undo(browser: &Browser, daemon: &Daemon, plan: &str) {
    browser.goto(&daemon.url("/ui/runs")).await;
    let button = browser.find(&format!("form[action='/ui/runs/{plan}/undo'] button")).await;
    browser.click_away(&button).await;
    assert!(browser.source().await.contains("role=\"status\""), "the page says what it did");
}

/// A stored plan from a forced pass over the pending facts.
async fn plan(daemon: &Daemon) -> String {
    let (code, report) = daemon.post("/consolidate", json!({"force": true})).await;
    assert_eq!(code, 200, "{report}");
    report["plans"][0].as_str().unwrap_or_else(|| panic!("no plan: {report}")).to_string()
}

/// Serve one page on another loopback port: a form that posts "apply all" to `target` as soon as
/// it loads, as a hostile page would.
async fn hostile_page(target: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/", listener.local_addr().unwrap());
    let page = format!(
        "<!doctype html><form id=f method=post action=\"{target}\"><input name=csrf value=guess>\
         <input name=action value=all></form><script>document.getElementById('f').submit()</script>"
    );
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut head = [0u8; 4096];
            let _ = socket.read(&mut head).await;
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = socket.write_all(reply.as_bytes()).await;
        }
    });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_applies_a_group_and_undoes_it_in_chromium_with_and_without_javascript() {
    let Some(chromedriver) = chromedriver() else {
        memfold::testkit::skip("chromedriver is not installed (apt-get install chromium chromium-driver)");
        return;
    };
    let fixture = Fixture::new();
    let daemon = fixture.serve(&[("MEMFOLD_CONSOLIDATION__MODE", "review")]).await; // offline decider
    let hostile = "Keeps bees <img src=x onerror=window.__pwned=1> on the roof";
    daemon.add(&[hostile, "Plays the cello on Sunday mornings"]).await;
    let first = plan(&daemon).await;
    let driver = Driver::start(&chromedriver).await;

    // JavaScript on.
    let browser = driver.browser(true).await;
    sign_in(&browser, &fixture, &daemon, true).await;
    let (_, plans) = daemon.get("/plans").await;
    let pending = plans["plans"].as_array().unwrap().iter().filter(|p| p["status"] == "pending").count();
    assert_eq!(browser.find_all("a[href^='/ui/plans/']").await.len(), pending, "the inbox lists every pending plan");
    browser.screenshot(&screenshots().join("inbox.png")).await;

    browser.goto(&daemon.url(&format!("/ui/plans/{first}"))).await;
    let main = browser.text(&browser.find("main").await).await;
    assert!(main.contains(hostile), "hostile text is shown as text:\n{main}");
    assert!(browser.find_all("main img").await.is_empty(), "and makes no element");
    assert_eq!(browser.script("return typeof window.__pwned").await, json!("undefined"));
    browser.screenshot(&screenshots().join("plan.png")).await;

    // Tab reaches every button and checkbox of the plan page, and the focus is visible.
    let controls: BTreeSet<_> = browser.find_all("main button, main input[type=checkbox]").await.into_iter().collect();
    let mut reached = BTreeSet::new();
    for _ in 0..3 * browser.find_all("a[href], button, input").await.len() {
        browser.press(TAB).await;
        let focused = browser.active().await;
        if controls.contains(&focused) {
            assert_ne!(browser.css(&focused, "outline-style").await, "none", "the focus is visible");
            reached.insert(focused);
        }
    }
    assert_eq!(reached, controls, "every control is reached by keyboard");

    // A page of another loopback port posts a decision: refused, nothing written.
    let before = memory_md(&fixture.root());
    let hostile_site = hostile_page(daemon.url(&format!("/ui/plans/{first}/decide"))).await;
    browser.goto(&hostile_site).await;
    eventually(Duration::from_secs(10), "the hostile form posts", async || {
        browser.url().await.contains("/decide").then_some(())
    })
    .await;
    assert!(browser.source().await.contains("refused"), "{}", browser.source().await);
    assert_eq!(memory_md(&fixture.root()), before, "nothing written");

    // Apply the cello group only, then undo the run.
    apply_one_group(&browser, &daemon, &first, "cello").await;
    let applied = memory_md(&fixture.root());
    assert!(applied.contains("Plays the cello") && !applied.contains("Keeps bees"), "{applied}");
    let (_, fact) = daemon.get("/plans").await;
    assert!(fact["plans"].as_array().unwrap().iter().all(|p| p["status"] != "pending"), "the rest was rejected");
    undo(&browser, &daemon, &first).await;
    assert_eq!(memory_md(&fixture.root()), before, "undone byte for byte");

    // Search from the form finds the fact.
    browser.goto(&daemon.url("/ui/search")).await;
    browser.type_into(&browser.find("#q").await, "cello sunday").await;
    browser.click_away(&browser.find("form[role=search] button").await).await;
    assert!(browser.text(&browser.find("main ol").await).await.contains("Plays the cello"));
    browser.quit().await;

    // JavaScript off: the same apply and undo work as plain forms.
    let second = plan(&daemon).await;
    let browser = driver.browser(false).await;
    browser.goto("data:text/html,<title>none</title><script>document.title='ran'</script>").await;
    assert_eq!(browser.title().await, "none", "this window runs no script");
    sign_in(&browser, &fixture, &daemon, false).await;
    apply_one_group(&browser, &daemon, &second, "cello").await;
    let applied = memory_md(&fixture.root());
    assert!(applied.contains("Plays the cello") && !applied.contains("Keeps bees"), "{applied}");
    // The entry's page shows it and its history.
    let (_, entries) = daemon.get("/entries").await;
    let id = entries["entries"][0]["id"].as_str().unwrap().to_string();
    browser.goto(&daemon.url(&format!("/ui/entries/{id}"))).await;
    assert!(browser.text(&browser.find("main").await).await.contains("Plays the cello on Sunday mornings"));
    undo(&browser, &daemon, &second).await;
    assert_eq!(memory_md(&fixture.root()), before, "undone byte for byte");
    browser.quit().await;

    assert_eq!(verify(&fixture.root())["ok"], true);
    println!("screenshots: {}", screenshots().display());
}
