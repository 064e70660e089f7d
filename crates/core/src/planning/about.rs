//! `memfold about NAME`: what memory holds about a person, pet, place or project, and the names
//! it speaks of. Derived from the entries each time (nothing is stored), so it is as current as
//! `memory.md` and needs no rebuild: an entry is about NAME when its text names it (the name's
//! words, in order, each written with a capital: "Ana", "Ana's", "Dr. Okafor"; not "Fig" of
//! "Fig jam goes well…", which opens a sentence with no verb after it), or when it is
//! linked to such an entry by a link that says it shares NAME.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::Serialize;

use memfold_store::entries::{Entry, EntryFile};

/// The entries about one name.
#[derive(Debug, Clone, Serialize)]
pub struct About {
    pub name: String,
    pub entries: Vec<AboutEntry>,
    /// With `--history`: versions no longer current that named it, newest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<AboutEntry>,
}

/// One entry about a name.
#[derive(Debug, Clone, Serialize)]
pub struct AboutEntry {
    pub id: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated: Option<NaiveDate>,
    /// The entries it is linked to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<String>,
    /// `names` (its text names it) or `linked` (a link that shares the name leads to it).
    pub how: &'static str,
    /// History only: why this version is no longer current.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// A name memory speaks of, with how many current entries name it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Named {
    pub name: String,
    pub entries: usize,
}

/// The words of a text (letters and digits), as written.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect()
}

/// Whether `text` names `name`: its words in order, each written with a capital (so "Frank"
/// is not "frank", and "Rose" the sister is not a rose), and a one-word name not only where
/// it opens a sentence with no verb after it ("Fig jam goes well…" is not about a cat called
/// Fig; "Fig knocked the vase over" is).
pub fn names(text: &str, name: &[String]) -> bool {
    if name.is_empty() {
        return false;
    }
    let words = words(text);
    let written = words.windows(name.len()).any(|w| {
        w.iter().zip(name).all(|(word, want)| {
            word.to_lowercase() == *want && word.chars().next().is_some_and(|c| c.is_uppercase() || c.is_numeric())
        })
    });
    match name {
        [word] => written && !crate::planning::consolidate::rules::capitalised_only_as_a_word(text, word),
        _ => written,
    }
}

fn view(entry: &Entry, how: &'static str) -> AboutEntry {
    AboutEntry {
        id: entry.id().to_string(),
        text: entry.content.clone(),
        updated: entry.meta.updated.or(entry.meta.first_seen),
        related: entry.meta.links().into_iter().map(|l| l.id).collect(),
        how,
        status: entry.meta.status.as_ref().map(|s| s.to_string()),
    }
}

/// The entries of `memory` about `name` (and with `history`, the older versions that named it).
pub fn about(memory: &EntryFile, history: Option<&EntryFile>, name: &str) -> About {
    let wanted: Vec<String> = words(name).into_iter().map(str::to_lowercase).collect();
    let mut entries: Vec<AboutEntry> =
        memory.entries().filter(|e| names(&e.content, &wanted)).map(|e| view(e, "names")).collect();
    // Entries linked to one of those by a link that shares the name.
    let named: std::collections::HashSet<String> = entries.iter().map(|e| e.id.clone()).collect();
    let linked: Vec<AboutEntry> = memory
        .entries()
        .filter(|e| !named.contains(e.id()))
        .filter(|e| {
            e.meta.links().iter().any(|l| {
                named.contains(&l.id)
                    && l.shares
                        .as_deref()
                        .is_some_and(|s| words(s).into_iter().map(str::to_lowercase).collect::<Vec<_>>() == wanted)
            })
        })
        .map(|e| view(e, "linked"))
        .collect();
    entries.extend(linked);
    let mut older: Vec<AboutEntry> = history
        .map(|h| h.entries().filter(|e| names(&e.content, &wanted)).map(|e| view(e, "names")).collect())
        .unwrap_or_default();
    older.reverse();
    About { name: name.trim().to_string(), entries, history: older }
}

