//! What to hand an agent for a prompt: pure, from the candidates a search found to the few
//! lines worth the agent's context.
//!
//! A prompt is a question or an instruction in an agent's words, not a search box's query, and
//! its context is paid for on every turn. So the candidates are weighed again and chosen, not
//! just cut:
//! - each is scored by its cosine to the prompt and by the prompt's words it holds, each word
//!   weighted by how rare it is among the candidates (a person's name every candidate holds
//!   tells nothing; "support group" does);
//! - the best must be relevant on both counts: its cosine clears the bar ([`Settings::bar`],
//!   calibrated per embedder) and its score ([`Settings::min_score`]: the cosine with the
//!   prompt's rare words and dates added) is high enough; otherwise the prompt is about
//!   something memory does not hold, and nothing is handed over. An everyday coding prompt can
//!   come near some entry by its wording alone, as a question can by its words alone; few come
//!   near by both. The others must come close to the best ([`Settings::gap`]);
//! - a pending fact whose entry is chosen adds nothing, and a near-copy of a chosen line
//!   (most of its words the same) is left out, except an entry's own older version, whose
//!   difference is what a prompt about the past asks for;
//! - an entry the session was told already, unchanged since, is not told again;
//! - the lines stop at [`Settings::max_lines`] and the budget.

use std::collections::{HashMap, HashSet};

use chrono::NaiveDate;

use super::consolidate::stem::stem;

/// One candidate, as the search found it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub id: String,
    /// An entry of `memory.md` (true) or a pending fact.
    pub entry: bool,
    pub text: String,
    /// The facts an entry was made from (a fact: none).
    pub sources: Vec<String>,
    pub date: NaiveDate,
    /// Cosine to the prompt, when the vector leg found it.
    pub similarity: Option<f64>,
    /// The search's fused score (rank and recency).
    pub score: f64,
    /// The shared space it comes from, when not the prompt's own.
    pub space: Option<String>,
    /// The entry whose link brought it into the search (not a match of its own).
    pub related_to: Option<String>,
    /// An older version of an entry (`history.md`): the day it stopped being current. Weighed
    /// only for a prompt that asks what was true then ([`asks_what_was_true`]).
    pub until: Option<NaiveDate>,
}

/// How much to hand over, and how candidates are weighed.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The least cosine to the prompt the best line needs (and every line).
    pub bar: f64,
    /// The least score (cosine, words and dates: [`scores`]) the best line needs.
    pub min_score: f64,
    /// A line after the best needs a score at least the best's less this.
    pub gap: f64,
    /// Weight of the prompt's words a candidate holds, against its cosine.
    pub words: f64,
    /// Added to a candidate dated in a month (or year) the prompt names ("in June", "2023").
    pub dates: f64,
    /// Lines, at most.
    pub max_lines: usize,
    /// Characters of the rendered lines, at most.
    pub budget: usize,
    /// The day "yesterday", "last week" or "on Tuesday" in a prompt count from.
    pub today: NaiveDate,
}

/// A line chosen: the candidate's index and the line as the agent reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    pub at: usize,
    pub line: String,
    pub score: f64,
}

/// The line of a candidate: its text on one line, its id and date, so the agent can ask for
/// the entry's history.
pub fn line(c: &Candidate) -> String {
    match c.until {
        Some(until) => {
            let text = c.text.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("- {text} [{} · {} to {until}, no longer current]", c.id, c.date)
        }
        None => render_line(&c.text, &c.id, c.date, c.space.as_deref(), c.related_to.as_deref()),
    }
}

/// A recalled entry as an agent reads it, wherever it is handed over (a prompt's recall, the
/// session start): `- text [id · date]`, with the shared space it came from or the entry it is
/// related to.
pub fn render_line(text: &str, id: &str, date: NaiveDate, space: Option<&str>, related_to: Option<&str>) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match (space, related_to) {
        (Some(space), _) => format!("- {text} [{id} · {date} · {space}]"),
        (None, Some(to)) => format!("- {text} [{id} · {date} · related to {to}]"),
        (None, None) => format!("- {text} [{id} · {date}]"),
    }
}

