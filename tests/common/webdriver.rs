//! A small W3C WebDriver client over reqwest: enough of the protocol to drive Debian's chromium
//! through its chromedriver in the browser test (sessions, navigation, elements, clicks, keys,
//! scripts, cookies, screenshots). The protocol is plain JSON over HTTP; fantoccini, the client
//! crate, would bring hyper's legacy client, the mozilla webdriver crate and a second ICU stack
//! (19 crates) for the twenty calls used here.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

/// The key WebDriver's element references are kept under.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// WebDriver's code for the Tab key.
pub const TAB: &str = "\u{E004}";

/// A running chromedriver; killed on drop.
pub struct Driver {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    /// Start `chromedriver` on a loopback port it chooses (it says which on stdout) and wait
    /// until it is ready.
    pub async fn start(chromedriver: &Path) -> Driver {
        let mut child = Command::new(chromedriver)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", chromedriver.display()));
        let stdout = child.stdout.take().expect("piped");
        let port = tokio::task::spawn_blocking(move || {
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(stdout).lines();
            let port = lines.by_ref().map_while(Result::ok).find_map(|line| {
                line.split_once("started successfully on port ")
                    .and_then(|(_, rest)| rest.trim_end_matches('.').trim().parse::<u16>().ok())
            });
            // Keep reading, so chromedriver never blocks on a full pipe.
            std::thread::spawn(move || lines.for_each(drop));
            port
        })
        .await
        .unwrap()
        .expect("chromedriver says which port it listens on");
        let driver = Driver { child, base: format!("http://127.0.0.1:{port}"), client: reqwest::Client::new() };
        let started = Instant::now();
        loop {
            if let Ok(r) = driver.client.get(format!("{}/status", driver.base)).send().await
                && let Ok(status) = r.json::<Value>().await
                && status["value"]["ready"] == true
            {
                return driver;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "chromedriver did not get ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A new headless browser window, with JavaScript on or off.
    pub async fn browser(&self, javascript: bool) -> Browser {
        let mut args = vec!["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"];
        if !javascript {
            args.push("--blink-settings=scriptEnabled=false");
        }
        let binary = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].into_iter().find(|p| Path::new(p).exists());
        let mut options = json!({ "args": args });
        if let Some(binary) = binary {
            options["binary"] = json!(binary);
        }
        let capabilities =
            json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}});
        let reply =
            call(&self.client, reqwest::Method::POST, &format!("{}/session", self.base), Some(capabilities)).await;
        let id = reply["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {reply}"));
        Browser { session: format!("{}/session/{id}", self.base), client: self.client.clone() }
    }
}

/// One WebDriver command; the `value` of the reply, or a panic naming the error.
async fn call(client: &reqwest::Client, method: reqwest::Method, url: &str, body: Option<Value>) -> Value {
    let mut request = client.request(method.clone(), url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = response.status();
    let reply: Value = response.json().await.unwrap_or_else(|e| panic!("{method} {url}: not JSON: {e}"));
    assert!(status.is_success(), "{method} {url}: {status}: {}", reply["value"]);
    reply["value"].clone()
}

/// An element reference of the current page.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Element(pub String);

/// One browser session.
pub struct Browser {
    session: String,
    client: reqwest::Client,
}

impl Browser {
    async fn get(&self, path: &str) -> Value {
        call(&self.client, reqwest::Method::GET, &format!("{}{path}", self.session), None).await
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        call(&self.client, reqwest::Method::POST, &format!("{}{path}", self.session), Some(body)).await
    }

    pub async fn goto(&self, url: &str) {
        self.post("/url", json!({ "url": url })).await;
    }

    /// The address the window shows.
    pub async fn url(&self) -> String {
        self.get("/url").await.as_str().unwrap().to_string()
    }

    pub async fn title(&self) -> String {
        self.get("/title").await.as_str().unwrap().to_string()
    }

    /// The page's HTML as the browser holds it.
    pub async fn source(&self) -> String {
        self.get("/source").await.as_str().unwrap().to_string()
    }

    /// Every element matching a CSS selector, in document order.
    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        let found = self.post("/elements", json!({"using": "css selector", "value": css})).await;
        let list = found.as_array().unwrap_or_else(|| panic!("elements {css}: {found}"));
        list.iter()
            .map(|e| Element(e[ELEMENT].as_str().unwrap_or_else(|| panic!("element: {e}")).to_string()))
            .collect()
    }

    /// The first element matching a CSS selector.
    pub async fn find(&self, css: &str) -> Element {
        self.find_all(css).await.into_iter().next().unwrap_or_else(|| panic!("nothing matches {css}"))
    }

    pub async fn click(&self, element: &Element) {
        self.post(&format!("/element/{}/click", element.0), json!({})).await;
    }

    /// Click an element that leaves the page (a link, a submit button) and wait until the
    /// browser has left it: the element goes stale once the next page has replaced this one.
    pub async fn click_away(&self, element: &Element) {
        self.click(element).await;
        let url = format!("{}/element/{}/property/tagName", self.session, element.0);
        let started = Instant::now();
        while self.client.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
            assert!(started.elapsed() < Duration::from_secs(20), "the page did not change after the click");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The element's rendered text.
    pub async fn text(&self, element: &Element) -> String {
        self.get(&format!("/element/{}/text", element.0)).await.as_str().unwrap_or_default().to_string()
    }

    /// A DOM property (`checked`, `tagName`, …).
    pub async fn property(&self, element: &Element, name: &str) -> Value {
        self.get(&format!("/element/{}/property/{name}", element.0)).await
    }

    /// The computed value of a CSS property.
    pub async fn css(&self, element: &Element, name: &str) -> String {
        self.get(&format!("/element/{}/css/{name}", element.0)).await.as_str().unwrap_or_default().to_string()
    }

    /// Type into an element.
    pub async fn type_into(&self, element: &Element, text: &str) {
        self.post(&format!("/element/{}/value", element.0), json!({ "text": text })).await;
    }

    /// The element that has the focus.
    pub async fn active(&self) -> Element {
        let active = self.get("/element/active").await;
        Element(active[ELEMENT].as_str().unwrap().to_string())
    }

    /// Press and release one key, as a person would.
    pub async fn press(&self, key: &str) {
        let actions = json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
            {"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]}]});
        self.post("/actions", actions).await;
    }

    /// Run a script in the page (JavaScript on only); its return value.
    pub async fn script(&self, js: &str) -> Value {
        self.post("/execute/sync", json!({"script": js, "args": []})).await
    }

    pub async fn cookies(&self) -> Vec<Value> {
        self.get("/cookie").await.as_array().unwrap().clone()
    }

    /// Save a PNG of the window.
    pub async fn screenshot(&self, path: &Path) {
        let png = self.get("/screenshot").await;
        let bytes = base64::engine::general_purpose::STANDARD.decode(png.as_str().unwrap()).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    pub async fn quit(self) {
        call(&self.client, reqwest::Method::DELETE, &self.session, None).await;
    }
}
