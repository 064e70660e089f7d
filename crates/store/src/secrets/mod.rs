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

use std::sync::{LazyLock, OnceLock};

use regex::{Regex, RegexSet, RegexSetBuilder};
use serde::{Deserialize, Serialize};

use crate::archive::NewFact;

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
    /// Groups that are alternatives for the secret (a quoted or a bare value): the first that
    /// took part in the match. Empty: `group`.
    #[serde(default)]
    groups: Vec<usize>,
    /// A match this regex finds in (the whole match) is not a secret: a name that says the
    /// value is public (`STRIPE_PUBLISHABLE_KEY=…`).
    #[serde(default)]
    unless: Option<String>,
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
    /// A value after "password to", or after "password" alone: a password shape (letters and
    /// digits or symbols, or mixed case), not a verb or a word about it.
    ProseStrict,
    /// The value of a setting whose name says password (`DB_PASSWORD=…`): anything but a
    /// placeholder, a path, a flag word or a number too short to be one.
    SettingPassword,
    /// The value of a setting whose name says token, secret, key or credentials: long and
    /// varied enough to be a credential (hex allowed: the name says what it is).
    SettingSecret,
    /// `Basic <base64>` that decodes to `user:password`.
    Basic,
    /// An AWS access key id: varied characters, not the documentation's example.
    AwsId,
}

struct Rule {
    kind: String,
    /// Compiled the first time the set says the rule may match: most texts wake no rule, and a
    /// hook process compiles the set alone.
    regex: Lazy,
    groups: Vec<usize>,
    unless: Option<Lazy>,
    check: Check,
}

/// A regex of the rules, compiled on first use.
struct Lazy {
    pattern: String,
    what: String,
    compiled: OnceLock<Regex>,
}

impl Lazy {
    fn new(pattern: String, what: String) -> Lazy {
        Lazy { pattern, what, compiled: OnceLock::new() }
    }

    fn get(&self) -> &Regex {
        self.compiled
            .get_or_init(|| Regex::new(&self.pattern).unwrap_or_else(|e| panic!("rules.toml: {}: {e}", self.what)))
    }
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
            regex: Lazy::new(spec.regex, spec.kind.clone()),
            check: match spec.check.as_deref() {
                None => Check::None,
                Some("github-crc") => Check::GithubCrc,
                Some("jwt") => Check::Jwt,
                Some("entropy") => Check::Entropy,
                Some("prose") => Check::Prose,
                Some("prose-strict") => Check::ProseStrict,
                Some("setting-password") => Check::SettingPassword,
                Some("setting-secret") => Check::SettingSecret,
                Some("basic") => Check::Basic,
                Some("aws-id") => Check::AwsId,
                Some(other) => panic!("rules.toml: {}: no check {other:?}", spec.kind),
            },
            unless: spec.unless.map(|r| Lazy::new(r, format!("{}: unless", spec.kind))),
            kind: spec.kind,
            groups: if spec.groups.is_empty() { vec![spec.group] } else { spec.groups },
        })
        .collect();
    // The set's lazy DFA gets room for every rule at once: with the default 2 MiB it is rebuilt
    // over and over on text that wakes many rules (a pasted .env), 30 µs a line instead of 0.5.
    let set = RegexSetBuilder::new(rules.iter().map(|r| r.regex.pattern.as_str()))
        .dfa_size_limit(8 << 20)
        .build()
        .expect("the rules compile together");
    Detector { set, rules }
});

