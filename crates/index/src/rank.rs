//! Pure parts of search: SQL filters for kinds and as-of dates, and the rank fusion with recency.
//!
//! Scores: each leg (vector, full text) contributes `(K + 1) / (K + rank)` with `K = 60` and
//! rank counted from 1, i.e. reciprocal rank fusion scaled so that first place in one leg is
//! worth 1.0 (the scale keeps the recency weight of `[search]` in readable units: with the
//! default 0.1, being new is worth about as much as moving up a few places near the top).
//! The recency term is `weight * 0.5^(age_days / half_life_days)` with age counted from
//! `valid_from`. Decay by use adds the same shape of term counted from a row's last use
//! ([`used`]). Ties are broken by key so that equal inputs rank equally.
//!
//! **A leg's cut is the files', not lance's.** Each leg keeps its best `n` rows by score, ties
//! by key. lance cuts its answer at the requested limit wherever it likes among rows of equal
//! score (e.g. an entry and the fact it was added from: same text, same vector, same BM25), so
//! a leg asks for a few rows more than it keeps and, when rows tied with its n-th reach the end
//! of what came back, asks again for twice as many ([`cut`]). The fused list therefore does not
//! depend on the row order inside the table, on how the index was built, or on which leg
//! finished first.

use std::cmp::Ordering;
use std::collections::HashMap;

use chrono::NaiveDate;

use super::DocKind;
use super::rows::{KEY, KIND, PATH, VALID_FROM, VALID_UNTIL};

/// The constant of reciprocal rank fusion.
pub(super) const RRF_K: f64 = 60.0;

/// A SQL string literal.
pub(super) fn sql_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A SQL date literal.
pub(super) fn sql_date(d: NaiveDate) -> String {
    format!("DATE '{}'", d.format("%Y-%m-%d"))
}

/// `kind IN (...)`, or `None` for every kind (an empty list, or all of them: a filter that
/// keeps every row still costs each search leg a lookup per row).
pub(super) fn kind_filter(kinds: &[DocKind]) -> Option<String> {
    if kinds.is_empty() || DocKind::ALL.iter().all(|k| kinds.contains(k)) {
        return None;
    }
    let list: Vec<String> = kinds.iter().map(|k| sql_str(k.as_str())).collect();
    Some(format!("{KIND} IN ({})", list.join(", ")))
}

/// `key IN (...)` (or `NOT IN`).
pub(super) fn key_list(keys: &[String], negate: bool) -> String {
    let list: Vec<String> = keys.iter().map(|k| sql_str(k)).collect();
    format!("{KEY} {}IN ({})", if negate { "NOT " } else { "" }, list.join(", "))
}

/// `path IN (...)`; false for no paths.
pub(super) fn path_list(paths: &[String]) -> String {
    if paths.is_empty() {
        return "false".into();
    }
    let list: Vec<String> = paths.iter().map(|p| sql_str(p)).collect();
    format!("{PATH} IN ({})", list.join(", "))
}

/// What was current on `day`: valid from then or earlier and not yet ended. Facts carry no
/// `valid_until`, so for them this is `valid_from <= day`.
pub(super) fn as_of_filter(day: NaiveDate) -> String {
    let d = sql_date(day);
    format!("{VALID_FROM} <= {d} AND ({VALID_UNTIL} IS NULL OR {VALID_UNTIL} > {d})")
}

/// Dated (`valid_from`) between two days, both included.
pub(super) fn dated_filter((first, last): (NaiveDate, NaiveDate)) -> String {
    format!("{VALID_FROM} >= {} AND {VALID_FROM} <= {}", sql_date(first), sql_date(last))
}

/// The kinds a search looks at: the caller's list, else entries and facts, plus history when
/// `history` is set or the search is as of a date (an old version is a history row).
pub(super) fn search_kinds(kinds: Option<&[DocKind]>, history: bool, as_of: bool) -> Vec<DocKind> {
    let mut out = match kinds {
        Some(k) => k.to_vec(),
        None => vec![DocKind::Entry, DocKind::Fact],
    };
    if (history || (as_of && kinds.is_none())) && !out.contains(&DocKind::History) {
        out.push(DocKind::History);
    }
    out
}

/// All filters of a search joined with AND, `None` when nothing is filtered.
pub(super) fn search_filter(
    kinds: &[DocKind],
    as_of: Option<NaiveDate>,
    dated: Option<(NaiveDate, NaiveDate)>,
) -> Option<String> {
    let parts: Vec<String> =
        kind_filter(kinds).into_iter().chain(as_of.map(as_of_filter)).chain(dated.map(dated_filter)).collect();
    if parts.is_empty() { None } else { Some(parts.iter().map(|p| format!("({p})")).collect::<Vec<_>>().join(" AND ")) }
}