/// A prompt's words, lowercase, split at everything but letters and digits.
fn tokens(prompt: &str) -> Vec<String> {
    prompt.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// The month (1–12) a lowercase word of a prompt names; "mar" is a word of its own more often
/// than March.
fn month_of(word: &str) -> Option<u32> {
    super::consolidate::calendar::month(word).filter(|_| word != "mar")
}

/// The year a word of a prompt names: four digits, 1900 to 2100.
fn year_of(word: &str) -> Option<i32> {
    let digits = word.len() == 4 && word.chars().all(|c| c.is_ascii_digit());
    digits.then(|| word.parse().ok()).flatten().filter(|y| (1900..=2100).contains(y))
}

/// Whether a prompt asks what was true before rather than what is true now ("what car did I
/// use to drive", "where did she live before", "what was his job back then"): its recall weighs
/// the older versions of entries (`history.md`) beside the current ones.
pub fn asks_what_was_true(prompt: &str) -> bool {
    const WORDS: [&str; 9] =
        ["previously", "formerly", "originally", "initially", "anymore", "ago", "former", "earlier", "before"];
    const PAIRS: [[&str; 2]; 6] =
        [["used", "to"], ["at", "first"], ["back", "then"], ["back", "in"], ["no", "longer"], ["last", "year"]];
    let tokens = tokens(prompt);
    // "What did I use to drive": "used to" as people type it.
    let did_use_to = tokens.iter().any(|t| t == "did") && tokens.windows(2).any(|w| w == ["use", "to"]);
    did_use_to
        || tokens.iter().any(|t| WORDS.contains(&t.as_str()))
        || tokens.windows(2).any(|w| PAIRS.iter().any(|p| p[0] == w[0] && p[1] == w[1]))
        || tokens.windows(3).any(|w| w == ["at", "the", "time"])
}

/// Words that say nothing of what a prompt is about.
const STOP: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being",
    "but", "by", "can", "could", "did", "do", "does", "doing", "done", "for", "from", "had", "has", "have", "having",
    "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "let",
    "like", "me", "might", "more", "most", "my", "no", "not", "now", "of", "on", "one", "or", "our", "out", "over",
    "please", "she", "should", "so", "some", "than", "that", "the", "their", "them", "then", "there", "these", "they",
    "this", "those", "to", "too", "up", "us", "very", "was", "we", "were", "what", "when", "where", "which", "while",
    "who", "whom", "why", "will", "with", "would", "you", "your", "s", "t", "d", "ll", "re", "ve", "m", "kind", "ever",
    "still", "get", "got", "go", "going", "went", "make", "made", "take", "took", "think", "know", "tell", "say",
    "said", "thing", "things", "way", "time", "recently", "lately",
];

/// The content words of a text, stemmed and without repeats.
pub fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// The months (1-12) and years a prompt names: "in June", "last May", "2023". "May" is a month
/// only after "in", "last", "this", "next", "early", "late" or before a year or a day.
pub fn dates_named(prompt: &str) -> (Vec<u32>, Vec<i32>) {
    let tokens = tokens(prompt);
    let (mut months, mut years) = (Vec::new(), Vec::new());
    for (i, t) in tokens.iter().enumerate() {
        if let Some(m) = month_of(t) {
            let before = i.checked_sub(1).map(|j| tokens[j].as_str());
            let after = tokens.get(i + 1).map(String::as_str);
            let dated = |w: Option<&str>| w.is_some_and(|w| w.chars().all(|c| c.is_ascii_digit()));
            let cue = matches!(
                before,
                Some("in" | "last" | "this" | "next" | "early" | "late" | "mid" | "of" | "during" | "since")
            );
            if *t != "may" || cue || dated(after) || dated(before) {
                months.push(m);
            }
        }
        years.extend(year_of(t));
    }
    (months, years)
}

