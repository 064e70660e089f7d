//! Aspects: what a fact or an entry is about, as keys `subject / attribute` ("user / employer",
//! "partner / commute", "dog / vet"), a second source of decision candidates beside similarity.
//!
//! A fact worded the way people talk ("Handed back my badge on Friday; Monday is my first day at
//! Hydro-Québec.") rarely sounds like the entry it updates ("Employed by Desjardins on the fraud
//! analytics team."), so ranking by similarity alone seldom shows the decider the two together.
//! Both are about the user's employer. Each fact is therefore shown, besides its ranked
//! neighbours, the entries that share an attribute with it, best first (a compatible subject,
//! then cosine), at most `consolidation.aspect_k` ([`candidates`]).
//!
//! Keys come from the [`Taxonomy`], a list of life aspects kept as data (built in, extended by
//! `consolidation.aspects_file`): the offline [`Keyer`] tags a text with the attributes whose cue
//! words it contains and those whose example sentences its vector is nearest to, and with the
//! subject its words name (a relation word, or a name learned from entries such as "Partner
//! Théo …", [`Names`]; `someone` when it opens with a name it does not know, such as a
//! nickname). With an LLM configured, facts also carry the keys the LLM gave them
//! (at extraction, or in one keying call per pass), cached by text under `.memfold/`
//! (`memfold_store::caches`); an entry carries the keys of the facts it was made from.
//!
//! Keys are derived, never the truth, and never a reason to merge: they only add candidates.
//! No key, threshold or cosine decides anything.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::stem::{stem, stems};
use memfold_models::embed::{EmbedError, Embedder};

/// What a text is about: a subject class (`user`, `partner`, `dog`, …) and an attribute.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Key {
    pub subject: String,
    pub attribute: String,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} / {}", self.subject, self.attribute)
    }
}

/// The subject of a text that names none: the person whose memory it is.
pub const USER: &str = "user";
/// The subject of a text that names a person memfold knows nothing about.
pub const SOMEONE: &str = "someone";

