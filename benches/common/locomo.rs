//! LoCoMo (Maharana et al., 2024, `snap-research/LoCoMo`, CC BY-NC 4.0) as the benches read
//! it: each session's observations as dated facts, and each question's evidence.

use std::collections::{HashMap, HashSet};

use chrono::NaiveDate;
use memfold::store::archive::NewFact;
use serde_json::Value;

/// "1:56 pm on 8 May, 2023" → 2023-05-08.
pub fn session_day(stamp: &str) -> NaiveDate {
    let date = stamp.split(" on ").nth(1).unwrap_or(stamp).trim();
    NaiveDate::parse_from_str(date, "%d %B, %Y").unwrap_or_else(|e| panic!("session date {stamp:?}: {e}"))
}

/// A conversation's sessions in order, each as its observations: facts dated by the session,
/// with the dialogue turns they cite as source.
pub fn sessions(sample: &Value) -> Vec<Vec<NewFact>> {
    let conversation = &sample["conversation"];
    let observations = sample["observation"].as_object().unwrap();
    let mut sessions: Vec<usize> = observations
        .keys()
        .filter_map(|k| k.strip_prefix("session_")?.strip_suffix("_observation")?.parse().ok())
        .collect();
    sessions.sort_unstable();
    sessions
        .into_iter()
        .map(|s| {
            let day = session_day(conversation[format!("session_{s}_date_time")].as_str().unwrap());
            let mut news = Vec::new();
            for said in observations[&format!("session_{s}_observation")].as_object().unwrap().values() {
                for item in said.as_array().unwrap() {
                    let (text, dia) = (item[0].as_str().unwrap(), item[1].as_str().unwrap_or_default());
                    news.push(NewFact { text: text.to_string(), date: Some(day), source: Some(dia.to_string()) });
                }
            }
            news
        })
        .collect()
}

/// The dialogue turns a fact's source cites: one observation may cite several ("D1:3; D1:5").
pub fn turns(source: &str) -> impl Iterator<Item = &str> {
    source.split([';', ',', ' ']).filter(|d| !d.is_empty())
}

/// The questions worth asking (adversarial ones excepted) with the ids of the facts that cite
/// their evidence turns, given the facts of each turn; a question none of whose evidence is
/// among the facts is left out.
pub fn questions<'a>(
    sample: &'a Value,
    facts_of_turn: &'a HashMap<String, Vec<String>>,
) -> Vec<(&'a str, HashSet<&'a String>)> {
    sample["qa"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|qa| qa["category"].as_i64() != Some(5))
        .filter_map(|qa| {
            let evidence: HashSet<&String> = qa["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d.as_str())
                .filter_map(|d| facts_of_turn.get(d.trim()))
                .flatten()
                .collect();
            (!evidence.is_empty()).then(|| (qa["question"].as_str().unwrap(), evidence))
        })
        .collect()
}
