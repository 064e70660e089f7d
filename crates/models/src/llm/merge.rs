//! The merging call: one chat call writes the text of an entry that several entries a person
//! chose become (`prompts/merge.md`).
//!
//! The user message is `{"entries":[{"id","content","updated"}]}`; the reply `{"content":"…"}`.
//! The caller checks the text keeps every entry's details before it uses it.

use chrono::NaiveDate;
use memfold_store::egress::Purpose;
use serde::{Deserialize, Serialize};

use super::{ChatClient, LlmError, Usage};

#[derive(Deserialize)]
struct Reply {
    content: String,
}

/// An entry as the merging call shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Merging<'a> {
    pub id: &'a str,
    pub content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated: Option<NaiveDate>,
}

/// Ask for one text that says what `entries` say.
pub async fn merged_text(
    chat: &ChatClient,
    system: &str,
    entries: &[Merging<'_>],
) -> Result<(String, Usage), LlmError> {
    let user = serde_json::json!({ "entries": entries }).to_string();
    let (reply, usage) = chat.complete_parsed::<Reply>(Purpose::Merge, system, &user).await?;
    Ok((reply.content, usage))
}