/// The secrets in `text`, in order, none overlapping (where two rules claim the same bytes, the
/// earlier and longer claim wins).
pub fn find(text: &str) -> Vec<Found> {
    let detector = &*DETECTOR;
    let mut found: Vec<Found> = Vec::new();
    for i in detector.set.matches(text).iter() {
        let rule = &detector.rules[i];
        for captures in rule.regex.get().captures_iter(text) {
            let Some(m) = rule.groups.iter().find_map(|&g| captures.get(g)) else { continue };
            if rule.unless.as_ref().is_some_and(|unless| unless.get().is_match(&captures[0])) {
                continue;
            }
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

/// What a credential in an arriving fact becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretsPolicy {
    /// Replaced by a marker naming its kind before anything is written; the rest is stored.
    Redact,
    /// The request is refused, naming the kind and position; nothing of it is stored.
    Refuse,
    /// Stored as given, never promoted to `MEMORY.md` and masked in every LLM request.
    Allow,
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
    if !matches!(check, Check::Prose | Check::ProseStrict) {
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
        Check::ProseStrict => prose_value(value) && password_shaped(value),
        Check::SettingPassword => setting_password(value),
        Check::SettingSecret => setting_secret(value),
        Check::Basic => basic(value),
        Check::AwsId => !placeholder(value) && distinct(value) >= 8,
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
const PLACEHOLDERS: [&str; 10] =
    ["example", "your", "xxxx", "here", "redacted", "placeholder", "dummy", "changeme", "sample", "****"];

/// A random-looking key that holds a placeholder word anywhere (`AIzaSyYOUR_API_KEY_HERE`,
/// `AKIAIOSFODNN7EXAMPLE`): a generated key never spells an English word.
fn placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    PLACEHOLDERS.iter().any(|p| lower.contains(p)) || template(value)
}

/// A value that stands for one to fill in: a template (`${DB_PASSWORD}`, `{{ token }}`,
/// `<your password>`, `%PASS%`).
fn template(value: &str) -> bool {
    let variable =
        |name: &str| !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    value.contains("${")
        || value.contains("{{")
        || value.starts_with('<')
        || value.starts_with('(')
        || value.starts_with('[')
        || value.strip_prefix('$').is_some_and(variable)
        || value.strip_prefix('%').and_then(|v| v.strip_suffix('%')).is_some_and(variable)
}

/// A password a person chose is a placeholder only as a whole (`changeme`, `your-password-here`,
/// `xxxxxxxx`, `<password>`): `Atmosphere2024` and `Here-We-Go-2025` are passwords, though
/// they hold "here".
fn placeholder_password(value: &str) -> bool {
    const WHOLE: [&str; 16] = [
        "changeme",
        "password",
        "passwd",
        "secret",
        "redacted",
        "placeholder",
        "dummy",
        "example",
        "sample",
        "none",
        "null",
        "nil",
        "empty",
        "undefined",
        "hidden",
        "masked",
    ];
    const OF_YOURS: [&str; 9] = ["password", "pass", "pwd", "key", "token", "secret", "api", "here", "value"];
    if template(value)
        || value.contains("xxxx")
        || value.contains("XXXX")
        || value.contains("***")
        || value.contains("...")
        || value.contains('…')
    {
        return true;
    }
    let words = words_of(value);
    let joined: String = words.concat();
    WHOLE.contains(&joined.as_str())
        || (words.first().is_some_and(|w| w == "your") && words.iter().skip(1).any(|w| OF_YOURS.contains(&w.as_str())))
        || (words.last().is_some_and(|w| w == "here") && words.iter().any(|w| OF_YOURS.contains(&w.as_str())))
        || value.chars().all(|c| c == value.chars().next().unwrap_or('x'))
}

/// The lower-cased words of a value, split at anything not a letter or digit and where a
/// lower-case letter meets an upper-case one (`YourApiKey` → your, api, key).
fn words_of(value: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut prev_lower = false;
    for c in value.chars() {
        if !c.is_alphanumeric() {
            prev_lower = false;
            words.push(String::new());
            continue;
        }
        if c.is_uppercase() && prev_lower {
            words.push(String::new());
        }
        prev_lower = c.is_lowercase();
        match words.last_mut() {
            Some(w) => w.extend(c.to_lowercase()),
            None => words.push(c.to_lowercase().collect()),
        }
    }
    words.retain(|w| !w.is_empty());
    words
}

/// How many different characters.
fn distinct(value: &str) -> usize {
    value.chars().collect::<std::collections::HashSet<_>>().len()
}

/// Letters with digits or symbols, or with upper case after the first letter: what a chosen
/// password looks like, and a word of a sentence does not.
fn password_shaped(value: &str) -> bool {
    let letters = value.chars().any(char::is_alphabetic);
    let digits = value.chars().any(|c| c.is_ascii_digit());
    let symbols = value.chars().any(|c| !c.is_alphanumeric());
    let inner_upper = value.chars().skip(1).any(char::is_uppercase);
    (letters && (digits || symbols || inner_upper)) || (digits && symbols)
}

/// The value of a setting named as a password.
fn setting_password(value: &str) -> bool {
    const FLAGS: [&str; 10] =
        ["true", "false", "yes", "no", "on", "off", "required", "optional", "disabled", "enabled"];
    let lower = value.to_ascii_lowercase();
    value.chars().count() >= 4
        && !placeholder_password(value)
        && !FLAGS.contains(&lower.as_str())
        && !value.starts_with('/')
        && !value.starts_with("./")
        && !value.starts_with("~/")
        && !value.contains("://")
}

/// The value of a setting named as a token, secret, key or credentials.
fn setting_secret(value: &str) -> bool {
    let n = value.chars().count();
    let hex = n >= 16 && value.trim_start_matches("0x").chars().all(|c| c.is_ascii_hexdigit());
    n >= 12
        && !placeholder_password(value)
        && !value.starts_with('/')
        && !value.starts_with("./")
        && !value.starts_with("~/")
        && !value.contains("://")
        && (hex || (entropy(value) >= 3.0 && distinct(value) >= 8 && varied(value)))
}

/// Letters with digits, or mixed case, or symbols beyond the separators of a name
/// (`my-cache-key-name` is a name; `super-long-random-string-9f8e7d` is not).
fn varied(value: &str) -> bool {
    let letters = value.chars().any(char::is_alphabetic);
    let digits = value.chars().any(|c| c.is_ascii_digit());
    let mixed = value.chars().any(char::is_lowercase) && value.chars().any(char::is_uppercase);
    let symbols = value.chars().any(|c| !c.is_alphanumeric() && !matches!(c, '-' | '_' | '.'));
    (letters && digits) || mixed || symbols
}

/// `Basic <base64>`: decodes to `user:password`.
fn basic(value: &str) -> bool {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(value)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .is_some_and(|pair| pair.split_once(':').is_some_and(|(user, pw)| !user.is_empty() && pw.len() >= 3))
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
    entropy(value) >= 3.0
        && (digit || mixed)
        && !hex
        && !placeholder(value)
        && !value.contains("://")
        && !value.starts_with('/')
}

/// Words that say something about a password rather than being it.
const ABOUT: [&str; 63] = [
    "incorrect",
    "wrong",
    "required",
    "invalid",
    "expired",
    "empty",
    "missing",
    "hidden",
    "redacted",
    "changed",
    "reset",
    "correct",
    "same",
    "different",
    "strong",
    "weak",
    "too",
    "not",
    "the",
    "a",
    "an",
    "your",
    "my",
    "stored",
    "saved",
    "kept",
    "in",
    "on",
    "at",
    "set",
    "rotated",
    "needed",
    "still",
    "now",
    "also",
    "being",
    "known",
    "shared",
    "secret",
    "managed",
    "written",
    "unknown",
    "long",
    "short",
    "protected",
    "encrypted",
    "hashed",
    "sent",
    "there",
    "here",
    "available",
    "case-sensitive",
    "blank",
    "none",
    "null",
    "unchanged",
    "updated",
    "valid",
    "printed",
    "generated",
    "whatever",
    "something",
    "what",
];

/// Small words that a sentence about a passphrase has and a passphrase (random words) does not.
const FUNCTION_WORDS: [&str; 34] = [
    "at", "every", "the", "a", "an", "to", "for", "of", "in", "on", "by", "with", "and", "or", "is", "are", "be",
    "was", "when", "each", "per", "before", "after", "my", "your", "our", "their", "it", "this", "that", "not", "will",
    "should", "must",
];

/// A value after "password is": not a word about the password, not a placeholder; several
/// words only when none is a small word of a sentence.
fn prose_value(value: &str) -> bool {
    let words: Vec<String> = value.split_whitespace().map(str::to_lowercase).collect();
    if words.len() > 1 {
        return !words.iter().any(|w| FUNCTION_WORDS.contains(&w.as_str())) && !placeholder_password(value);
    }
    let lower = value.to_lowercase();
    let word = lower.trim_matches(|c: char| !c.is_alphanumeric() && c != '-');
    !word.is_empty()
        && !ABOUT.contains(&word)
        && !placeholder_password(value)
        && !value.chars().all(|c| c == '*' || c == 'x' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_catches_its_examples_and_leaves_its_look_alikes() {
        let file: RuleFile = toml::from_str(RULES).unwrap();
        assert!(!DETECTOR.rules.is_empty());
        // Compiled lazily in use: each compiles.
        for rule in &DETECTOR.rules {
            rule.regex.get();
            if let Some(unless) = &rule.unless {
                unless.get();
            }
        }
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