/// Whether two subjects may be the same: equal, one a narrower form of the other ("parent" and
/// "parent in law"), or one an unknown person and the other anyone but the user.
pub fn compatible(a: &str, b: &str) -> bool {
    let narrower = |x: &str, y: &str| x.strip_prefix(y).is_some_and(|rest| rest.starts_with(' '));
    a == b || narrower(a, b) || narrower(b, a) || ((a == SOMEONE || b == SOMEONE) && a != USER && b != USER)
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SubjectDef {
    name: String,
    cues: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct AspectDef {
    name: String,
    #[serde(default)]
    area: String,
    /// One value at a time (an employer, a home city), as opposed to several (hobbies).
    #[serde(default)]
    single: bool,
    cues: Vec<String>,
    #[serde(default)]
    examples: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct TaxonomyFile {
    #[serde(default)]
    subject: Vec<SubjectDef>,
    #[serde(default)]
    aspect: Vec<AspectDef>,
}

/// The life aspects and subjects keys are made of.
#[derive(Debug, Clone)]
pub struct Taxonomy {
    subjects: Vec<(String, Vec<Vec<String>>)>,
    /// Each subject cue, with the first subject that lists it: what [`Taxonomy::subject_of`]
    /// looks up for every word of every text.
    subject_cues: HashMap<Vec<String>, usize>,
    aspects: Vec<AspectDef>,
    /// Per aspect: its cues as stems.
    cues: Vec<Vec<Vec<String>>>,
}

/// The built-in taxonomy.
const BUILTIN: &str = include_str!("taxonomy.toml");

impl Taxonomy {
    /// The built-in taxonomy.
    pub fn builtin() -> Taxonomy {
        Taxonomy::from_files(&[BUILTIN]).expect("the built-in taxonomy parses (tested)")
    }

    /// The built-in taxonomy extended by the TOML file at `path` (same format): its aspects and
    /// subjects are added, and one with the name of a built-in one replaces it.
    pub fn with_file(path: &Path) -> Result<Taxonomy, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Taxonomy::from_files(&[BUILTIN, &text]).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn from_files(texts: &[&str]) -> Result<Taxonomy, String> {
        let mut all = TaxonomyFile::default();
        for text in texts {
            let file: TaxonomyFile = toml::from_str(text).map_err(|e| e.to_string())?;
            for s in file.subject {
                all.subject.retain(|x| x.name != s.name);
                all.subject.push(s);
            }
            for a in file.aspect {
                all.aspect.retain(|x| x.name != a.name);
                all.aspect.push(a);
            }
        }
        let stems = |cues: &[String]| cues.iter().map(|c| stems(c)).filter(|c| !c.is_empty()).collect();
        let subjects: Vec<(String, Vec<Vec<String>>)> =
            all.subject.iter().map(|s| (s.name.to_lowercase(), stems(&s.cues))).collect();
        let mut subject_cues = HashMap::new();
        for (at, (_, cues)) in subjects.iter().enumerate() {
            for cue in cues {
                subject_cues.entry(cue.clone()).or_insert(at);
            }
        }
        let cues = all.aspect.iter().map(|a| stems(&a.cues)).collect();
        Ok(Taxonomy { subjects, subject_cues, aspects: all.aspect, cues })
    }

    /// The attributes that hold one value at a time.
    pub fn single_attributes(&self) -> impl Iterator<Item = &str> {
        self.aspects.iter().filter(|a| a.single).map(|a| a.name.as_str())
    }

    /// The attribute names, for the LLM's keying prompt.
    pub fn attributes(&self) -> impl Iterator<Item = &str> {
        self.aspects.iter().map(|a| a.name.as_str())
    }

    /// The subject class a word or phrase names ("husband" → `partner`), if any.
    fn subject_of(&self, phrase: &[String]) -> Option<&str> {
        self.subject_cues.get(phrase).map(|&at| self.subjects[at].0.as_str())
    }

    /// Read a key as an LLM writes it ("user / employer", "husband / job"): the subject is
    /// mapped to its class (an unknown one is [`SOMEONE`]), the attribute lowercased.
    pub fn parse_key(&self, text: &str) -> Option<Key> {
        let (subject, attribute) = text.split_once('/')?;
        let attribute = attribute.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
        let subject = stems(subject);
        if attribute.is_empty() || subject.is_empty() {
            return None;
        }
        let class = if subject == [USER] || subject == ["i"] || subject == ["me"] {
            USER.to_string()
        } else if let Some(class) = self.subjects.iter().find(|(name, _)| stems(name) == subject) {
            class.0.clone()
        } else {
            // "sister Ana": the class of any cue it holds.
            let found = (1..=subject.len())
                .rev()
                .flat_map(|n| subject.windows(n))
                .find_map(|w| self.subject_of(w).map(str::to_string));
            found.unwrap_or_else(|| SOMEONE.to_string())
        };
        Some(Key { subject: class, attribute })
    }
}

/// Names learned from entries that introduce someone ("Partner Théo …", "Dog Bruno's vet …"),
/// lowercased, with the subject class they belong to.
#[derive(Debug, Clone, Default)]
pub struct Names(HashMap<String, String>);

impl Names {
    /// Learn from texts that start with a relation word (or two) followed by capitalised names.
    pub fn learn<'a>(texts: impl IntoIterator<Item = &'a str>, taxonomy: &Taxonomy) -> Names {
        let mut names = HashMap::new();
        for text in texts {
            let raw: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
            let stems: Vec<String> = raw.iter().map(|w| stem(&w.to_lowercase())).collect();
            // The longest relation phrase at the start ("father in law", "best friend").
            let Some((len, class)) = (1..=stems.len().min(4))
                .rev()
                .find_map(|n| taxonomy.subject_of(&stems[..n]).map(|class| (n, class.to_string())))
            else {
                continue;
            };
            for word in raw[len..].iter().take(2).take_while(|w| w.chars().next().is_some_and(char::is_uppercase)) {
                names.entry(word.to_lowercase()).or_insert_with(|| class.clone());
            }
        }
        Names(names)
    }
}

/// The offline keyer: attributes by cue words and by the nearest example sentences, the
/// subject by relation words and learned names.
pub struct Keyer {
    taxonomy: Taxonomy,
    /// Example vectors, and the aspect each belongs to.
    examples: Vec<Vec<f32>>,
    owners: Vec<usize>,
    /// Cues by their first stem: (aspect, the whole cue).
    cue_index: HashMap<String, Vec<(usize, Vec<String>)>>,
    params: KeyerParams,
}

/// How many attributes the examples may add, and how near they must be.
#[derive(Debug, Clone, Copy)]
pub struct KeyerParams {
    /// Attributes taken by example similarity, besides those whose cues matched.
    pub semantic_top: usize,
    /// Cosine below which an example does not count.
    pub semantic_floor: f32,
    /// Most attributes per text.
    pub max_attributes: usize,
}

impl Default for KeyerParams {
    fn default() -> Self {
        KeyerParams { semantic_top: 2, semantic_floor: 0.45, max_attributes: 4 }
    }
}

impl Keyer {
    /// A keyer over `taxonomy`, its examples embedded by `embedder`. The built-in `local`
    /// embedder's vectors say which letters two texts share, not what they mean, so with it the
    /// examples are not used: attributes come from cue words alone.
    pub async fn new(
        taxonomy: Taxonomy,
        embedder: &dyn Embedder,
        mut params: KeyerParams,
    ) -> Result<Keyer, EmbedError> {
        if embedder.id().starts_with("local:") {
            params.semantic_top = 0;
        }
        let (owners, texts): (Vec<usize>, Vec<String>) = taxonomy
            .aspects
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.examples.iter().map(move |e| (i, e.clone())))
            .unzip();
        let examples =
            if params.semantic_top == 0 || texts.is_empty() { Vec::new() } else { embedder.embed(&texts).await? };
        Ok(Keyer::with_examples(taxonomy, examples, owners, params))
    }

    fn with_examples(taxonomy: Taxonomy, examples: Vec<Vec<f32>>, owners: Vec<usize>, params: KeyerParams) -> Keyer {
        let mut cue_index: HashMap<String, Vec<(usize, Vec<String>)>> = HashMap::new();
        for (aspect, cues) in taxonomy.cues.iter().enumerate() {
            for cue in cues {
                cue_index.entry(cue[0].clone()).or_default().push((aspect, cue.clone()));
            }
        }
        // Where several cues start at one word, the longest leads ("bike lock" before "bike");
        // equal lengths keep the taxonomy's order.
        for cues in cue_index.values_mut() {
            cues.sort_by_key(|(_, cue)| std::cmp::Reverse(cue.len()));
        }
        Keyer { taxonomy, examples, owners, cue_index, params }
    }

    pub fn taxonomy(&self) -> &Taxonomy {
        &self.taxonomy
    }

    /// The keys of each text, given its vector (same order). The examples are scored with one
    /// matrix product per chunk of texts.
    pub fn keys(&self, texts: &[&str], vectors: &[&[f32]], names: &Names) -> Vec<Vec<Key>> {
        let nearest = self.nearest_aspects(vectors);
        texts
            .iter()
            .zip(nearest)
            .map(|(text, nearest)| {
                let stems = stems(text);
                let subject = self.subject(text, &stems, names);
                // In order: the attribute whose cue comes first in the text leads (an entry
                // usually opens with what it is about: "Front door code is 2291.").
                self.attributes(&stems, &nearest)
                    .into_iter()
                    .map(|a| Key { subject: subject.clone(), attribute: self.taxonomy.aspects[a].name.clone() })
                    .collect()
            })
            .collect()
    }

    /// The attributes of a text: those whose cues it holds, then its nearest by example, up to
    /// the cap. `nearest` is (aspect, similarity), best first.
    fn attributes(&self, stems: &[String], nearest: &[(usize, f32)]) -> Vec<usize> {
        let mut found: Vec<usize> = Vec::new();
        for (i, stem) in stems.iter().enumerate() {
            for (aspect, cue) in self.cue_index.get(stem).into_iter().flatten() {
                if !found.contains(aspect) && stems[i..].starts_with(cue) {
                    found.push(*aspect);
                }
            }
        }
        if found.len() > self.params.max_attributes {
            let score = |a: usize| nearest.iter().find(|n| n.0 == a).map_or(f32::MIN, |n| n.1);
            found.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
            found.truncate(self.params.max_attributes);
        }
        for &(aspect, _) in nearest.iter().take(self.params.semantic_top) {
            if found.len() < self.params.max_attributes && !found.contains(&aspect) {
                found.push(aspect);
            }
        }
        found
    }

    /// Per vector: the aspects whose nearest example is at least `semantic_floor` similar, best
    /// first (empty without examples).
    fn nearest_aspects(&self, vectors: &[&[f32]]) -> Vec<Vec<(usize, f32)>> {
        if self.examples.is_empty() || vectors.is_empty() {
            return vec![Vec::new(); vectors.len()];
        }
        let dim = self.examples[0].len();
        let nodes: Vec<super::cluster::Node> =
            self.examples.iter().map(|v| super::cluster::Node { id: "", text: "", vector: v }).collect();
        let score = |row: &[f32]| {
            let mut best = vec![f32::MIN; self.taxonomy.aspects.len()];
            for (&owner, &s) in self.owners.iter().zip(row) {
                best[owner] = best[owner].max(s);
            }
            let mut ranked: Vec<(usize, f32)> =
                best.into_iter().enumerate().filter(|&(_, s)| s >= self.params.semantic_floor).collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            ranked.truncate(self.params.max_attributes);
            ranked
        };
        let scored = super::cluster::Scorer::new(&nodes, dim).and_then(|scorer| {
            let mut out = Vec::with_capacity(vectors.len());
            for chunk in vectors.chunks(512) {
                let q: Vec<f32> = chunk.iter().flat_map(|v| super::cluster::pad(v, dim)).collect();
                scorer.scores(q, chunk.len(), |scores| out.extend(scores.chunks(nodes.len()).map(score)))?;
            }
            Ok(out)
        });
        scored.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "aspect examples not scored; keys come from cue words alone");
            vec![Vec::new(); vectors.len()]
        })
    }

    /// The subject a text is about: the first relation word or known name it holds (in a
    /// possessive chain, the last: "Théo's dad" is about a parent), else the user. (A name it
    /// does not know may be a brand, a place or a weekday as well as a person: it is left out.)
    fn subject(&self, text: &str, stems: &[String], names: &Names) -> String {
        let raw: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
        let mention = |at: usize| -> Option<(usize, String)> {
            for n in (1..=4).rev() {
                if at + n <= stems.len()
                    && let Some(class) = self.taxonomy.subject_of(&stems[at..at + n])
                {
                    return Some((n, class.to_string()));
                }
            }
            let word = raw.get(at)?;
            let capital = word.chars().next().is_some_and(char::is_uppercase);
            names.0.get(&word.to_lowercase()).filter(|_| capital).map(|class| (1, class.clone()))
        };
        let mut at = 0;
        while at < stems.len() {
            if let Some((len, mut class)) = mention(at) {
                // "X's Y": the subject is Y.
                let mut next = at + len;
                while stems.get(next).is_some_and(|s| s == "s") {
                    match mention(next + 1) {
                        Some((len, inner)) => {
                            class = inner;
                            next += 1 + len;
                        }
                        None => break,
                    }
                }
                return class;
            }
            at += 1;
        }
        if self.opens_with_someone(&raw, stems) { SOMEONE.to_string() } else { USER.to_string() }
    }

    /// Whether a text that names no subject it knows opens with the name of a person it does not
    /// know ("Sasha transferred …", "Dima's engaged", a nickname of a known name): a capitalised
    /// first word that is no cue of the taxonomy, no weekday or month, followed by a possessive
    /// or a verb in the past tense, in a text that does not speak of "I" or "we".
    fn opens_with_someone(&self, raw: &[&str], stems: &[String]) -> bool {
        const FIRST_PERSON: &[&str] = &["i", "me", "my", "mine", "myself", "we", "us", "our", "ours"];
        const NOT_NAMES: &[&str] = &[
            "the",
            "a",
            "an",
            "this",
            "that",
            "these",
            "those",
            "it",
            "he",
            "she",
            "they",
            "his",
            "her",
            "their",
            "someone",
            "everyone",
            "nobody",
            "today",
            "yesterday",
            "tonight",
            "tomorrow",
            "last",
            "next",
            "new",
            "old",
        ];
        let (Some(first), Some(second)) = (raw.first(), raw.get(1)) else { return false };
        let lower = first.to_lowercase();
        let past = |w: &str| w.chars().count() > 4 && w.ends_with("ed");
        let capitalised =
            first.chars().next().is_some_and(char::is_uppercase) && first.chars().skip(1).any(char::is_lowercase);
        // Checked last: every text that names no subject comes here, and most fail at once.
        let a_cue = || {
            self.cue_index.contains_key(&stems[0])
                || self.taxonomy.subjects.iter().any(|(_, cues)| cues.iter().any(|c| c[0] == stems[0]))
        };
        capitalised
            && (*second == "s" || past(&second.to_lowercase()))
            && !past(&lower)
            && !lower.ends_with("ing")
            && !NOT_NAMES.contains(&lower.as_str())
            && !super::calendar::is_weekday(&lower)
            && !super::calendar::MONTHS.contains(&lower.as_str())
            && !raw.iter().any(|w| FIRST_PERSON.contains(&w.to_lowercase().as_str()))
            && !a_cue()
    }
}

