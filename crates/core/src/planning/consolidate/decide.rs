//! Deciding one cluster: the LLM through `prompts/consolidate.md`, or the offline rules.
//!
//! The cluster goes into the user message as one JSON document (see `prompts/consolidate.md`) and the reply
//! must be `{"ops":[…]}`. A reply that does not parse is asked for once more, with the
//! error; a second failure is returned so the caller can leave the facts pending.
//!
//! Every call of a pass starts with the same bytes: the system message is the prompt alone
//! (instructions and example, nothing per call) and the cluster document is the user message
//! after it, so a provider that caches prompt prefixes reuses the prompt from call to call.

use chrono::NaiveDate;
use memfold_store::caches::DeciderKind;
use memfold_store::egress::Purpose;

use super::rules;
use crate::planning::run::ops::{ClusterDoc, OpsReply, ProposedOp};
use memfold_models::endpoint::HttpError;
use memfold_models::llm::{ChatClient, LlmError, Prompts, Usage, parse_json_reply};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecideError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error("unusable reply twice: {0}")]
    BadReply(String),
}

impl DecideError {
    /// Whether the failure is the call's own, so it counts toward its facts'
    /// `max_attempts`: a reply that could not be used, or a request the server refused for
    /// its content. An endpoint out of reach, overloaded or refusing the credentials fails
    /// every call alike and says nothing about these facts.
    pub fn is_the_calls(&self) -> bool {
        match self {
            DecideError::BadReply(_) => true,
            DecideError::Llm(LlmError::BadReply { .. } | LlmError::Unparseable { .. }) => true,
            DecideError::Llm(LlmError::Http(HttpError::Status { status, .. })) => matches!(status, 400 | 413 | 422),
            DecideError::Llm(_) => false,
        }
    }
}

/// Who decides.
// There is one per process; boxing the LLM variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Decider {
    Llm { client: ChatClient, prompts: Prompts },
    Offline,
}

impl Decider {
    pub fn kind(&self) -> DeciderKind {
        match self {
            Decider::Llm { .. } => DeciderKind::Llm,
            Decider::Offline => DeciderKind::Offline,
        }
    }

    /// The chat client and prompts, when an LLM decides.
    pub fn llm(&self) -> Option<(&ChatClient, &Prompts)> {
        match self {
            Decider::Llm { client, prompts } => Some((client, prompts)),
            Decider::Offline => None,
        }
    }

    /// The system prompt of a decision call. The offline decider sends none; for it this is the
    /// built-in prompt, so that a pass can say what its calls would cost an LLM.
    pub fn system_prompt(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Decider::Llm { prompts, .. } => prompts.consolidate.as_str().into(),
            Decider::Offline => Prompts::default().consolidate.into(),
        }
    }

    /// Decide one cluster. Usage is added to `usage` even when the call fails.
    /// `hints` (vectors, aspect keys, rejected pairs) are for the offline decider; the LLM reads
    /// the texts.
    pub async fn decide(
        &self,
        doc: &ClusterDoc,
        today: NaiveDate,
        usage: &mut Usage,
        hints: Option<&rules::Hints>,
    ) -> Result<Vec<ProposedOp>, DecideError> {
        let (client, prompt) = match self {
            Decider::Offline => return Ok(rules::decide(doc, today, hints)),
            Decider::Llm { client, prompts } => (client, &prompts.consolidate),
        };
        let user = user_message(doc);
        let reply = client.complete_json(Purpose::Consolidate, prompt, &user).await?;
        usage.add(reply.usage);
        let error = match parse_json_reply::<OpsReply>(&reply.content) {
            Ok(parsed) => return Ok(parsed.ops),
            Err(error) => error,
        };
        tracing::warn!(error = %error, "unusable decision reply; asking once more");
        let retry = format!(
            "{user}\n\nYour previous reply could not be used: {error}\nAnswer again with only the JSON object {{\"ops\":[…]}}."
        );
        let reply = client.complete_json(Purpose::Consolidate, prompt, &retry).await?;
        usage.add(reply.usage);
        parse_json_reply::<OpsReply>(&reply.content).map(|r| r.ops).map_err(DecideError::BadReply)
    }
}

/// The user message of a decision call: the cluster document as compact JSON.
pub fn user_message(doc: &ClusterDoc) -> String {
    serde_json::to_string(doc).unwrap_or_default()
}