/// Rows a leg asks for beyond the `n` it keeps, so that a tie at its cut shows.
pub(super) const TIE_SLACK: usize = 8;

/// One leg's rows, `(key, score, payload)`, as lance returned them for a request of `limit`
/// rows: sorted best first (higher score is better when `higher_better`, ties by key), repeated
/// keys dropped, and cut to `n`. `None` when the cut is not yet the files' own: lance returned
/// `limit` rows and the last of them ties with the n-th, so rows of that score may have been
/// left out at lance's choice; ask again with a larger limit.
pub(super) fn cut<T>(
    mut rows: Vec<(String, f64, T)>,
    n: usize,
    limit: usize,
    higher_better: bool,
) -> Option<Vec<(String, f64, T)>> {
    let fetched = rows.len();
    rows.sort_by(|(ka, a, _), (kb, b, _)| {
        let by_score = if higher_better { b.total_cmp(a) } else { a.total_cmp(b) };
        by_score.then_with(|| ka.cmp(kb))
    });
    rows.dedup_by(|a, b| a.0 == b.0);
    let complete = fetched < limit
        || rows.len() <= n
        || rows.last().is_some_and(|(_, worst, _)| worst.total_cmp(&rows[n - 1].1).is_ne());
    complete.then(|| {
        rows.truncate(n);
        rows
    })
}

/// Scaled reciprocal rank fusion of ranked lists of (key, leg score), best first. Rows whose
/// leg scores are equal share the rank of the first of them: equally similar rows (the same
/// text twice) fuse to equal scores, whatever order the leg listed them in.
pub(super) fn fuse(legs: &[&[(String, f64)]]) -> HashMap<String, f64> {
    let mut out: HashMap<String, f64> = HashMap::new();
    for leg in legs {
        let mut rank = 0;
        for (i, (key, score)) in leg.iter().enumerate() {
            if i == 0 || leg[i - 1].1.total_cmp(score).is_ne() {
                rank = i + 1;
            }
            *out.entry(key.clone()).or_default() += (RRF_K + 1.0) / (RRF_K + rank as f64);
        }
    }
    out
}

/// `weight * 0.5^(age / half_life)`, age in days since `valid_from` (0 for future dates).
pub(super) fn recency(valid_from: NaiveDate, today: NaiveDate, weight: f64, half_life_days: f64) -> f64 {
    if weight == 0.0 {
        return 0.0;
    }
    let age = (today - valid_from).num_days().max(0) as f64;
    if half_life_days <= 0.0 {
        return if age == 0.0 { weight } else { 0.0 };
    }
    weight * 0.5f64.powf(age / half_life_days)
}

/// The use term of decay by use (see [`super::SearchOpts::uses`]) for the row `key`.
pub(super) fn used(key: &str, valid_from: NaiveDate, opts: &super::SearchOpts) -> f64 {
    let Some(uses) = opts.uses.as_deref() else { return 0.0 };
    if uses.exempt.contains(key) {
        return opts.decay_weight;
    }
    let recalled =
        uses.last.get(key).and_then(|secs| chrono::DateTime::from_timestamp(*secs, 0)).map(|t| t.date_naive());
    let last = recalled.map_or(valid_from, |day| valid_from.max(day));
    recency(last, opts.today, opts.decay_weight, opts.decay_half_life_days)
}

