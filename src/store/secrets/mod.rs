//! Secrets: the credentials people paste into sessions ("here's the CI token: ghp_…", "the
//! wifi password is …"), found before a byte of them is written or sent.
//!
//! The rules are data (`rules.toml`, beside this file): a regex per credential format, the
//! part of the match that is the secret, a check that tells a credential from a look-alike
//! (a checksum, a decodable JWT, enough randomness, a value that is not a word about the
//! password), and examples that must and must not be caught. One pass of a [`RegexSet`] over
//! the text says which rules can match at all; most text matches none and costs one scan.
//!
//! What is caught is replaced by a marker that names its kind (`[secret: github token]`):
//! [`redact`] does it for what is stored and for what is sent to an endpoint.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde::Deserialize;

use crate::config::SecretsPolicy;
use crate::store::archive::NewFact;

/// One secret found in a text: its kind and its byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: String,
    pub start: usize,
    pub end: usize,
}

impl Found {
    /// Where it is, for a message that must not repeat it: the character offset, 1-based.
    pub fn position(&self, text: &str) -> usize {
        text[..self.start].chars().count() + 1
    }
}

#[derive(Debug, Deserialize)]
struct RuleFile {
    rule: Vec<RuleSpec>,
}

#[derive(Debug, Deserialize)]
struct RuleSpec {
    kind: String,
    regex: String,
    #[serde(default)]
    group: usize,
    #[serde(default)]
    check: Option<String>,
    #[serde(default)]
    #[cfg_attr(not(test), allow(dead_code))]
    caught: Vec<String>,
    #[serde(default)]
    #[cfg_attr(not(test), allow(dead_code))]
    left: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    None,
    GithubCrc,
    Jwt,
    Entropy,
    Prose,
}

struct Rule {
    kind: String,
    regex: Regex,
    group: usize,
    check: Check,
}

struct Detector {
    set: RegexSet,
    rules: Vec<Rule>,
}

const RULES: &str = include_str!("rules.toml");

static DETECTOR: LazyLock<Detector> = LazyLock::new(|| {
    let file: RuleFile = toml::from_str(RULES).expect("rules.toml parses (a unit test holds it)");
    let rules: Vec<Rule> = file
        .rule
        .into_iter()
        .map(|spec| Rule {
            regex: Regex::new(&spec.regex).unwrap_or_else(|e| panic!("rules.toml: {}: {e}", spec.kind)),
            check: match spec.check.as_deref() {
                None => Check::None,
                Some("github-crc") => Check::GithubCrc,
                Some("jwt") => Check::Jwt,
                Some("entropy") => Check::Entropy,
                Some("prose") => Check::Prose,
                Some(other) => panic!("rules.toml: {}: no check {other:?}", spec.kind),
            },
            kind: spec.kind,
            group: spec.group,
        })
        .collect();
    let set = RegexSet::new(rules.iter().map(|r| r.regex.as_str())).expect("the rules compile together");
    Detector { set, rules }
});

/// The secrets in `text`, in order, none overlapping (where two rules claim the same bytes, the
/// earlier and longer claim wins).
pub fn find(text: &str) -> Vec<Found> {
    let detector = &*DETECTOR;
    let mut found: Vec<Found> = Vec::new();
    for i in detector.set.matches(text).iter() {
        let rule = &detector.rules[i];
        for captures in rule.regex.captures_iter(text) {
            let Some(m) = captures.get(rule.group) else { continue };
            let (start, end) = trim_value(text, m.start(), m.end(), rule.check);
            if end > start && passes(rule.check, &text[start..end]) {
                found.push(Found { kind: rule.kind.clone(), start, end });
            }
        }
    }
    found.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut kept: Vec<Found> = Vec::with_capacity(found.len());
    for f in found {
        if kept.last().is_none_or(|last| f.start >= last.end) {
            kept.push(f);
        }
    }
    kept
}

