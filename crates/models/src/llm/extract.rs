//! Fact extraction: the chat call that turns a conversation turn into facts (`prompts/extract.md`).
//!
//! The user message is the day and the turn; the reply is `{"facts":[{"text":"…","keys":[…]}]}`,
//! where `keys` (optional) name what each fact is about (`consolidate::aspects`). Facts whose
//! text is blank once cleaned are dropped here; what is left is checked by the caller like any
//! other fact before it is stored.

use chrono::NaiveDate;
use memfold_store::egress::Purpose;
use serde::Deserialize;

use super::{ChatClient, LlmError, Usage};

#[derive(Deserialize)]
struct Extracted {
    facts: Vec<ExtractedFact>,
}

#[derive(Deserialize)]
struct ExtractedFact {
    text: String,
    #[serde(default)]
    keys: Vec<String>,
}

/// A fact the LLM found in a turn, and the aspect keys it gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub text: String,
    pub keys: Vec<String>,
}

/// The user message for a turn of `today`.
fn user_message(turn: &str, today: NaiveDate) -> String {
    format!("Today is {today}.\n\nTurn:\n{}", turn.trim())
}

/// The system message: the prompt, and the attributes its keys are taken from.
pub fn system_message<'a>(prompt: &str, attributes: impl IntoIterator<Item = &'a str>) -> String {
    super::keys::system_message(prompt, attributes)
}

/// Ask `chat` (with the extraction system message) for the facts of `turn`: their texts (blank
/// ones dropped) with their keys, and what the call cost.
pub async fn facts(
    chat: &ChatClient,
    system: &str,
    turn: &str,
    today: NaiveDate,
) -> Result<(Vec<Found>, Usage), LlmError> {
    let (extracted, usage) =
        chat.complete_parsed::<Extracted>(Purpose::Extract, system, &user_message(turn, today)).await?;
    let found = extracted
        .facts
        .into_iter()
        .filter(|f| !memfold_store::archive::clean_text(&f.text).is_empty())
        .map(|f| Found { text: f.text, keys: f.keys.into_iter().take(3).collect() })
        .collect();
    Ok((found, usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_message_gives_the_day_and_the_trimmed_turn() {
        let day: NaiveDate = "2026-11-25".parse().unwrap();
        assert_eq!(user_message("  user: hi\n", day), "Today is 2026-11-25.\n\nTurn:\nuser: hi");
    }
}