/// Sort `(key, score)` best first, ties by key.
pub(super) fn by_score_then_key(a: &(String, f64), b: &(String, f64)) -> Ordering {
    b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    #[test]
    fn fusion_rewards_agreement_and_first_place_is_worth_one() {
        let leg = |list: &[(&str, f64)]| list.iter().map(|(k, s)| (k.to_string(), *s)).collect::<Vec<_>>();
        let (v, t) = (leg(&[("a", 0.1), ("b", 0.2), ("c", 0.3)]), leg(&[("c", 9.0), ("a", 8.0)]));
        let f = fuse(&[&v, &t]);
        assert!((f["a"] - (1.0 + 61.0 / 62.0)).abs() < 1e-12);
        assert!((f["b"] - 61.0 / 62.0).abs() < 1e-12);
        assert!(f["a"] > f["c"] && f["c"] > f["b"]);
        // Equal leg scores share a rank.
        let (v, t) = (leg(&[("x", 0.1), ("y", 0.1), ("z", 0.3)]), leg(&[("x", 5.0), ("y", 5.0)]));
        let f = fuse(&[&v, &t]);
        assert_eq!((f["x"], f["y"]), (2.0, 2.0));
        assert!((f["z"] - 61.0 / 63.0).abs() < 1e-12, "after two, third");
    }

    fn keys<T>(rows: &[(String, f64, T)]) -> Vec<&str> {
        rows.iter().map(|(k, _, _)| k.as_str()).collect()
    }

    fn rows(list: &[(&str, f64)]) -> Vec<(String, f64, ())> {
        list.iter().map(|(k, s)| (k.to_string(), *s, ())).collect()
    }

    #[test]
    fn cut_orders_by_score_then_key_and_drops_repeats() {
        let r = cut(rows(&[("b", 0.1), ("a", 0.1), ("c", 0.05), ("a", 0.1)]), 3, 10, false).unwrap();
        assert_eq!(keys(&r), ["c", "a", "b"]);
        let r = cut(rows(&[("b", 2.0), ("a", 2.0), ("c", 3.0)]), 2, 10, true).unwrap();
        assert_eq!(keys(&r), ["c", "a"]);
    }

    #[test]
    fn cut_asks_again_while_a_tie_at_the_nth_row_reaches_the_limit() {
        // lance returned its limit of 4 rows and the 2nd and 4th tie: a row "a" of the same score
        // may exist beyond the limit and would come before "c".
        let fetched = rows(&[("d", 1.0), ("c", 0.5), ("e", 0.5), ("b", 0.5)]);
        assert!(cut(fetched.clone(), 2, 4, true).is_none());
        // The same rows when lance had fewer to give, or a better-scored row ends the tie.
        assert_eq!(keys(&cut(fetched.clone(), 2, 5, true).unwrap()), ["d", "b"]);
        let ended = rows(&[("d", 1.0), ("c", 0.5), ("b", 0.5), ("e", 0.25)]);
        assert_eq!(keys(&cut(ended, 2, 4, true).unwrap()), ["d", "b"]);
        // A tie below the cut is no concern.
        let below = rows(&[("d", 1.0), ("c", 0.75), ("b", 0.5), ("e", 0.5)]);
        assert_eq!(keys(&cut(below, 2, 4, true).unwrap()), ["d", "c"]);
        // Nothing to keep, or fewer rows than asked for, is complete.
        assert!(cut(rows(&[]), 3, 4, true).unwrap().is_empty());
        assert_eq!(keys(&cut(rows(&[("y", 0.1), ("x", 0.1)]), 1, 3, false).unwrap()), ["x"]);
        assert!(cut(rows(&[("y", 0.1), ("x", 0.1)]), 1, 2, false).is_none());
    }

    #[test]
    fn recency_halves_every_half_life() {
        let today = day("2026-11-22");
        assert_eq!(recency(today, today, 0.1, 90.0), 0.1);
        assert!((recency(day("2026-08-24"), today, 0.1, 90.0) - 0.05).abs() < 1e-12);
        assert_eq!(recency(day("2027-01-01"), today, 0.1, 90.0), 0.1, "future dates count as today");
        assert_eq!(recency(day("2020-01-01"), today, 0.0, 90.0), 0.0);
    }

    #[test]
    fn filters_quote_and_combine() {
        assert_eq!(sql_str("it's"), "'it''s'");
        assert_eq!(key_list(&["a".into(), "b'c".into()], true), "key NOT IN ('a', 'b''c')");
        assert_eq!(kind_filter(&[]), None);
        assert_eq!(kind_filter(&[DocKind::Fact, DocKind::History, DocKind::Entry]), None);
        assert_eq!(
            search_filter(&[DocKind::Entry], Some(day("2026-01-02")), None).unwrap(),
            "(kind IN ('entry')) AND (valid_from <= DATE '2026-01-02' AND (valid_until IS NULL OR valid_until > DATE '2026-01-02'))"
        );
        assert_eq!(
            search_filter(&[], None, Some((day("2026-06-01"), day("2026-06-30")))).unwrap(),
            "(valid_from >= DATE '2026-06-01' AND valid_from <= DATE '2026-06-30')"
        );
        assert_eq!(search_filter(&[], None, None), None);
    }

    #[test]
    fn search_kinds_default_to_entries_and_facts() {
        assert_eq!(search_kinds(None, false, false), [DocKind::Entry, DocKind::Fact]);
        assert_eq!(search_kinds(None, true, false), [DocKind::Entry, DocKind::Fact, DocKind::History]);
        assert_eq!(search_kinds(None, false, true), [DocKind::Entry, DocKind::Fact, DocKind::History]);
        assert_eq!(search_kinds(Some(&[DocKind::Fact]), false, true), [DocKind::Fact]);
        assert_eq!(search_kinds(Some(&[DocKind::Fact]), true, false), [DocKind::Fact, DocKind::History]);
    }
}