/// The aspect keys of a memory root: the offline keyer, and the keying call when an LLM is
/// configured. Cheap to clone.
#[derive(Clone)]
pub struct Aspects {
    keyer: std::sync::Arc<Keyer>,
    keying: Option<Keying>,
}

/// The keying call: the chat client and its system message (the prompt and the attributes).
#[derive(Clone)]
pub struct Keying {
    pub chat: memfold_models::llm::ChatClient,
    pub system: String,
}

/// Keys an LLM gave, parsed: per fact and per entry of a pass (same order as its lists).
#[derive(Debug, Default, Clone)]
pub struct LlmKeys {
    pub facts: Vec<Vec<Key>>,
    pub entries: Vec<Vec<Key>>,
}

/// What [`Aspects::candidates`] found.
#[derive(Debug, Default, Clone)]
pub struct Candidates {
    /// Per fact: the entries it is shown because they share an attribute (indices).
    pub per_fact: Vec<Vec<usize>>,
    /// The keys of every fact and entry (same order as the pass's lists).
    pub fact_keys: Vec<Vec<Key>>,
    pub entry_keys: Vec<Vec<Key>>,
    pub facts_keyed: usize,
    pub facts_keyed_by_llm: usize,
}

impl Aspects {
    pub fn new(keyer: Keyer, keying: Option<Keying>) -> Aspects {
        Aspects { keyer: std::sync::Arc::new(keyer), keying }
    }