/// The days a prompt speaks of, first and last: a day it names with its year ("on 3 June,
/// 2023", "June 3rd 2023", "2023-06-03") or a month with its year ("in January 2022"); else
/// days counted back from `today` ([`days_ago`]: "yesterday", "last week", "on Tuesday", "in
/// June"). A day without a year names no days (which year is a guess). The first date named
/// counts.
pub fn days_named(prompt: &str, today: NaiveDate) -> Option<(NaiveDate, NaiveDate)> {
    let tokens = tokens(prompt);
    days_written(&tokens).or_else(|| days_ago(&tokens, today))
}

/// [`days_named`]'s dates written with their year.
fn days_written(tokens: &[String]) -> Option<(NaiveDate, NaiveDate)> {
    let year = |j: usize| tokens.get(j).and_then(|t| year_of(t));
    let day = |j: usize| -> Option<u32> {
        let t = tokens.get(j)?;
        let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let suffix = &t[digits.len()..];
        let ordinal = suffix.is_empty() || ["st", "nd", "rd", "th"].contains(&suffix);
        (ordinal && (1..=2).contains(&digits.len()))
            .then(|| digits.parse().ok())
            .flatten()
            .filter(|d| (1..=31).contains(d))
    };
    // "2023-06-03": three tokens in a row.
    for w in tokens.windows(3) {
        if let (Some(y), Ok(m), Ok(d)) = (year_of(&w[0]), w[1].parse::<u32>(), w[2].parse::<u32>())
            && w[1].len() == 2
            && w[2].len() == 2
            && let Some(date) = NaiveDate::from_ymd_opt(y, m, d)
        {
            return Some((date, date));
        }
    }
    for (i, t) in tokens.iter().enumerate() {
        let Some(m) = month_of(t) else { continue };
        // "June 3, 2023" / "June 3rd 2023" / "3 June, 2023" / "3rd of June 2023" / "June 2023".
        let (d, y) = match (day(i + 1), year(i + 1)) {
            (Some(d), _) => (Some(d), year(i + 2)),
            (None, Some(y)) => {
                let before = i.checked_sub(1).and_then(day);
                let before_of = (i >= 2 && tokens[i - 1] == "of").then(|| day(i - 2)).flatten();
                (before.or(before_of), Some(y))
            }
            (None, None) => (None, None),
        };
        let Some(y) = y else { continue };
        return match d {
            Some(d) => NaiveDate::from_ymd_opt(y, m, d).map(|date| (date, date)),
            None => month_days(y, m),
        };
    }
    None
}

/// The first and last day of month `m` of year `y`.
fn month_days(y: i32, m: u32) -> Option<(NaiveDate, NaiveDate)> {
    let first = NaiveDate::from_ymd_opt(y, m, 1)?;
    let next = if m == 12 { NaiveDate::from_ymd_opt(y + 1, 1, 1) } else { NaiveDate::from_ymd_opt(y, m + 1, 1) };
    Some((first, next?.pred_opt()?))
}

