//! The OpenAI-compatible chat client used to decide clusters, extract facts and promote lines.
//!
//! The extraction call (prompt, reply schema) is in [`extract`]; the decision and promotion calls
//! live with their callers (`consolidate::decide`, `promote`).
//!
//! [`ChatClient`] sends one system and one user message to `/chat/completions` and asks for a
//! JSON object (`response_format: {"type":"json_object"}`; servers that reject that field get
//! the request again without it, and are remembered). Every reply carries its [`Usage`], from the
//! server's `usage` object or estimated at four characters per token, so a pass can account for
//! calls and tokens. [`Prompts`] holds the three system prompts, built in or overridden from
//! `llm.prompts_dir`, and [`parse_json_reply`] reads a model's JSON even when it is fenced or
//! wrapped in prose.

pub mod extract;
pub mod keys;
pub mod merge;

use memfold_store::egress::Purpose;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::endpoint::{Endpoint, HttpError};
use memfold_store::config::{LlmConfig, expand_tilde};

/// Errors from the chat client and prompt loading.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The server answered 2xx without an assistant message.
    #[error("chat reply from {url} is malformed: {message}")]
    BadReply { url: String, message: String },
    /// The model's content was not the expected JSON, also after being re-asked with the error.
    #[error("chat reply from {url} is not the expected JSON after a retry: {message}")]
    Unparseable { url: String, message: String, usage: Usage },
    #[error("reading prompt {path}: {source}")]
    PromptRead { path: PathBuf, source: std::io::Error },
    #[error("prompt {path} is empty")]
    PromptEmpty { path: PathBuf },
}

