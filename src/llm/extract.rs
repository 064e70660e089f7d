//! Fact extraction: the chat call that turns a conversation turn into facts (`prompts/extract.md`).
//!
//! The user message is the day and the turn; the reply is `{"facts":[{"text":"…"}]}`. Facts
//! whose text is blank once cleaned are dropped here; what is left is checked by the caller
//! like any other fact before it is stored.

use chrono::NaiveDate;
use serde::Deserialize;

use super::{ChatClient, LlmError, Usage};

#[derive(Deserialize)]
struct Extracted {
    facts: Vec<ExtractedFact>,
}

#[derive(Deserialize)]
struct ExtractedFact {
    text: String,
}

/// The user message for a turn of `today`.
fn user_message(turn: &str, today: NaiveDate) -> String {
    format!("Today is {today}.\n\nTurn:\n{}", turn.trim())
}

/// Ask `chat` (with the `extract` system prompt) for the facts of `turn`: their texts, blank
/// ones dropped, and what the call cost.
pub async fn facts(
    chat: &ChatClient,
    prompt: &str,
    turn: &str,
    today: NaiveDate,
) -> Result<(Vec<String>, Usage), LlmError> {
    let (extracted, usage) = chat.complete_parsed::<Extracted>(prompt, &user_message(turn, today)).await?;
    let texts = extracted
        .facts
        .into_iter()
        .map(|f| f.text)
        .filter(|text| !crate::files::archive::clean_text(text).is_empty())
        .collect();
    Ok((texts, usage))
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