    pub fn taxonomy(&self) -> &Taxonomy {
        self.keyer.taxonomy()
    }

    pub fn keying(&self) -> Option<&Keying> {
        self.keying.as_ref()
    }

    /// The keys of every entry and fact of a pass (offline, joined with what the LLM gave), and
    /// per fact the entries that share an attribute with it, at most `k`. Blocking (a matrix
    /// product).
    pub fn candidates(
        &self,
        entries: &[crate::planning::run::ops::Neighbor],
        facts: &[crate::planning::run::ops::Candidate],
        vectors: &[Vec<f32>],
        llm: &LlmKeys,
        k: usize,
    ) -> Candidates {
        let (entry_vectors, fact_vectors) = vectors.split_at(entries.len());
        let entry_vectors: Vec<&[f32]> = entry_vectors.iter().map(Vec::as_slice).collect();
        let fact_vectors: Vec<&[f32]> = fact_vectors.iter().map(Vec::as_slice).collect();
        let names = Names::learn(entries.iter().map(|e| e.content.as_str()), self.taxonomy());
        // The LLM's keys lead: they name what a text is about better than cue words do.
        let join = |offline: Vec<Vec<Key>>, llm: &[Vec<Key>]| {
            let mut all = offline;
            for (keys, first) in all.iter_mut().zip(llm) {
                let rest = std::mem::take(keys);
                *keys = first.clone();
                keys.extend(rest.into_iter().filter(|k| !first.contains(k)));
            }
            all
        };
        let entry_texts: Vec<&str> = entries.iter().map(|e| e.content.as_str()).collect();
        let fact_texts: Vec<&str> = facts.iter().map(|f| f.text.as_str()).collect();
        let entry_keys = join(self.keyer.keys(&entry_texts, &entry_vectors, &names), &llm.entries);
        let fact_keys = join(self.keyer.keys(&fact_texts, &fact_vectors, &names), &llm.facts);
        Candidates {
            per_fact: candidates(&fact_keys, &entry_keys, &fact_vectors, &entry_vectors, k),
            facts_keyed: fact_keys.iter().filter(|k| !k.is_empty()).count(),
            facts_keyed_by_llm: llm.facts.iter().filter(|k| !k.is_empty()).count(),
            fact_keys,
            entry_keys,
        }
    }
}