impl LlmError {
    /// Whether the endpoint was out of reach or overloaded (try again later), as opposed to a
    /// reply that could not be used.
    pub fn is_unavailable(&self) -> bool {
        match self {
            LlmError::Http(HttpError::Unreachable { .. }) => true,
            LlmError::Http(HttpError::Status { status, .. }) => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

/// Calls and tokens spent, summed per pass with [`Usage::add`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.calls += other.calls;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

/// Token estimate used when a server reports no usage: characters / 4, rounded up.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// The assistant's message and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    pub content: String,
    pub usage: Usage,
}

/// A chat model behind an OpenAI-compatible endpoint. Clones share the learned
/// `response_format` support.
#[derive(Debug, Clone)]
pub struct ChatClient {
    endpoint: Endpoint,
    model: String,
    temperature: f32,
    max_tokens: u32,
    /// Cleared once the server rejects `response_format`.
    json_mode: Arc<AtomicBool>,
    /// Where the requests are recorded (a root's `.memfold/egress.jsonl`).
    egress: Option<memfold_store::egress::Egress>,
}

const CHAT_PATH: &str = "/chat/completions";

impl ChatClient {
    /// The client for `cfg`, or `None` when no `base_url` is configured (offline decider).
    pub fn from_config(cfg: &LlmConfig) -> Result<Option<ChatClient>, LlmError> {
        if !cfg.enabled() {
            return Ok(None);
        }
        let timeout = Duration::from_secs(cfg.timeout_secs.max(1));
        let endpoint = Endpoint::new("chat", &cfg.base_url, &cfg.api_key_env, timeout, cfg.max_retries)?;
        Ok(Some(ChatClient {
            endpoint,
            model: cfg.model.clone(),
            temperature: cfg.temperature,
            max_tokens: cfg.max_tokens,
            json_mode: Arc::new(AtomicBool::new(true)),
            egress: None,
        }))
    }

    /// Replace the retry backoff schedule (see [`Endpoint::with_backoff`]).
    pub fn with_backoff(mut self, base: Duration, cap: Duration) -> ChatClient {
        self.endpoint = self.endpoint.with_backoff(base, cap);
        self
    }

    /// This client, recording every request it sends in `egress`.
    pub fn with_egress(&self, egress: memfold_store::egress::Egress) -> ChatClient {
        ChatClient { egress: Some(egress), ..self.clone() }
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The endpoint's base URL, for messages.
    pub fn base_url(&self) -> &str {
        self.endpoint.base_url()
    }

    /// One completion asking for a JSON object; the content is returned as text, unparsed.
    /// `purpose` (`extract`, `consolidate`, `keys`, `promote`) is what the request is
    /// recorded as.
    pub async fn complete_json(&self, purpose: Purpose, system: &str, user: &str) -> Result<ChatReply, LlmError> {
        let json_mode = self.json_mode.load(Ordering::Relaxed);
        match self.complete(purpose, system, user, json_mode).await {
            Err(LlmError::Http(HttpError::Status { status: 400, body, .. }))
                if json_mode && body.contains("response_format") =>
            {
                tracing::warn!(url = %self.endpoint.base_url(), reply = %body,
                    "chat endpoint rejects response_format; asking without it from now on");
                self.json_mode.store(false, Ordering::Relaxed);
                self.complete(purpose, system, user, false).await
            }
            other => other,
        }
    }

    /// [`ChatClient::complete_json`] parsed with [`parse_json_reply`]; a reply that does not parse
    /// is asked again once, with the error appended to the user message. Usage covers both calls.
    pub async fn complete_parsed<T: DeserializeOwned>(
        &self,
        purpose: Purpose,
        system: &str,
        user: &str,
    ) -> Result<(T, Usage), LlmError> {
        let first = self.complete_json(purpose, system, user).await?;
        let mut usage = first.usage;
        let message = match parse_json_reply(&first.content) {
            Ok(value) => return Ok((value, usage)),
            Err(message) => message,
        };
        tracing::warn!(url = %self.endpoint.base_url(), error = %message, "chat reply unparseable, asking again");
        let again = format!(
            "{user}\n\nYour previous reply could not be used: {message}\n\
             Answer again with only the JSON object, nothing else."
        );
        let second = self.complete_json(purpose, system, &again).await?;
        usage.add(second.usage);
        parse_json_reply(&second.content).map(|value| (value, usage)).map_err(|message| LlmError::Unparseable {
            url: self.endpoint.url(CHAT_PATH),
            message,
            usage,
        })
    }

    /// One request. Every secret in the messages is replaced by its marker first, whatever
    /// the ingest policy let into memory (`allow`, or typed in by hand): no secret leaves
    /// the machine in a prompt.
    async fn complete(
        &self,
        purpose: Purpose,
        system: &str,
        user: &str,
        json_mode: bool,
    ) -> Result<ChatReply, LlmError> {
        let (system, masked_system) = memfold_store::secrets::redact(system);
        let (user, masked_user) = memfold_store::secrets::redact(user);
        let mut body = json!({
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        });
        if json_mode {
            body["response_format"] = json!({"type": "json_object"});
        }
        if let Some(egress) = &self.egress {
            let bytes = serde_json::to_vec(&body).expect("JSON serialises");
            egress.record(&self.endpoint.url(CHAT_PATH), purpose, &bytes, masked_system.len() + masked_user.len());
        }
        let (system, user) = (system.as_str(), user.as_str());
        let reply = self.endpoint.post_json(CHAT_PATH, &body).await?;
        let bad = |message: &str| LlmError::BadReply { url: self.endpoint.url(CHAT_PATH), message: message.into() };
        let choice = &reply["choices"][0];
        let content = choice["message"]["content"].as_str().ok_or_else(|| bad("no choices[0].message.content"))?;
        if choice["finish_reason"] == "length" {
            tracing::warn!(max_tokens = self.max_tokens, "chat reply cut off at max_tokens");
        }
        let reported = |key: &str| reply["usage"][key].as_u64();
        let usage = Usage {
            calls: 1,
            prompt_tokens: reported("prompt_tokens").unwrap_or_else(|| estimate_tokens(system) + estimate_tokens(user)),
            completion_tokens: reported("completion_tokens").unwrap_or_else(|| estimate_tokens(content)),
        };
        Ok(ChatReply { content: content.to_string(), usage })
    }
}

/// The system prompts, built in or overridden from `llm.prompts_dir`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompts {
    /// `consolidate.md`: decides one cluster.
    pub consolidate: String,
    /// `extract.md`: turns a conversation turn into facts.
    pub extract: String,
    /// `promote.md`: picks the lines of `MEMORY.md`.
    pub promote: String,
    /// `keys.md`: names what new facts are about (aspect keys).
    pub keys: String,
    /// `merge.md`: writes the text of entries a person merges.
    pub merge: String,
}

impl Default for Prompts {
    fn default() -> Self {
        Prompts {
            consolidate: include_str!("../../prompts/consolidate.md").into(),
            extract: include_str!("../../prompts/extract.md").into(),
            promote: include_str!("../../prompts/promote.md").into(),
            keys: include_str!("../../prompts/keys.md").into(),
            merge: include_str!("../../prompts/merge.md").into(),
        }
    }
}

impl Prompts {
    /// The built-in prompts, each replaced by `<prompts_dir>/<name>.md` when that file exists.
    /// An empty `prompts_dir` means built-in only; `~` is expanded, a relative path is taken from
    /// the working directory.
    pub fn load(prompts_dir: &str) -> Result<Prompts, LlmError> {
        let mut prompts = Prompts::default();
        if prompts_dir.trim().is_empty() {
            return Ok(prompts);
        }
        let dir = expand_tilde(Path::new(prompts_dir.trim()));
        if !dir.is_dir() {
            tracing::warn!(dir = %dir.display(), "llm.prompts_dir is not a directory; using built-in prompts");
            return Ok(prompts);
        }
        for (name, text) in [
            ("consolidate", &mut prompts.consolidate),
            ("extract", &mut prompts.extract),
            ("promote", &mut prompts.promote),
            ("keys", &mut prompts.keys),
            ("merge", &mut prompts.merge),
        ] {
            let path = dir.join(format!("{name}.md"));
            if !path.exists() {
                continue;
            }
            let custom =
                std::fs::read_to_string(&path).map_err(|source| LlmError::PromptRead { path: path.clone(), source })?;
            if custom.trim().is_empty() {
                return Err(LlmError::PromptEmpty { path });
            }
            tracing::info!(path = %path.display(), "using prompt override");
            *text = custom;
        }
        Ok(prompts)
    }
}

/// Parse a model's reply as `T`, tolerating ```` ```json ```` fences and prose around one JSON
/// object (the outermost `{…}` is taken). The error is one short line, fit to send back to the
/// model.
pub fn parse_json_reply<T: DeserializeOwned>(content: &str) -> Result<T, String> {
    let trimmed = content.trim();
    let mut candidates = vec![trimmed];
    if let Some(inner) = fenced(trimmed) {
        candidates.push(inner);
    }
    if let (Some(start), Some(end)) = (trimmed.find('{'), trimmed.rfind('}'))
        && start < end
    {
        candidates.push(&trimmed[start..=end]);
    }
    let mut shape_error = None;
    let mut syntax_error = None;
    for candidate in candidates {
        match serde_json::from_str::<Value>(candidate) {
            Ok(value) => match serde_json::from_value::<T>(value) {
                Ok(parsed) => return Ok(parsed),
                Err(e) => shape_error = shape_error.or(Some(e)),
            },
            Err(e) => syntax_error = syntax_error.or(Some(e)),
        }
    }
    let message = match (shape_error, syntax_error) {
        (Some(e), _) => format!("the JSON does not have the expected shape: {e}"),
        (None, _) if trimmed.is_empty() => "the reply is empty".to_string(),
        (None, _) if !trimmed.contains('{') => "the reply contains no JSON object".to_string(),
        (None, Some(e)) => format!("the reply is not valid JSON: {e}"),
        (None, None) => "the reply contains no JSON object".to_string(),
    };
    Err(shorten(&message, 300))
}

/// The text between the first ``` fence (after its language tag) and the next one.
fn fenced(text: &str) -> Option<&str> {
    let start = text.find("```")? + 3;
    let rest = &text[start..];
    let body_start = rest.find('\n').map_or(0, |i| i + 1);
    let rest = &rest[body_start..];
    let end = rest.find("```")?;
    Some(rest[..end].trim())
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{FakeOpenAi, FakeReply};

    /// A reply of the consolidation prompt's shape, cut down to what these tests parse.
    #[derive(Debug, serde::Deserialize)]
    struct OpsReply {
        ops: Vec<Op>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(tag = "op", rename_all = "UPPERCASE")]
    enum Op {
        #[allow(dead_code)]
        Add { facts: Vec<String>, content: String },
        #[allow(dead_code)]
        Duplicate { facts: Vec<String>, target: String },
    }

    fn client(fake: &FakeOpenAi) -> ChatClient {
        ChatClient::from_config(&fake.llm_config())
            .unwrap()
            .unwrap()
            .with_backoff(Duration::from_millis(5), Duration::from_millis(20))
    }

    #[test]
    fn disabled_config_gives_no_client() {
        assert!(ChatClient::from_config(&LlmConfig::default()).unwrap().is_none());
    }

    #[tokio::test]
    async fn request_carries_model_options_and_json_mode() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::Content(r#"{"ops":[]}"#.into()));
        let mut cfg = fake.llm_config();
        cfg.temperature = 0.25;
        cfg.max_tokens = 77;
        let chat = ChatClient::from_config(&cfg).unwrap().unwrap();
        let reply = chat.complete_json(Purpose::Extract, "be terse", "hello").await.unwrap();
        assert_eq!(reply.content, r#"{"ops":[]}"#);
        let request = &fake.chat_requests()[0];
        assert_eq!(request["model"], "fake-chat");
        assert_eq!(request["temperature"], 0.25);
        assert_eq!(request["max_tokens"], 77);
        assert_eq!(request["response_format"]["type"], "json_object");
        assert_eq!(request["messages"][0], json!({"role": "system", "content": "be terse"}));
        assert_eq!(request["messages"][1], json!({"role": "user", "content": "hello"}));
    }

    #[tokio::test]
    async fn server_error_then_success_is_retried() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::Status(500));
        fake.push_chat(FakeReply::Content("{}".into()));
        let reply = client(&fake).complete_json(Purpose::Extract, "s", "u").await.unwrap();
        assert_eq!(reply.content, "{}");
        assert_eq!(fake.chat_calls(), 2);
    }

    #[tokio::test]
    async fn bad_request_fails_without_retry() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::StatusMessage(400, "context length exceeded".into()));
        let err = client(&fake).complete_json(Purpose::Extract, "s", "u").await.unwrap_err();
        assert_eq!(fake.chat_calls(), 1);
        assert!(err.to_string().contains("answered 400: "), "{err}");
        assert!(err.to_string().contains(&fake.base_url()), "{err}");
    }

    #[tokio::test]
    async fn down_endpoint_is_unreachable_and_named() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut cfg = LlmConfig { base_url: format!("http://127.0.0.1:{port}/v1"), ..LlmConfig::default() };
        cfg.timeout_secs = 1;
        let started = std::time::Instant::now();
        let err = ChatClient::from_config(&cfg)
            .unwrap()
            .unwrap()
            .complete_json(Purpose::Extract, "s", "u")
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("chat endpoint {}", cfg.base_url)), "{msg}");
        assert!(msg.contains("unreachable after 4 attempts"), "{msg}");
    }

    #[tokio::test]
    async fn response_format_rejection_falls_back_once_and_is_remembered() {
        let fake = FakeOpenAi::start().await;
        fake.set_chat_handler(|body| match body.get("response_format") {
            Some(_) => FakeReply::StatusMessage(400, "Unsupported parameter: 'response_format'".into()),
            None => FakeReply::Content(r#"{"ok":true}"#.into()),
        });
        let chat = client(&fake);
        assert_eq!(chat.complete_json(Purpose::Extract, "s", "u").await.unwrap().content, r#"{"ok":true}"#);
        assert_eq!(fake.chat_calls(), 2);
        chat.clone().complete_json(Purpose::Extract, "s", "u").await.unwrap();
        assert_eq!(fake.chat_calls(), 3, "the second call goes straight without response_format");
        assert!(fake.chat_requests()[2].get("response_format").is_none());
    }

    #[tokio::test]
    async fn usage_is_read_or_estimated() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::Content("abcdefghi".into()));
        fake.push_chat(FakeReply::NoUsage("abcdefghi".into()));
        let chat = client(&fake);
        let mut total = Usage::default();
        for _ in 0..2 {
            let reply = chat.complete_json(Purpose::Extract, "12345", "1234").await.unwrap();
            assert_eq!(reply.usage, Usage { calls: 1, prompt_tokens: 3, completion_tokens: 3 });
            total.add(reply.usage);
        }
        assert_eq!(total, Usage { calls: 2, prompt_tokens: 6, completion_tokens: 6 });
        assert_eq!((fake.prompt_tokens(), fake.completion_tokens()), (6, 6));
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("ünï"), 1);
    }

    #[tokio::test]
    async fn unparseable_reply_is_asked_again_with_the_error() {
        let fake = FakeOpenAi::start().await;
        fake.push_chat(FakeReply::Content("Sure! Here you go.".into()));
        fake.push_chat(FakeReply::Content("```json\n{\"ops\":[]}\n```".into()));
        let (reply, usage): (OpsReply, Usage) =
            client(&fake).complete_parsed(Purpose::Extract, "s", "cluster").await.unwrap();
        assert!(reply.ops.is_empty());
        assert_eq!(usage.calls, 2);
        let second = fake.chat_requests()[1]["messages"][1]["content"].as_str().unwrap().to_string();
        assert!(second.starts_with("cluster\n\nYour previous reply could not be used: "), "{second}");
        assert!(second.contains("no JSON object"), "{second}");
    }

    #[test]
    fn parse_json_reply_tolerates_fences_and_prose() {
        let plain: OpsReply = parse_json_reply(r#"{"ops":[]}"#).unwrap();
        assert!(plain.ops.is_empty());
        let fenced: OpsReply =
            parse_json_reply("```json\n{\"ops\":[{\"op\":\"DUPLICATE\",\"facts\":[\"f-1\"],\"target\":\"m-1\"}]}\n```")
                .unwrap();
        assert!(matches!(&fenced.ops[0], Op::Duplicate { target, .. } if target == "m-1"));
        let prose: OpsReply = parse_json_reply(
            "Here is my decision:\n{\"ops\":[{\"op\":\"ADD\",\"facts\":[\"f-1\"],\"content\":\"Has a cat {Mia}.\"}]}\nHope it helps.",
        )
        .unwrap();
        assert_eq!(prose.ops.len(), 1);
        let bare_fence: Value = parse_json_reply("```\n{\"a\": 1}\n```").unwrap();
        assert_eq!(bare_fence["a"], 1);
    }

    #[test]
    fn parse_json_reply_errors_are_short_and_specific() {
        let none = parse_json_reply::<OpsReply>("I cannot help with that.").unwrap_err();
        assert_eq!(none, "the reply contains no JSON object");
        let broken = parse_json_reply::<OpsReply>("{\"ops\": [}").unwrap_err();
        assert!(broken.starts_with("the reply is not valid JSON"), "{broken}");
        let shape = parse_json_reply::<OpsReply>(r#"{"ops":[{"op":"MERGE"}]}"#).unwrap_err();
        assert!(shape.starts_with("the JSON does not have the expected shape"), "{shape}");
        assert!(parse_json_reply::<OpsReply>(&format!("{{{}", "x".repeat(2000))).unwrap_err().chars().count() <= 301);
    }

    #[test]
    fn prompts_are_built_in_and_overridable() {
        let builtin = Prompts::load("").unwrap();
        assert_eq!(builtin, Prompts::default());
        assert!(builtin.consolidate.contains("\"ops\""));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("extract.md"), "custom extract").unwrap();
        let prompts = Prompts::load(dir.path().to_str().unwrap()).unwrap();
        assert_eq!(prompts.extract, "custom extract");
        assert_eq!(prompts.consolidate, builtin.consolidate);
        assert_eq!(prompts.promote, builtin.promote);
    }

    #[test]
    fn unreadable_or_empty_prompt_override_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("promote.md");
        std::fs::create_dir(&path).unwrap();
        let err = Prompts::load(dir.path().to_str().unwrap()).unwrap_err();
        assert!(err.to_string().contains(&path.display().to_string()), "{err}");
        std::fs::remove_dir(&path).unwrap();
        std::fs::write(&path, "  \n").unwrap();
        let err = Prompts::load(dir.path().to_str().unwrap()).unwrap_err();
        assert_eq!(err.to_string(), format!("prompt {} is empty", path.display()));
    }
}
