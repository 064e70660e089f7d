//! Unified line diffs (`diff -u` format) of `memory.md`, for plans people review.
//!
//! The diff itself is the `similar` crate's (Myers' algorithm, with a deadline so a
//! completely rewritten large file cannot take long: past it the diff is still correct, just
//! not the shortest). Lines are compared with their line ending, so a missing newline at the
//! end of a file is a change of its own, shown with the usual `\ No newline at end of file`.

use std::time::Duration;

use similar::{Algorithm, TextDiff};

/// How long the search for the shortest diff may take.
const DEADLINE: Duration = Duration::from_millis(500);

/// Counts of changed lines in a diff.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DiffStat {
    pub added: usize,
    pub removed: usize,
}

/// A unified diff of `old` → `new` with `context` lines around each change, headed
/// `--- a/{path}` / `+++ b/{path}`. Empty when the texts are equal.
pub fn unified(old: &str, new: &str, path: &str, context: usize) -> String {
    if old == new {
        return String::new();
    }
    let diff = TextDiff::configure().algorithm(Algorithm::Myers).timeout(DEADLINE).diff_lines(old, new);
    diff.unified_diff().context_radius(context).header(&format!("a/{path}"), &format!("b/{path}")).to_string()
}

/// One run of a word diff: text both sides share, or text only the old or only the new has.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WordRun {
    /// `same`, `removed` or `added`.
    pub kind: &'static str,
    pub text: String,
}

/// The word diff of `old` → `new` (whitespace kept as its own runs), with neighbouring words
/// of the same kind joined into one run.
pub fn words(old: &str, new: &str) -> Vec<WordRun> {
    let diff = TextDiff::configure().algorithm(Algorithm::Myers).timeout(DEADLINE).diff_words(old, new);
    let mut runs: Vec<WordRun> = Vec::new();
    for change in diff.iter_all_changes() {
        let kind = match change.tag() {
            similar::ChangeTag::Equal => "same",
            similar::ChangeTag::Delete => "removed",
            similar::ChangeTag::Insert => "added",
        };
        match runs.last_mut() {
            Some(last) if last.kind == kind => last.text.push_str(change.value()),
            _ => runs.push(WordRun { kind, text: change.value().to_string() }),
        }
    }
    runs
}

/// Lines added and removed in a unified diff made by [`unified`].
pub fn stat(diff: &str) -> DiffStat {
    let mut stat = DiffStat::default();
    // The first two lines are the file headers.
    for line in diff.lines().skip(2) {
        if line.starts_with('+') {
            stat.added += 1;
        } else if line.starts_with('-') {
            stat.removed += 1;
        }
    }
    stat
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_word_diff_marks_changed_words_and_rebuilds_both_sides() {
        let runs = words("Works at Google as an engineer.", "Works at Microsoft as an engineer.");
        let kinds: Vec<(&str, &str)> = runs.iter().map(|r| (r.kind, r.text.as_str())).collect();
        assert_eq!(
            kinds,
            [("same", "Works at "), ("removed", "Google"), ("added", "Microsoft"), ("same", " as an engineer.")]
        );
        let side = |skip: &str| runs.iter().filter(|r| r.kind != skip).map(|r| r.text.as_str()).collect::<String>();
        assert_eq!(side("added"), "Works at Google as an engineer.");
        assert_eq!(side("removed"), "Works at Microsoft as an engineer.");
    }

    /// Apply a unified diff made by [`unified`] to `old` (strict: context must match).
    fn patch(old: &str, diff: &str) -> String {
        if diff.is_empty() {
            return old.to_string();
        }
        let a: Vec<&str> = old.split_inclusive('\n').collect();
        let mut out = String::new();
        let mut used = 0;
        let lines: Vec<&str> = diff.split_inclusive('\n').collect();
        let mut i = 2;
        while i < lines.len() {
            let header = lines[i].trim_end();
            assert!(header.starts_with("@@ -"), "bad hunk header {header:?}");
            let old_range = header[4..].split(' ').next().unwrap();
            let mut parts = old_range.split(',');
            let start: usize = parts.next().unwrap().parse().unwrap();
            let len: usize = parts.next().map_or(1, |l| l.parse().unwrap());
            let first = if len == 0 { start } else { start - 1 };
            for line in &a[used..first] {
                out.push_str(line);
            }
            used = first;
            i += 1;
            while i < lines.len() && !lines[i].starts_with("@@") {
                let line = lines[i];
                let (mark, mut text) = (line.as_bytes()[0], line[1..].to_string());
                if lines.get(i + 1).is_some_and(|l| l.starts_with('\\')) {
                    text.pop();
                    i += 1;
                }
                match mark {
                    b' ' => {
                        assert_eq!(a[used], text, "context differs");
                        out.push_str(&text);
                        used += 1;
                    }
                    b'-' => {
                        assert_eq!(a[used], text, "removed line differs");
                        used += 1;
                    }
                    b'+' => out.push_str(&text),
                    _ => panic!("bad line {line:?}"),
                }
                i += 1;
            }
        }
        for line in &a[used..] {
            out.push_str(line);
        }
        out
    }

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "memory.md", 3), "");
    }

    #[test]
    fn one_changed_line_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        let diff = unified(old, new, "consolidated/memory.md", 3);
        assert_eq!(
            diff,
            "--- a/consolidated/memory.md\n+++ b/consolidated/memory.md\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
        assert_eq!(stat(&diff), DiffStat { added: 1, removed: 1 });
    }

    #[test]
    fn additions_to_an_empty_file() {
        let diff = unified("", "a\nb\n", "m.md", 3);
        assert_eq!(diff, "--- a/m.md\n+++ b/m.md\n@@ -0,0 +1,2 @@\n+a\n+b\n");
    }

    #[test]
    fn far_apart_changes_make_two_hunks() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=20)
            .map(|i| match i {
                2 => "two\n".to_string(),
                19 => "nineteen\n".to_string(),
                _ => format!("{i}\n"),
            })
            .collect();
        let diff = unified(&old, &new, "m.md", 2);
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert_eq!(patch(&old, &diff), new);
    }

    #[test]
    fn missing_final_newline_is_marked() {
        let diff = unified("a\nb", "a\nb\n", "m.md", 3);
        assert_eq!(diff, "--- a/m.md\n+++ b/m.md\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
        assert_eq!(patch("a\nb", &diff), "a\nb\n");
    }

    #[test]
    fn a_completely_rewritten_file_still_patches() {
        let old: String = (0..3000).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..3000).map(|i| format!("new {i}\n")).collect();
        let diff = unified(&old, &new, "m.md", 3);
        assert_eq!(patch(&old, &diff), new);
        assert_eq!(stat(&diff), DiffStat { added: 3000, removed: 3000 });
    }

    fn text() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(prop_oneof![Just("a"), Just("b"), Just("c"), Just(""), Just("<!--m {}-->")], 0..30),
            any::<bool>(),
        )
            .prop_map(|(lines, trailing)| {
                let mut t = lines.join("\n");
                if trailing && !t.is_empty() {
                    t.push('\n');
                }
                t
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn patching_old_with_the_diff_gives_new(old in text(), new in text(), context in 0usize..4) {
            let diff = unified(&old, &new, "m.md", context);
            prop_assert_eq!(patch(&old, &diff), new.clone(), "{}", diff);
            let (a, b) = (old.split_inclusive('\n').count(), new.split_inclusive('\n').count());
            let stat = stat(&diff);
            prop_assert_eq!(a - stat.removed, b - stat.added, "unchanged lines are the same on both sides");
        }
    }
}