/// The names the current entries speak of (proper names, as the offline decider reads them,
/// and what links say they share), most named first, then by name. A word that only ever opens
/// a sentence ("Read the manual…") is not taken for a name; one some entry writes inside a
/// sentence is ("Promised to call Ana", so "Ana's birthday…" counts too).
pub fn names_of(memory: &EntryFile) -> Vec<Named> {
    let (per_entry, sure) = entry_names(memory);
    let mut counts: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for names in &per_entry {
        let mut seen = std::collections::HashSet::new();
        for (name, _) in names {
            let key = name.to_lowercase();
            if sure.contains(&key) && seen.insert(key.clone()) {
                counts.entry(key).or_insert_with(|| (name.clone(), 0)).1 += 1;
            }
        }
    }
    let mut out: Vec<Named> = counts.into_values().map(|(name, entries)| Named { name, entries }).collect();
    out.sort_by(|a, b| b.entries.cmp(&a.entries).then_with(|| a.name.cmp(&b.name)));
    out
}

/// How many current entries name at least one of the names [`names_of`] lists.
pub fn named_entries(memory: &EntryFile) -> usize {
    let (per_entry, sure) = entry_names(memory);
    per_entry.iter().filter(|names| names.iter().any(|(n, _)| sure.contains(&n.to_lowercase()))).count()
}

/// Each entry's candidate names (and whether it is sure: written inside a sentence, or what a
/// link shares), and the names sure somewhere, lowercased. Read from the text with its secrets
/// masked: a password is never listed as a name.
fn entry_names(memory: &EntryFile) -> (Vec<Vec<(String, bool)>>, std::collections::HashSet<String>) {
    let per_entry: Vec<Vec<(String, bool)>> = memory
        .entries()
        .map(|entry| {
            let shared = entry.meta.links().into_iter().filter_map(|l| l.shares).map(|s| (s, true));
            let text = memfold_store::secrets::mask(&entry.content);
            crate::planning::consolidate::rules::proper_names(&text).into_iter().chain(shared).collect()
        })
        .collect();
    let sure = per_entry.iter().flatten().filter(|(_, sure)| *sure).map(|(n, _)| n.to_lowercase()).collect();
    (per_entry, sure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> EntryFile {
        EntryFile::parse(text, "memory.md")
    }

    #[test]
    fn an_entry_is_about_a_name_it_writes_with_a_capital_or_is_linked_to_by_it() {
        let memory = file(concat!(
            "<!--m {\"id\":\"m-1\",\"related\":[{\"id\":\"m-3\",\"shares\":\"Ana\"}]}-->\nMy sister Ana is a nurse.\n\n",
            "<!--m {\"id\":\"m-2\"}-->\nAna's birthday is on March 3rd.\n\n",
            "<!--m {\"id\":\"m-3\",\"related\":[{\"id\":\"m-1\",\"shares\":\"Ana\"}]}-->\nShe works nights at the hospital.\n\n",
            "<!--m {\"id\":\"m-4\"}-->\nBanana bread recipe from grandma; ana is not a name here.\n\n",
            "<!--m {\"id\":\"m-5\"}-->\nBuys roses for Rose every spring.\n\n",
            "<!--m {\"id\":\"m-6\"}-->\nAna bread is a thing of its own. Rose petal tea is lovely.\n\n",
            "<!--m {\"id\":\"m-7\"}-->\nAna from the ward wants the rota by Friday.\n",
        ));
        let found = about(&memory, None, "ana");
        let ids: Vec<(&str, &str)> = found.entries.iter().map(|e| (e.id.as_str(), e.how)).collect();
        assert_eq!(ids, [("m-1", "names"), ("m-2", "names"), ("m-7", "names"), ("m-3", "linked")]);
        // A word that opens a sentence with a noun after it is no name there.
        assert_eq!(about(&memory, None, "Rose").entries.len(), 1);
        assert!(about(&memory, None, "Dr. Nobody").entries.is_empty());
        let listed = names_of(&memory);
        assert!(listed.contains(&Named { name: "Ana".into(), entries: 3 }), "{listed:?}");
        assert_eq!(named_entries(&memory), 4, "every entry but the banana bread and the bread");
        let secret = file("<!--m {\"id\":\"m-1\"}-->\nThe router admin password is Kestrel#2026, says Ana.\n");
        let listed = names_of(&secret);
        assert!(listed.iter().all(|n| !n.name.contains("Kestrel")), "a secret is no name: {listed:?}");
    }
}
