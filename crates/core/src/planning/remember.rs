//! What a person explicitly asked an agent to remember: with no LLM to extract facts from a
//! conversation, the agent hooks store these requests and nothing else.
//!
//! A request is a sentence that starts (after "please", "also", "and", "ok") with "remember
//! that …", "remember: …", "remember to …", "note that …", "don't forget …", "keep in mind
//! …", "for future reference …" or "from now on …". Questions ("do you remember …?"), and
//! requests the sentence only mentions ("I told you to remember …"), are not requests.

/// The facts `text` asks to be remembered, in order.
pub fn requests(text: &str) -> Vec<String> {
    sentences(text).into_iter().filter_map(request).collect()
}

/// `text` cut into sentences: at line ends, and after `.`, `!` or `?` followed by a space.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1) == Some(&b' ') {
                out.push(&line[start..=i]);
                start = i + 1;
            }
        }
        out.push(&line[start..]);
    }
    out.into_iter().map(str::trim).filter(|s| !s.is_empty()).collect()
}

/// Openings that make a sentence a request, and whether the words after them are the fact
/// (else the whole sentence is: "from now on, use pnpm" is itself the rule to keep).
const OPENINGS: [(&str, bool); 14] = [
    ("remember that ", true),
    ("remember: ", true),
    ("remember, ", true),
    ("remember to ", false),
    ("please remember ", true),
    ("note that ", true),
    ("note: ", true),
    ("don't forget that ", true),
    ("don't forget to ", false),
    ("do not forget that ", true),
    ("do not forget to ", false),
    ("keep in mind that ", true),
    ("for future reference, ", true),
    ("from now on", false),
];

/// The fact a sentence asks to be remembered, if it is a request.
fn request(sentence: &str) -> Option<String> {
    if sentence.ends_with('?') {
        return None;
    }
    let mut rest = sentence;
    for filler in ["please, ", "please ", "also, ", "also ", "and ", "ok, ", "okay, ", "oh, "] {
        if let Some(after) = strip_opening(rest, filler) {
            rest = after;
        }
    }
    for (opening, rest_is_fact) in OPENINGS {
        let Some(after) = strip_opening(rest, opening) else { continue };
        let fact = match rest_is_fact {
            true => after.trim(),
            false => rest.trim(),
        };
        let fact = fact.trim_start_matches([',', ':', ' ']).trim();
        if fact.split_whitespace().count() < 2 {
            return None;
        }
        let mut chars = fact.chars();
        let first = chars.next()?;
        let mut out: String = first.to_uppercase().chain(chars).collect();
        if !out.ends_with(['.', '!']) {
            out.push('.');
        }
        return Some(out);
    }
    None
}

/// `text` after `opening` (lower case, ASCII), compared letter by letter without case and with
/// the apostrophes phones and word processors type (`’`, `‘`) read as `'`; the person's own
/// characters are kept in what follows.
fn strip_opening<'a>(text: &'a str, opening: &str) -> Option<&'a str> {
    let mut chars = text.char_indices();
    for want in opening.chars() {
        let (_, got) = chars.next()?;
        let got = match got {
            '\u{2019}' | '\u{2018}' | '\u{02BC}' => '\'',
            c => c.to_ascii_lowercase(),
        };
        if got != want {
            return None;
        }
    }
    Some(chars.next().map_or("", |(at, _)| &text[at..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_requests_are_facts_and_the_rest_is_not() {
        let said = "Thanks! Remember that the staging database is on port 5433. Also, from now on use pnpm, not npm.\n\
                    Do you remember what the port was?\n\
                    I think we should remember to be careful.\n\
                    Please don't forget to run the migrations before deploying\n\
                    note: Ana owns the billing service\n\
                    Remember that.";
        assert_eq!(
            requests(said),
            [
                "The staging database is on port 5433.",
                "From now on use pnpm, not npm.",
                "Don't forget to run the migrations before deploying.",
                "Ana owns the billing service.",
            ]
        );
    }

    #[test]
    fn a_request_typed_on_a_phone_is_one() {
        assert_eq!(
            requests("Don\u{2019}t forget that Ana\u{2019}s flight lands at 9. Please remember: the gate code changed"),
            ["Ana\u{2019}s flight lands at 9.", "The gate code changed."]
        );
        assert_eq!(requests("REMEMBER THAT the demo is on Friday"), ["The demo is on Friday."]);
        assert_eq!(requests("Do not forget to water the plants"), ["Do not forget to water the plants."]);
    }

    #[test]
    fn nothing_in_ordinary_talk() {
        for said in [
            "Can you fix the failing test in auth.rs?",
            "I don't remember that being there",
            "Note the failing test",
            "we noted that earlier",
            "",
        ] {
            assert!(requests(said).is_empty(), "{said}");
        }
    }
}