/// The days a prompt speaks of relative to `today`, as an agent's person speaks of them: the
/// past, since memory holds what was said. "today", "this morning", "tonight"; "yesterday",
/// "last night"; "3 days ago", "two weeks ago" (that week, give or take three days); "this
/// week" / "last week" (Monday of last week to yesterday, either reading of it); "this month",
/// "last month"; "on Tuesday", "last Tuesday" (the last Tuesday before today); "last weekend",
/// "at the weekend"; "in June", "last June" (the last June that has begun; "last June" said in
/// June is a year ago). "every Tuesday" speaks of no day.
fn days_ago(tokens: &[String], today: NaiveDate) -> Option<(NaiveDate, NaiveDate)> {
    use super::consolidate::calendar::WEEKDAYS;
    use chrono::{Datelike, Days};
    let back = |n: u64| today.checked_sub_days(Days::new(n));
    let day = |n: u64| back(n).map(|d| (d, d));
    let number = |w: &str| -> Option<u64> {
        const WORDS: [&str; 10] = ["a", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];
        match WORDS.iter().position(|x| *x == w) {
            Some(i) => Some(i as u64 + 1),
            None => w.parse::<u64>().ok().filter(|n| (1..=366).contains(n)),
        }
    };
    let monday = back(u64::from(today.weekday().num_days_from_monday()))?;
    let word = |i: usize| tokens.get(i).map_or("", String::as_str);
    for (i, t) in tokens.iter().enumerate() {
        let before = i.checked_sub(1).map_or("", word);
        let next = word(i + 1);
        let found = match t.as_str() {
            "today" | "tonight" => day(0),
            "this" if matches!(next, "morning" | "afternoon" | "evening") => day(0),
            "yesterday" if before == "before" => day(2),
            "yesterday" => day(1),
            "last" if next == "night" => day(1),
            "ago" => match (i.checked_sub(2).map(word).and_then(number), before) {
                (Some(n), "day" | "days") => day(n),
                (Some(n), "week" | "weeks") => Some((back(7 * n + 3)?, back((7 * n).saturating_sub(3))?)),
                _ => None,
            },
            "week" if before == "this" => Some((monday, today)),
            "week" if before == "last" => Some((monday.checked_sub_days(Days::new(7))?, back(1)?)),
            "month" if before == "this" => Some((today.with_day(1)?, today)),
            "month" if before == "last" => {
                let last = today.with_day(1)?.pred_opt()?;
                month_days(last.year(), last.month())
            }
            "weekend" if matches!(before, "last" | "the" | "this") => {
                // The last Saturday before today, and its Sunday if that has come.
                let saturday = (1..=7).filter_map(back).find(|d| d.weekday() == chrono::Weekday::Sat)?;
                Some((saturday, saturday.succ_opt()?.min(today)))
            }
            w if matches!(before, "on" | "last") && WEEKDAYS.contains(&w) => (1..=7)
                .filter_map(back)
                .find(|d| WEEKDAYS[d.weekday().num_days_from_monday() as usize] == w)
                .map(|d| (d, d)),
            w if matches!(before, "in" | "last" | "during") && month_of(w).is_some() => {
                let m = month_of(w)?;
                // The last such month that has begun; "last June" said in June is a year ago.
                let this_year = m < today.month() || (m == today.month() && before != "last");
                let y = if this_year { today.year() } else { today.year() - 1 };
                month_days(y, m).map(|(first, last)| (first, last.min(today)))
            }
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Each candidate's score for the prompt: its cosine, plus `settings.words` times the share of
/// the prompt's words (weighted by rarity among the candidates) it holds, plus `settings.dates`
/// when it is dated in a month or year the prompt names, or within the days it names
/// ([`days_named`]).
// Read by the recall bench's analysis (`MEMFOLD_BENCH_ANALYZE`), through the testkit.
#[cfg_attr(not(feature = "testkit"), allow(dead_code))]
pub fn scores(prompt: &str, candidates: &[Candidate], settings: &Settings) -> Vec<f64> {
    let held: Vec<HashSet<String>> = candidates.iter().map(|c| words(&c.text)).collect();
    scores_of(prompt, candidates, &held, settings)
}

/// [`scores`] with each candidate's [`words`] read already.
fn scores_of(prompt: &str, candidates: &[Candidate], held: &[HashSet<String>], settings: &Settings) -> Vec<f64> {
    use chrono::Datelike;
    let (months, years) = dates_named(prompt);
    let days = days_named(prompt, settings.today);
    let asked = words(prompt);
    let n = candidates.len().max(1) as f64;
    let weight: HashMap<&str, f64> = asked
        .iter()
        .map(|w| {
            let df = held.iter().filter(|h| h.contains(w)).count() as f64;
            (w.as_str(), (1.0 + n / (1.0 + df)).ln())
        })
        .collect();
    let total: f64 = weight.values().sum();
    candidates
        .iter()
        .zip(held)
        .map(|(c, h)| {
            let lexical = match total > 0.0 {
                true => asked.iter().filter(|w| h.contains(*w)).map(|w| weight[w.as_str()]).sum::<f64>() / total,
                false => 0.0,
            };
            let month = months.contains(&c.date.month()) && (years.is_empty() || years.contains(&c.date.year()));
            let year = months.is_empty() && years.contains(&c.date.year());
            let within = days.is_some_and(|(first, last)| first <= c.date && c.date <= last);
            let dated = if month || year || within { settings.dates } else { 0.0 };
            c.similarity.unwrap_or(0.0) + settings.words * lexical + dated
        })
        .collect()
}

/// Whether `b` says nearly what `a` says: most of the shorter one's words are the other's.
fn near_copy(a: &HashSet<String>, b: &HashSet<String>) -> bool {
    let shorter = a.len().min(b.len());
    shorter > 0 && a.intersection(b).count() as f64 >= 0.8 * shorter as f64
}

/// Choose the lines for `prompt` from `candidates`. `told`: what the session was told already,
/// entry id → [`told_key`] (a changed entry is told again).
pub fn choose(
    prompt: &str,
    candidates: &[Candidate],
    settings: &Settings,
    told: &HashMap<String, String>,
) -> Vec<Chosen> {
    let held: Vec<HashSet<String>> = candidates.iter().map(|c| words(&c.text)).collect();
    let scores = scores_of(prompt, candidates, &held, settings);
    let told_already = |c: &Candidate| told.get(&told_id(c)).is_some_and(|k| *k == told_key(c));
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    // Best first; an entry before a fact of equal score; ties by id.
    order.sort_by(|&a, &b| {
        scores[b]
            .total_cmp(&scores[a])
            .then(candidates[b].entry.cmp(&candidates[a].entry))
            .then(candidates[a].id.cmp(&candidates[b].id))
    });
    let Some(&best) = order.first() else { return Vec::new() };
    if candidates[best].similarity.is_none_or(|s| s < settings.bar) || scores[best] < settings.min_score {
        return Vec::new();
    }
    let top = scores[best];
    // What the chosen entries fold: their pending facts add nothing.
    let folded: HashSet<&str> = order
        .iter()
        .filter(|&&i| candidates[i].entry && scores[i] >= top - settings.gap)
        .flat_map(|&i| candidates[i].sources.iter().map(String::as_str))
        .collect();
    let mut chosen: Vec<Chosen> = Vec::new();
    // The words of each chosen line, by its entry: an entry's older version says nearly what
    // the current one says, and the difference is what the prompt asks for.
    let mut chosen_words: Vec<(&str, &HashSet<String>)> = Vec::new();
    let mut used = 0;
    for &i in &order {
        let c = &candidates[i];
        if chosen.len() >= settings.max_lines || scores[i] < top - settings.gap {
            break;
        }
        if c.similarity.is_none_or(|s| s < settings.bar) || (!c.entry && folded.contains(c.id.as_str())) {
            continue;
        }
        let mine = &held[i];
        if chosen_words.iter().any(|(id, w)| *id != c.id && near_copy(w, mine)) {
            continue;
        }
        // Told already and unchanged: it still counts as chosen for the near-copies.
        if told_already(c) {
            chosen_words.push((&c.id, mine));
            continue;
        }
        let line = line(c);
        let need = line.chars().count() + 1;
        if used + need > settings.budget {
            break;
        }
        used += need;
        chosen_words.push((&c.id, mine));
        chosen.push(Chosen { at: i, line, score: scores[i] });
    }
    // An entry linked to a chosen one comes below the chosen lines, as room allows: the
    // search brought it for that link, not for the prompt.
    let picked: Vec<String> = chosen.iter().map(|c| candidates[c.at].id.clone()).collect();
    let mut taken: HashSet<&str> = picked.iter().map(String::as_str).collect();
    for id in &picked {
        for (i, c) in candidates.iter().enumerate() {
            if c.related_to.as_deref() != Some(id.as_str()) || !taken.insert(c.id.as_str()) {
                continue;
            }
            if chosen.len() >= settings.max_lines || told_already(c) {
                continue;
            }
            let line = line(c);
            let need = line.chars().count() + 1;
            if used + need > settings.budget {
                continue;
            }
            used += need;
            let score = chosen.last().map_or(0.0, |last| last.score);
            chosen.push(Chosen { at: i, line, score });
        }
    }
    chosen
}

/// The name a session's record of what it was told keeps a candidate under: its id, and for
/// an older version the day it ended too (telling it does not stand for the current one).
pub fn told_id(c: &Candidate) -> String {
    match c.until {
        Some(until) => format!("{}@{until}", c.id),
        None => c.id.clone(),
    }
}

/// What a told entry is known by: its text (an entry changed since is told again).
pub fn told_key(c: &Candidate) -> String {
    told_key_of(&c.text)
}

/// [`told_key`] of a text.
pub fn told_key_of(text: &str) -> String {
    memfold_store::content_hash(text)[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: &str, text: &str, similarity: f64, sources: &[&str]) -> Candidate {
        Candidate {
            id: id.into(),
            entry: id.starts_with("m-"),
            text: text.into(),
            sources: sources.iter().map(|s| s.to_string()).collect(),
            date: "2026-05-01".parse().unwrap(),
            similarity: Some(similarity),
            score: 0.0,
            space: None,
            related_to: None,
            until: None,
        }
    }

    #[test]
    fn a_prompt_asks_what_was_true_then_by_its_words() {
        for asked in [
            "What car did I use to drive?",
            "where did Ana live before Lisbon",
            "Which editor was I using at the time?",
            "what was the port back then",
            "Is the API key still the one from last year?",
            "what did we originally name the service",
        ] {
            assert!(asks_what_was_true(asked), "{asked}");
        }
        for now in
            ["Which port does staging use?", "Fix the failing test in src/parser.rs", "how old is Rex", "use the tool"]
        {
            assert!(!asks_what_was_true(now), "{now}");
        }
    }

    #[test]
    fn an_older_version_is_told_under_its_own_name_and_said_to_be_no_longer_current() {
        let current = cand("m-1", "Drives a Tesla Model 3.", 0.6, &[]);
        let mut old = cand("m-1", "Drives a Honda Civic.", 0.55, &[]);
        old.until = Some("2026-03-01".parse().unwrap());
        let candidates = vec![current, old];
        let chosen = choose("what car did I drive before", &candidates, &settings(), &HashMap::new());
        assert_eq!(chosen.len(), 2, "{chosen:?}");
        assert!(chosen[1].line.contains("to 2026-03-01, no longer current"), "{:?}", chosen[1]);
        // The session told the current version: the older one is still news.
        let told: HashMap<String, String> = [(told_id(&candidates[0]), told_key(&candidates[0]))].into();
        let chosen = choose("what car did I drive before", &candidates, &settings(), &told);
        assert_eq!(chosen.iter().map(|c| c.at).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn an_entry_linked_to_a_chosen_one_follows_it_within_the_lines_and_the_budget() {
        let mut related = cand("m-2", "Walks Rex every morning before work.", 0.1, &[]);
        related.similarity = None;
        related.related_to = Some("m-1".into());
        let candidates = vec![cand("m-1", "Has a dog named Rex.", 0.7, &[]), related];
        let chosen = choose("what is my dog called", &candidates, &settings(), &HashMap::new());
        assert_eq!(ids(&chosen, &candidates), ["m-1", "m-2"]);
        assert!(chosen[1].line.ends_with("· related to m-1]"), "{}", chosen[1].line);
        let tight = Settings { max_lines: 1, ..settings() };
        assert_eq!(ids(&choose("what is my dog called", &candidates, &tight, &HashMap::new()), &candidates), ["m-1"]);
    }

    #[test]
    fn nothing_is_handed_over_unless_the_best_line_is_near_by_its_meaning_and_by_its_words() {
        let settings = Settings { min_score: 0.6, ..settings() };
        // Near by wording alone (a coding prompt against a person's memory): nothing.
        let candidates = vec![cand("m-1", "Fixed the kitchen tap last weekend.", 0.45, &[])];
        assert!(
            choose("Fix the failing unit test in src/parser.rs", &candidates, &settings, &HashMap::new()).is_empty()
        );
        // The same cosine, and the prompt's rare words: handed over.
        let candidates = vec![
            cand("m-1", "Caroline joined an LGBTQ activist group last Tuesday.", 0.45, &[]),
            cand("m-2", "Caroline likes hiking.", 0.2, &[]),
        ];
        let chosen = choose("Which activist group did Caroline join?", &candidates, &settings, &HashMap::new());
        assert_eq!(ids(&chosen, &candidates), ["m-1"]);
        // A high score by words alone, the cosine under the bar: nothing.
        let candidates = vec![cand("m-1", "Caroline joined an LGBTQ activist group last Tuesday.", 0.25, &[])];
        let words_only = Settings { min_score: 0.0, ..settings };
        assert!(
            choose("Which activist group did Caroline join?", &candidates, &words_only, &HashMap::new()).is_empty()
        );
    }

    fn settings() -> Settings {
        Settings {
            bar: 0.3,
            min_score: 0.3,
            gap: 0.15,
            words: 0.5,
            dates: 0.1,
            max_lines: 4,
            budget: 2_000,
            today: "2026-05-20".parse().unwrap(),
        }
    }

    fn ids(chosen: &[Chosen], candidates: &[Candidate]) -> Vec<String> {
        chosen.iter().map(|c| candidates[c.at].id.clone()).collect()
    }

    #[test]
    fn the_months_and_years_a_prompt_names() {
        assert_eq!(dates_named("When did Melanie go camping in June?"), (vec![6], vec![]));
        assert_eq!(dates_named("what happened last May 2023"), (vec![5], vec![2023]));
        assert_eq!(dates_named("May I ask what you did?"), (vec![], vec![]));
        assert_eq!(dates_named("the trip in Sept"), (vec![9], vec![]));
    }

    #[test]
    fn the_days_a_prompt_names_with_their_year() {
        let day = |s: &str| s.parse::<NaiveDate>().unwrap();
        let one = |s: &str| Some((day(s), day(s)));
        let days_named = |prompt: &str| super::days_named(prompt, day("2026-05-20"));
        assert_eq!(days_named("What did Maria start, as mentioned on 3 June, 2023?"), one("2023-06-03"));
        assert_eq!(days_named("what did we decide on June 3rd 2023"), one("2023-06-03"));
        assert_eq!(days_named("the 21st of March 2024 call"), one("2024-03-21"));
        assert_eq!(days_named("notes from 2023-06-03 please"), one("2023-06-03"));
        assert_eq!(days_named("What did Joanna recommend on February 7, 2022?"), one("2022-02-07"));
        assert_eq!(days_named("What did Joanna do in January 2022?"), Some((day("2022-01-01"), day("2022-01-31"))));
        assert_eq!(days_named("the December 2023 release"), Some((day("2023-12-01"), day("2023-12-31"))));
        for none in ["on 3 June", "Fix the bug in 2023", ""] {
            assert_eq!(days_named(none), None, "{none}");
        }
    }

    #[test]
    fn the_days_a_prompt_names_counted_back_from_today() {
        let day = |s: &str| s.parse::<NaiveDate>().unwrap();
        // A Wednesday.
        let today = day("2026-05-20");
        let named = |prompt: &str| days_named(prompt, today);
        let span = |a: &str, b: &str| Some((day(a), day(b)));
        assert_eq!(named("what did we decide today?"), span("2026-05-20", "2026-05-20"));
        assert_eq!(named("what did Ana say this morning"), span("2026-05-20", "2026-05-20"));
        assert_eq!(named("What did we decide yesterday about the deploy?"), span("2026-05-19", "2026-05-19"));
        assert_eq!(named("the day before yesterday"), span("2026-05-18", "2026-05-18"));
        assert_eq!(named("the bug I hit 3 days ago"), span("2026-05-17", "2026-05-17"));
        assert_eq!(named("the call two weeks ago"), span("2026-05-03", "2026-05-09"));
        assert_eq!(named("what did I work on this week"), span("2026-05-18", "2026-05-20"));
        assert_eq!(named("what was fixed last week?"), span("2026-05-11", "2026-05-19"));
        assert_eq!(named("anything new this month"), span("2026-05-01", "2026-05-20"));
        assert_eq!(named("what did we ship last month"), span("2026-04-01", "2026-04-30"));
        assert_eq!(named("what did Priya say on Tuesday?"), span("2026-05-19", "2026-05-19"));
        assert_eq!(named("notes from last Wednesday"), span("2026-05-13", "2026-05-13"));
        assert_eq!(named("what did I do last weekend"), span("2026-05-16", "2026-05-17"));
        assert_eq!(named("When did Melanie go camping in June?"), span("2025-06-01", "2025-06-30"));
        assert_eq!(named("the trip in March"), span("2026-03-01", "2026-03-31"));
        assert_eq!(named("since last May"), span("2025-05-01", "2025-05-31"));
        assert_eq!(named("what did I do in Lisbon yesterday"), span("2026-05-19", "2026-05-19"));
        // A year written wins; days nobody named stay unnamed.
        assert_eq!(named("what happened yesterday, 3 June 2023?"), span("2023-06-03", "2023-06-03"));
        for none in ["What do I do every Tuesday?", "may I ask something", "Fix the failing test", "last time"] {
            assert_eq!(named(none), None, "{none}");
        }
    }

    #[test]
    fn below_the_bar_nothing_is_handed_over() {
        let c = vec![cand("m-1", "Caroline went to a support group", 0.2, &[])];
        assert!(choose("Fix the failing unit test in src/parser.rs", &c, &settings(), &HashMap::new()).is_empty());
    }

    #[test]
    fn the_words_a_prompt_names_weigh_with_the_cosine_and_far_lines_stay_out() {
        let c = vec![
            cand("m-1", "Caroline likes painting sunsets", 0.55, &[]),
            cand("m-2", "Caroline went to an LGBTQ support group in May", 0.5, &[]),
            cand("m-3", "Caroline plans a trip to Sweden", 0.3, &[]),
        ];
        let chosen = choose("When did Caroline go to the LGBTQ support group?", &c, &settings(), &HashMap::new());
        assert_eq!(ids(&chosen, &c)[0], "m-2");
        assert!(!ids(&chosen, &c).contains(&"m-3".to_string()), "far below the best");
    }

    #[test]
    fn a_fact_its_chosen_entry_folds_and_a_near_copy_are_left_out() {
        let c = vec![
            cand("m-1", "Melanie runs a pottery class on Tuesdays", 0.6, &["f-1"]),
            cand("f-1", "Melanie runs a pottery class on Tuesdays", 0.6, &[]),
            cand("m-2", "Melanie runs the pottery class every Tuesday", 0.58, &[]),
        ];
        let chosen = choose("What class does Melanie run?", &c, &settings(), &HashMap::new());
        assert_eq!(ids(&chosen, &c), ["m-1"]);
    }

    #[test]
    fn an_entry_told_in_the_session_is_told_again_only_when_it_changed() {
        let c = vec![cand("m-1", "The staging database listens on port 5433", 0.7, &[])];
        let told = HashMap::from([("m-1".to_string(), told_key(&c[0]))]);
        assert!(choose("which port does staging use?", &c, &settings(), &told).is_empty());
        let changed = vec![cand("m-1", "The staging database listens on port 6543", 0.7, &[])];
        assert_eq!(choose("which port does staging use?", &changed, &settings(), &told).len(), 1);
    }

    #[test]
    fn the_lines_stop_at_the_budget() {
        let long = "word ".repeat(100);
        let c: Vec<Candidate> =
            (0..5).map(|i| cand(&format!("m-{i}"), &format!("{long}{i} unique{i}"), 0.6, &[])).collect();
        let chosen = choose("word", &c, &Settings { budget: 1_100, ..settings() }, &HashMap::new());
        let used: usize = chosen.iter().map(|c| c.line.chars().count() + 1).sum();
        assert!(used <= 1_100 && !chosen.is_empty(), "{used}");
    }
}