/// What leading a text's keys is worth in [`candidates`], against a cosine of 1.
const LEAD_WEIGHT: f32 = 0.6;

/// Per fact: the entries that share an attribute with it, at most `k`, best first. An entry
/// scores for its best shared attribute: a compatible subject, how early the attribute comes
/// among the entry's keys (and the fact's: the first is what a text is chiefly about), and its
/// cosine with the fact (vectors are unit length). Entries a fact is already shown may be among
/// them; the caller merges.
pub fn candidates(
    fact_keys: &[Vec<Key>],
    entry_keys: &[Vec<Key>],
    fact_vectors: &[&[f32]],
    entry_vectors: &[&[f32]],
    k: usize,
) -> Vec<Vec<usize>> {
    if k == 0 {
        return vec![Vec::new(); fact_keys.len()];
    }
    let mut by_attribute: HashMap<&str, Vec<usize>> = HashMap::new();
    for (e, keys) in entry_keys.iter().enumerate() {
        for key in keys {
            by_attribute.entry(key.attribute.as_str()).or_default().push(e);
        }
    }
    let shortlists = shortlists(fact_keys, entry_keys, fact_vectors, entry_vectors, &by_attribute, 2 * k);
    fact_keys
        .iter()
        .zip(fact_vectors)
        .enumerate()
        .map(|(f, (keys, vector))| {
            // Per entry: its cosine, whether a subject matched, and what the shared attributes add.
            let mut scored: HashMap<usize, (f32, bool, f32)> = HashMap::new();
            for (at_fact, key) in keys.iter().enumerate() {
                let attribute = key.attribute.as_str();
                let list = shortlists.get(&(attribute, f)).or_else(|| by_attribute.get(attribute));
                for &e in list.into_iter().flatten() {
                    let at_entry = entry_keys[e].iter().position(|k| k.attribute == key.attribute).unwrap_or(0);
                    let same = compatible(&entry_keys[e][at_entry].subject, &key.subject);
                    let slot = scored
                        .entry(e)
                        .or_insert_with(|| (vector.iter().zip(entry_vectors[e]).map(|(a, b)| a * b).sum(), false, 0.0));
                    slot.1 |= same;
                    slot.2 += LEAD_WEIGHT / (1 + at_entry) as f32 + LEAD_WEIGHT / 2.0 / (1 + at_fact) as f32;
                }
            }
            let scored = scored
                .into_iter()
                .map(|(e, (cosine, same, shared))| (e, cosine + if same { 1.0 } else { 0.0 } + shared));
            let mut ranked: Vec<(usize, f32)> = scored.collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            ranked.into_iter().take(k).map(|(e, _)| e).collect()
        })
        .collect()
}