/// `text` with every secret replaced by `[secret: <kind>]`, and what was replaced.
pub fn redact(text: &str) -> (String, Vec<Found>) {
    let found = find(text);
    if found.is_empty() {
        return (text.to_string(), found);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in &found {
        out.push_str(&text[at..f.start]);
        out.push_str(&marker(&f.kind));
        at = f.end;
    }
    out.push_str(&text[at..]);
    (out, found)
}

/// `text` held to `policy`: what may be stored or sent (redacted, or as given with `allow`)
/// and how many secrets it held; or, when `refuse` refuses it, its first secret.
pub fn hold(policy: SecretsPolicy, text: &str) -> Result<(String, usize), Found> {
    let (redacted, mut found) = redact(text);
    match policy {
        _ if found.is_empty() => Ok((redacted, 0)),
        SecretsPolicy::Refuse => Err(found.swap_remove(0)),
        SecretsPolicy::Redact => Ok((redacted, found.len())),
        SecretsPolicy::Allow => Ok((text.to_string(), found.len())),
    }
}

/// The one gate every text entering memory passes, whatever the door (a fact's text and
/// source, a turn, a curation's text, a note, a reason, a fact another machine sent): `text`
/// held to `policy`, as it may be stored; or, when `refuse` refuses it, why, naming `what`,
/// the secret's kind and its position, never its value.
pub fn gate(policy: SecretsPolicy, what: &str, text: &str) -> Result<String, String> {
    hold(policy, text).map(|(held, _)| held).map_err(|first| {
        format!(
            "the {what} holds a {} at character {}; nothing was stored (ingest.secrets = \"refuse\"; \
             \"redact\" would store it with the secret replaced by {})",
            first.kind,
            first.position(text),
            marker(&first.kind)
        )
    })
}

/// Apply `policy` to arriving facts (text and source) through [`gate`]: redact their secrets
/// in place, refuse the batch naming the first secret's fact, field, kind and position, or
/// let them be. How many secrets were found.
pub fn apply(policy: SecretsPolicy, facts: &mut [NewFact]) -> Result<usize, String> {
    let mut count = 0;
    for (i, fact) in facts.iter_mut().enumerate() {
        for (field, value) in [("text", Some(&mut fact.text)), ("source", fact.source.as_mut())] {
            let Some(value) = value else { continue };
            count += find(value).len();
            *value = gate(policy, &format!("{field} of fact {}", i + 1), value)?;
        }
    }
    Ok(count)
}

/// `text` as it may leave toward a model or an agent: every secret replaced by its marker,
/// whatever `ingest.secrets` let into the files.
pub fn mask(text: &str) -> String {
    redact(text).0
}

/// Every string in a JSON value masked ([`mask`]), for answers that leave as JSON.
pub fn mask_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => {
            let (masked, found) = redact(s);
            if !found.is_empty() {
                *s = masked;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(mask_json),
        serde_json::Value::Object(map) => map.values_mut().for_each(mask_json),
        _ => {}
    }
}

/// The marker a secret of `kind` is replaced by.
pub fn marker(kind: &str) -> String {
    format!("[secret: {kind}]")
}

/// A prose value ends before the punctuation that ends its sentence.
fn trim_value(text: &str, start: usize, end: usize, check: Check) -> (usize, usize) {
    if check != Check::Prose {
        return (start, end);
    }
    let value = text[start..end].trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '"', '\'']);
    (start, start + value.len())
}

fn passes(check: Check, value: &str) -> bool {
    match check {
        Check::None => true,
        Check::GithubCrc => github_crc(value),
        Check::Jwt => jwt(value),
        Check::Entropy => random_enough(value),
        Check::Prose => prose_value(value),
    }
}

/// The last 6 characters are the base62 CRC32 of the 30 before them (GitHub's and npm's
/// token formats).
fn github_crc(token: &str) -> bool {
    let Some((_, body)) = token.rsplit_once('_') else { return false };
    if body.len() != 36 {
        return false;
    }
    let (random, sum) = body.split_at(30);
    base62(crc32fast::hash(random.as_bytes())) == sum
}

fn base62(mut n: u32) -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = [b'0'; 6];
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8(out.to_vec()).expect("ASCII")
}

/// A JWT: header and payload are base64url JSON objects, the header names its `alg`.
fn jwt(token: &str) -> bool {
    use base64::Engine;
    let mut parts = token.split('.');
    let decode = |part: Option<&str>| -> Option<serde_json::Value> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part?.trim_end_matches('=')).ok()?;
        serde_json::from_slice::<serde_json::Value>(&bytes).ok().filter(serde_json::Value::is_object)
    };
    let header = decode(parts.next());
    let payload = decode(parts.next());
    header.is_some_and(|h| h.get("alg").is_some()) && payload.is_some()
}

