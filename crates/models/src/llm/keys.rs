//! The keying call: one chat call per pass names what each new fact is about, as aspect keys
//! `subject / attribute` from the taxonomy's attributes (`prompts/keys.md`).
//!
//! The user message is `{"facts":[{"id","text"}]}`; the reply `{"keys":{"<id>":["user /
//! employer"]}}`. Keys only add decision candidates (see `consolidate::aspects`), so a fact
//! the reply leaves out simply has none from the LLM.

use memfold_store::egress::Purpose;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{ChatClient, LlmError, Usage};

#[derive(Deserialize)]
struct Reply {
    keys: HashMap<String, Vec<String>>,
}

#[derive(Serialize)]
struct Fact<'a> {
    id: &'a str,
    text: &'a str,
}

/// The system message: the prompt and the attributes to choose from.
pub fn system_message<'a>(prompt: &str, attributes: impl IntoIterator<Item = &'a str>) -> String {
    let listed: Vec<&str> = attributes.into_iter().collect();
    format!("{prompt}\n## Attributes\n\n{}\n", listed.join(", "))
}

/// Ask for the keys of `facts` (id, text): per id, the keys as written (at most three).
pub async fn keys(
    chat: &ChatClient,
    system: &str,
    facts: &[(&str, &str)],
) -> Result<(HashMap<String, Vec<String>>, Usage), LlmError> {
    let listed: Vec<Fact> = facts.iter().map(|&(id, text)| Fact { id, text }).collect();
    let user = serde_json::json!({ "facts": listed }).to_string();
    let (reply, usage) = chat.complete_parsed::<Reply>(Purpose::Keys, system, &user).await?;
    let keys = reply.keys.into_iter().map(|(id, keys)| (id, keys.into_iter().take(3).collect())).collect();
    Ok((keys, usage))
}