/// Entries sharing one attribute past which a fact keyed with it is not scored against each of
/// them one by one (10k facts against 50k entries of templated text once spent a minute here).
const LONG_LIST: usize = 512;

/// For every attribute shared by more than [`LONG_LIST`] entries, per fact keyed with it: the
/// `m` entries of that list that score best for that attribute alone (cosine, a compatible
/// subject, the attribute's place among the entry's keys), found with one matrix product per
/// list. [`candidates`] then weighs only those, so its work grows with the facts, not with the
/// facts times the entries. An entry outside a fact's shortlist could still have won through
/// another attribute it shares with the fact; with `m` twice what is kept, that is rare.
fn shortlists<'a>(
    fact_keys: &'a [Vec<Key>],
    entry_keys: &[Vec<Key>],
    fact_vectors: &[&[f32]],
    entry_vectors: &[&[f32]],
    by_attribute: &HashMap<&str, Vec<usize>>,
    m: usize,
) -> HashMap<(&'a str, usize), Vec<usize>> {
    use super::cluster::{Node, SCORE_BLOCK, Scorer, best_of, pad};
    let mut keyed: HashMap<&str, Vec<(usize, &str)>> = HashMap::new();
    for (f, keys) in fact_keys.iter().enumerate() {
        for key in keys {
            if by_attribute.get(key.attribute.as_str()).is_some_and(|list| list.len() > LONG_LIST) {
                keyed.entry(key.attribute.as_str()).or_default().push((f, key.subject.as_str()));
            }
        }
    }
    let mut out = HashMap::new();
    for (attribute, facts) in keyed {
        let list = &by_attribute[attribute];
        let dim = list.iter().map(|&e| entry_vectors[e].len()).max().unwrap_or(0);
        let nodes: Vec<Node> = list.iter().map(|&e| Node { id: "", text: "", vector: entry_vectors[e] }).collect();
        // What each entry of the list adds besides its cosine, and its subject.
        let (lead, subjects): (Vec<f32>, Vec<&str>) = list
            .iter()
            .map(|&e| {
                let at = entry_keys[e].iter().position(|k| k.attribute == attribute).unwrap_or(0);
                (LEAD_WEIGHT / (1 + at) as f32, entry_keys[e][at].subject.as_str())
            })
            .collect();
        let Ok(scorer) = Scorer::new(&nodes, dim) else { continue };
        let mut same: HashMap<&str, Vec<f32>> = HashMap::new();
        for chunk in facts.chunks(SCORE_BLOCK) {
            let q: Vec<f32> = chunk.iter().flat_map(|&(f, _)| pad(fact_vectors[f], dim)).collect();
            let scored = scorer.scores(q, chunk.len(), |scores| {
                for (&(f, subject), row) in chunk.iter().zip(scores.chunks(list.len())) {
                    let same = same.entry(subject).or_insert_with(|| {
                        subjects.iter().map(|s| if compatible(s, subject) { 1.0 } else { 0.0 }).collect()
                    });
                    let row: Vec<f32> = row.iter().zip(&lead).zip(same.iter()).map(|((c, l), s)| c + l + s).collect();
                    let best = best_of(&row, m, f32::NEG_INFINITY, None).into_iter().map(|j| list[j]);
                    // A fact keyed twice with the attribute (two subjects) keeps both shortlists.
                    let shortlist: &mut Vec<usize> = out.entry((attribute, f)).or_default();
                    for e in best {
                        if !shortlist.contains(&e) {
                            shortlist.push(e);
                        }
                    }
                }
            });
            if scored.is_err() {
                // Out of memory for the product: the fact is scored against the whole list.
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_taxonomy_parses_with_unique_names_and_usable_cues() {
        let taxonomy = Taxonomy::builtin();
        let names: std::collections::BTreeSet<&str> = taxonomy.attributes().collect();
        assert_eq!(names.len(), taxonomy.aspects.len());
        assert!(taxonomy.aspects.len() >= 100, "{}", taxonomy.aspects.len());
        assert!(taxonomy.cues.iter().all(|c| !c.is_empty()));
        assert!(taxonomy.single_attributes().any(|a| a == "employer"));
    }

    #[test]
    fn keys_written_by_an_llm_map_to_subject_classes() {
        let taxonomy = Taxonomy::builtin();
        let key = |t: &str| taxonomy.parse_key(t).map(|k| k.to_string());
        assert_eq!(key("user / Employer").as_deref(), Some("user / employer"));
        assert_eq!(key("husband / job").as_deref(), Some("partner / job"));
        assert_eq!(key("sister Ana / home city").as_deref(), Some("sibling / home city"));
        assert_eq!(key("Zebulon / job").as_deref(), Some("someone / job"));
        assert_eq!(key("no slash"), None);
    }

    /// The shortlist of a long attribute list changes nothing for a fact keyed with that
    /// attribute alone: the same entries as scoring every entry of the list one by one.
    #[test]
    fn a_long_attribute_list_gives_the_entries_a_full_scan_gives() {
        let mut next = super::super::cluster::noise(0x2545_f491_4f6c_dd1d);
        let mut unit = |n: usize| {
            let v: Vec<f32> = (0..n).map(|_| next()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        let key = |subject: &str, attribute: &str| Key { subject: subject.into(), attribute: attribute.into() };
        let entries: Vec<Vec<f32>> = (0..3 * LONG_LIST).map(|_| unit(16)).collect();
        let facts: Vec<Vec<f32>> = (0..40).map(|_| unit(16)).collect();
        let subjects = [USER, SOMEONE, "partner", "friend"];
        let entry_keys: Vec<Vec<Key>> = (0..entries.len())
            .map(|e| match e % 3 {
                0 => vec![key(subjects[e % 4], "recommendation")],
                _ => vec![key(subjects[e % 4], "hobby"), key(subjects[(e + 1) % 4], "recommendation")],
            })
            .collect();
        let fact_keys: Vec<Vec<Key>> = (0..facts.len()).map(|f| vec![key(subjects[f % 4], "recommendation")]).collect();
        let entry_vectors: Vec<&[f32]> = entries.iter().map(Vec::as_slice).collect();
        let fact_vectors: Vec<&[f32]> = facts.iter().map(Vec::as_slice).collect();
        let got = candidates(&fact_keys, &entry_keys, &fact_vectors, &entry_vectors, 6);
        for (f, near) in got.iter().enumerate() {
            let mut scan: Vec<(usize, f32)> = (0..entries.len())
                .map(|e| {
                    let at = entry_keys[e].iter().position(|k| k.attribute == "recommendation").unwrap();
                    let cosine: f32 = facts[f].iter().zip(&entries[e]).map(|(a, b)| a * b).sum();
                    let same = if compatible(&entry_keys[e][at].subject, &fact_keys[f][0].subject) { 1.0 } else { 0.0 };
                    (e, cosine + same + LEAD_WEIGHT / (1 + at) as f32 + LEAD_WEIGHT / 2.0)
                })
                .collect();
            scan.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let want: Vec<usize> = scan.into_iter().take(6).map(|(e, _)| e).collect();
            assert_eq!(near, &want, "fact {f}");
        }
    }

    #[test]
    fn subjects_compatible() {
        assert!(compatible("parent", "parent in law"));
        assert!(compatible(SOMEONE, "friend"));
        assert!(!compatible(SOMEONE, USER));
        assert!(!compatible("partner", "child"));
    }

    #[test]
    fn the_subject_is_a_relation_word_a_learned_name_or_the_user() {
        let taxonomy = Taxonomy::builtin();
        let keyer = Keyer::with_examples(taxonomy.clone(), Vec::new(), Vec::new(), KeyerParams::default());
        let names =
            Names::learn(["Partner Théo works as a physiotherapist.", "Dog Bruno's vet is Dr. Lee."], &taxonomy);
        let subject = |t: &str| keyer.subject(t, &stems(t), &names);
        assert_eq!(subject("Since his knee acts up, my husband takes the metro."), "partner");
        assert_eq!(subject("Théo is doing the afternoon pickup now."), "partner");
        assert_eq!(subject("Took Bruno in for his shots."), "dog");
        assert_eq!(subject("Got a pixie cut on Saturday."), USER);
        // A name it does not know, opening the text: someone (not the user), who may be anyone.
        assert_eq!(subject("Sasha transferred over to the security group last month."), SOMEONE);
        assert_eq!(subject("Dima's engaged to Hannah."), SOMEONE);
        assert_eq!(subject("Rent increased to 1,790 in July."), USER, "a thing the taxonomy knows");
        assert_eq!(subject("Defended the thesis in April."), USER);
        assert_eq!(subject("Monday's game moved to the evening."), USER);
        assert_eq!(subject("Tomorrow's checkup moved to the afternoon."), USER);
        assert_eq!(subject("Sasha said I should apply."), USER, "a text about what I do");
        let dad = subject("Théo's dad is back on his feet.");
        assert!(compatible(&dad, "parent in law"), "{dad}");
    }

    #[test]
    fn the_longest_cue_where_several_start_leads() {
        let keyer = Keyer::with_examples(Taxonomy::builtin(), Vec::new(), Vec::new(), KeyerParams::default());
        let text = "Upgraded the bike lock to an Abus Granit.";
        let keys = keyer.keys(&[text], &[&[]], &Names::default());
        let attributes: Vec<&str> = keys[0].iter().map(|k| k.attribute.as_str()).collect();
        assert_eq!(attributes.first(), Some(&"bike lock"), "{attributes:?}");
        assert!(attributes.contains(&"bike"), "the shorter cue still keys: {attributes:?}");
    }

    #[test]
    fn candidates_share_an_attribute_best_subject_first() {
        let key = |s: &str, a: &str| Key { subject: s.into(), attribute: a.into() };
        let facts = vec![vec![key("partner", "commute")]];
        let entries = vec![
            vec![key(USER, "commute")],
            vec![key("partner", "commute")],
            vec![key(USER, "employer")],
            vec![key(USER, "commute")],
        ];
        let f = [1.0f32, 0.0];
        let e = [[0.9f32, 0.1], [0.1, 0.9], [1.0, 0.0], [0.5, 0.5]];
        let entry_vectors: Vec<&[f32]> = e.iter().map(|v| v.as_slice()).collect();
        let got = candidates(&facts, &entries, &[&f], &entry_vectors, 2);
        assert_eq!(got, vec![vec![1, 0]], "the partner's entry first, then the nearest; never another attribute");
        assert_eq!(candidates(&facts, &entries, &[&f], &entry_vectors, 0), vec![Vec::<usize>::new()]);
    }
}