/// Words that mark a value as a placeholder, not a credential.
const PLACEHOLDERS: [&str; 10] = ["example", "your", "xxxx", "here", "redacted", "placeholder", "dummy", "changeme", "sample", "****"];

fn placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    PLACEHOLDERS.iter().any(|p| lower.contains(p))
        || value.contains("${")
        || value.contains("{{")
        || value.starts_with('<')
        || value.starts_with('$')
        || value.starts_with('%')
}

/// Shannon entropy of the characters, bits per character.
fn entropy(value: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in value.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let n = value.chars().count() as f64;
    counts.values().map(|&c| c as f64 / n).map(|p| -p * p.log2()).sum()
}

/// Random enough to be a key: varied characters, a digit or mixed case, not a hex digest, a
/// UUID, a path or a placeholder.
fn random_enough(value: &str) -> bool {
    let hex = value.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    let digit = value.chars().any(|c| c.is_ascii_digit());
    let mixed = value.chars().any(|c| c.is_ascii_lowercase()) && value.chars().any(|c| c.is_ascii_uppercase());
    entropy(value) >= 3.0 && (digit || mixed) && !hex && !placeholder(value) && !value.contains("://") && !value.starts_with('/')
}

/// Words that say something about a password rather than being it.
const ABOUT: [&str; 63] = [
    "incorrect", "wrong", "required", "invalid", "expired", "empty", "missing", "hidden", "redacted", "changed",
    "reset", "correct", "same", "different", "strong", "weak", "too", "not", "the", "a", "an", "your", "my",
    "stored", "saved", "kept", "in", "on", "at", "set", "rotated", "needed", "still", "now", "also", "being",
    "known", "shared", "secret", "managed", "written", "unknown", "long", "short", "protected", "encrypted",
    "hashed", "sent", "there", "here", "available", "case-sensitive", "blank", "none", "null", "unchanged",
    "updated", "valid", "printed", "generated", "whatever", "something", "what",
];

/// Small words that a sentence about a passphrase has and a passphrase (random words) does not.
const FUNCTION_WORDS: [&str; 34] = [
    "at", "every", "the", "a", "an", "to", "for", "of", "in", "on", "by", "with", "and", "or", "is", "are", "be",
    "was", "when", "each", "per", "before", "after", "my", "your", "our", "their", "it", "this", "that", "not",
    "will", "should", "must",
];

/// A value after "password is": not a word about the password, not a placeholder; several
/// words only when none is a small word of a sentence.
fn prose_value(value: &str) -> bool {
    let words: Vec<String> = value.split_whitespace().map(str::to_lowercase).collect();
    if words.len() > 1 {
        return !words.iter().any(|w| FUNCTION_WORDS.contains(&w.as_str())) && !placeholder(value);
    }
    let lower = value.to_lowercase();
    let word = lower.trim_matches(|c: char| !c.is_alphanumeric() && c != '-');
    !word.is_empty() && !ABOUT.contains(&word) && !placeholder(value) && !value.chars().all(|c| c == '*' || c == 'x' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_catches_its_examples_and_leaves_its_look_alikes() {
        let file: RuleFile = toml::from_str(RULES).unwrap();
        assert!(!DETECTOR.rules.is_empty());
        let mut failures = Vec::new();
        for spec in &file.rule {
            for text in &spec.caught {
                if !find(text).iter().any(|f| f.kind == spec.kind) {
                    failures.push(format!("{}: missed {text:?}", spec.kind));
                }
            }
            for text in &spec.left {
                let found = find(text);
                if !found.is_empty() {
                    failures.push(format!("{}: caught {text:?} as {:?}", spec.kind, found));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn redaction_names_the_kind_and_keeps_the_rest() {
        let text = "CI uses 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, and the wifi password is hunter2-Blue.";
        let (redacted, found) = redact(text);
        assert_eq!(redacted, "CI uses [secret: github token], and the wifi password is [secret: password].");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].position(text), 9);
        let plain = "The deploy runs at noon.";
        assert_eq!(redact(plain), (plain.to_string(), Vec::new()));
    }

    #[test]
    fn a_marker_is_not_caught_again() {
        let (once, _) = redact("password: Xk9!mq2z and token 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");
        assert!(find(&once).is_empty(), "{once}");
    }
}
