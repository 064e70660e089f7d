//! The rules: duplicates, vetoes, same subject, antonyms, slot updates, contradictions.

use std::collections::BTreeSet;

use super::text::*;
use super::words::*;

/// What comparing a candidate with another text found.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Dup {
    /// A duplicate; the signals say which kind.
    Same(Vec<&'static str>),
    /// Equal but for numbers, dates, names or negation: not a duplicate, and these say why.
    Vetoed(Vec<&'static str>),
    Different,
}

pub(super) fn duplicate(a: &Said, b: &Said) -> Dup {
    if a.exact == b.exact {
        return Dup::Same(vec!["exact-duplicate"]);
    }
    match vetoes(a, b) {
        Some(v) if !v.is_empty() => Dup::Vetoed(v),
        Some(_) if a.norm == b.norm => Dup::Same(vec!["normalized-duplicate"]),
        _ => Dup::Different,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum TokKind {
    Word,
    Number,
    Date,
    Name,
}

pub(super) fn kind(t: &Tok) -> TokKind {
    if is_date(t) {
        TokKind::Date
    } else if is_number(&t.word) {
        TokKind::Number
    } else if is_name(t) || maybe_name(t) {
        TokKind::Name
    } else {
        TokKind::Word
    }
}

/// Aligns two texts word by word (negations and "do" left out). `None` when they differ in
/// ordinary words; otherwise the vetoes for the numbers, dates, names and negation that differ.
pub(super) fn vetoes(a: &Said, b: &Said) -> Option<Vec<&'static str>> {
    let keep = |t: &&Tok| !is_negation(&t.word) && !matches!(t.word.as_str(), "do" | "does" | "did");
    let xs: Vec<&Tok> = a.toks.iter().filter(keep).collect();
    let ys: Vec<&Tok> = b.toks.iter().filter(keep).collect();
    if xs.len() != ys.len() {
        return None;
    }
    let mut found = [false; 4];
    let mut mark = |k: TokKind| match k {
        TokKind::Number => found[0] = true,
        TokKind::Date => found[1] = true,
        TokKind::Name => found[2] = true,
        TokKind::Word => {}
    };
    for (x, y) in xs.iter().zip(&ys) {
        if x.word == y.word {
            continue; // a difference in case only ("Google" / "google") is what normalising is for
        }
        let (kx, ky) = (kind(x), kind(y));
        if kx == TokKind::Word || ky == TokKind::Word {
            return None;
        }
        mark(kx);
        mark(ky);
        if is_number(&x.word) && is_number(&y.word) {
            mark(TokKind::Number);
        }
    }
    found[3] = a.negated != b.negated;
    let names = ["veto:number", "veto:date", "veto:name", "veto:negation"];
    Some(names.iter().zip(found).filter(|(_, f)| *f).map(|(n, _)| *n).collect())
}

/// Substantial, order-consistent overlap of content words.
pub(super) fn same_subject(a: &[String], b: &[String]) -> bool {
    let (sa, sb): (BTreeSet<&String>, BTreeSet<&String>) = (a.iter().collect(), b.iter().collect());
    let shared: BTreeSet<&String> = sa.intersection(&sb).copied().collect();
    let union = sa.union(&sb).count();
    if shared.is_empty() || (shared.len() as f64) < SAME_SUBJECT_JACCARD * union as f64 {
        return false;
    }
    let order = |ws: &[String]| {
        let mut seen = BTreeSet::new();
        ws.iter().filter(|w| shared.contains(w) && seen.insert(w.as_str())).cloned().collect::<Vec<_>>()
    };
    order(a) == order(b)
}

/// An antonym pair across the two texts with the same subject once the pair is left out.
pub(super) fn antonym(a: &[String], b: &[String]) -> Option<(&'static str, &'static str)> {
    let has = |ws: &[String], w: &str| ws.iter().any(|x| x == w);
    for &(x, y) in ANTONYMS {
        let (x_stem, y_stem) = (word_stem(x), word_stem(y));
        for (p, q) in [(x_stem.as_str(), y_stem.as_str()), (y_stem.as_str(), x_stem.as_str())] {
            if has(a, p) && has(b, q) && !has(a, q) && !has(b, p) {
                let rest = |ws: &[String]| ws.iter().filter(|w| *w != p && *w != q).cloned().collect::<Vec<_>>();
                if same_subject(&rest(a), &rest(b)) {
                    return Some((x, y));
                }
            }
        }
    }
    None
}

/// The same statement with only its value changed: a shared leading frame ("works at"), then
/// one short differing slot ("Google" / "Microsoft"). Frames named by synonyms (`@work`) need
/// proper names in the slot; other frames must not be possessions.
pub(super) fn slot_update(old: &Clause, new: &Clause) -> bool {
    let (a, b) = (&old.words[..], &new.words[..]);
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (was, now) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let frame: Vec<&String> = a[..prefix].iter().chain(&a[a.len() - suffix..]).collect();
    let widest = was.len().max(now.len());
    if prefix == 0 || was.is_empty() || now.is_empty() || widest > 3 || frame.len() < widest {
        return false;
    }
    if was.iter().chain(now).any(|w| w.starts_with('@')) {
        return false;
    }
    if frame.iter().any(|w| w.starts_with('@')) {
        return was.iter().all(|w| old.names.contains(w)) && now.iter().all(|w| new.names.contains(w));
    }
    !old.possession && !new.possession
}

/// The rules by which `new` contradicts or updates `old` (empty when it does not).
pub(super) fn contradiction(old: &Clause, new: &Clause) -> Vec<String> {
    let mut signals = Vec::new();
    if !(old.persons.is_empty() || new.persons.is_empty() || old.persons == new.persons) {
        return signals;
    }
    let same_values = old.names == new.names && old.numbers == new.numbers && old.dates == new.dates;
    if old.negated != new.negated && same_values && same_subject(&old.words, &new.words) {
        signals.push("negation-polarity".to_string());
    }
    if old.negated == new.negated
        && same_values
        && let Some((x, y)) = antonym(&old.words, &new.words)
    {
        signals.push(format!("antonym:{x}/{y}"));
    }
    if !old.negated
        && !new.negated
        && let (Some(a), Some(b)) = (&old.attribute, &new.attribute)
        && a.stems == b.stems
        && a.value != b.value
    {
        signals.push(format!("attribute-value:{}", a.key.join(" ")));
    }
    if let Some(m) = new.markers.first()
        && (!signals.is_empty() || (old.negated == new.negated && slot_update(old, new)))
    {
        signals.push(format!("temporal-marker:{m}"));
    }
    signals
}
