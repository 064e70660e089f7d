//! Unified line diffs (`diff -u` format), made with Myers' O(ND) algorithm, for plans people review.
//!
//! Lines are compared with their line ending, so a missing newline at the end of a file is a
//! change of its own and is shown with the usual `\ No newline at end of file` marker. The
//! common head and tail are trimmed before the search; a middle whose edit distance exceeds
//! [`MAX_EDITS`] is shown as removed and re-added whole (still a correct diff, just not the
//! shortest), which keeps time and memory bounded on a completely rewritten file.

/// Edit distance beyond which the middle of two texts is diffed as one replaced block.
pub const MAX_EDITS: usize = 2000;

/// One line of an edit script, by index into the old and new lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    Equal(usize, usize),
    Delete(usize),
    Insert(usize),
}

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
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    let edits = edit_script(&a, &b);
    let mut out = format!("--- a/{path}\n+++ b/{path}\n");
    // Position (old, new) before each edit.
    let mut at = Vec::with_capacity(edits.len() + 1);
    let (mut i, mut j) = (0, 0);
    for e in &edits {
        at.push((i, j));
        match e {
            Edit::Equal(..) => (i, j) = (i + 1, j + 1),
            Edit::Delete(_) => i += 1,
            Edit::Insert(_) => j += 1,
        }
    }
    at.push((i, j));
    let changed: Vec<usize> = (0..edits.len()).filter(|&k| !matches!(edits[k], Edit::Equal(..))).collect();
    let mut k = 0;
    while k < changed.len() {
        // Grow the hunk while the next change is close enough to share context.
        let mut last = k;
        while last + 1 < changed.len() && changed[last + 1] - changed[last] <= 2 * context + 1 {
            last += 1;
        }
        let start = changed[k].saturating_sub(context);
        let end = (changed[last] + context + 1).min(edits.len());
        let (old_len, new_len) = (at[end].0 - at[start].0, at[end].1 - at[start].1);
        out.push_str(&format!("@@ -{} +{} @@\n", range(at[start].0, old_len), range(at[start].1, new_len)));
        for e in &edits[start..end] {
            let (mark, line) = match *e {
                Edit::Equal(i, _) => (' ', a[i]),
                Edit::Delete(i) => ('-', a[i]),
                Edit::Insert(j) => ('+', b[j]),
            };
            out.push(mark);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
        k = last + 1;
    }
    out
}

/// `start,len` of a hunk side as `diff -u` writes it (1-based; `,1` left out; an empty side
/// names the line before it).
fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        _ => format!("{},{len}", start + 1),
    }
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

/// The edit script turning `a` into `b`: common head, the shortest middle script, common tail.
fn edit_script(a: &[&str], b: &[&str]) -> Vec<Edit> {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..].iter().rev().zip(b[head..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (a_mid, b_mid) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut edits: Vec<Edit> = (0..head).map(|i| Edit::Equal(i, i)).collect();
    match myers(a_mid, b_mid, MAX_EDITS) {
        Some(middle) => edits.extend(middle.into_iter().map(|e| match e {
            Edit::Equal(i, j) => Edit::Equal(i + head, j + head),
            Edit::Delete(i) => Edit::Delete(i + head),
            Edit::Insert(j) => Edit::Insert(j + head),
        })),
        None => {
            edits.extend((0..a_mid.len()).map(|i| Edit::Delete(i + head)));
            edits.extend((0..b_mid.len()).map(|j| Edit::Insert(j + head)));
        }
    }
    edits.extend((0..tail).map(|t| Edit::Equal(a.len() - tail + t, b.len() - tail + t)));
    edits
}

/// Myers' greedy shortest edit script, or None when it needs more than `max_d` edits.
/// Keeps the furthest-reaching x of every diagonal after each step (O(D²) memory).
fn myers(a: &[&str], b: &[&str], max_d: usize) -> Option<Vec<Edit>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    // v[k] for diagonals k in -(d+1)..=(d+1), stored at k + d + 1 of that step's row.
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut v: Vec<isize> = vec![0; 3];
    let limit = (n + m) as usize;
    for d in 0..=limit.min(max_d) {
        let d_i = d as isize;
        // This step reads diagonals -(d+1)..=(d+1) of the previous one; widen to that.
        let mut next = vec![0isize; 2 * d + 3];
        let get = |row: &Vec<isize>, k: isize| -> isize {
            let width = (row.len() as isize - 1) / 2;
            row.get((k + width) as usize).copied().unwrap_or(0)
        };
        for k in (-d_i..=d_i).step_by(2) {
            let mut x = if k == -d_i || (k != d_i && get(&v, k - 1) < get(&v, k + 1)) {
                get(&v, k + 1)
            } else {
                get(&v, k - 1) + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            next[(k + d_i + 1) as usize] = x;
            if x >= n && y >= m {
                trace.push(v);
                return Some(backtrack(&trace, n, m));
            }
        }
        trace.push(std::mem::replace(&mut v, next));
    }
    None
}

/// Walk the trace back from (n, m) to (0, 0).
fn backtrack(trace: &[Vec<isize>], n: isize, m: isize) -> Vec<Edit> {
    let get = |row: &Vec<isize>, k: isize| -> isize {
        let width = (row.len() as isize - 1) / 2;
        row.get((k + width) as usize).copied().unwrap_or(0)
    };
    let mut edits = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (0..trace.len()).rev() {
        let v = &trace[d];
        let d = d as isize;
        let k = x - y;
        let prev_k = if k == -d || (k != d && get(v, k - 1) < get(v, k + 1)) { k + 1 } else { k - 1 };
        let prev_x = if d == 0 { 0 } else { get(v, prev_k) };
        let prev_y = if d == 0 { 0 } else { prev_x - prev_k };
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
            edits.push(Edit::Equal(x as usize, y as usize));
        }
        if d > 0 {
            if x == prev_x {
                y -= 1;
                edits.push(Edit::Insert(y as usize));
            } else {
                x -= 1;
                edits.push(Edit::Delete(x as usize));
            }
        }
        (x, y) = (prev_x, prev_y);
    }
    edits.reverse();
    edits
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn the_script_is_shortest() {
        let a = ["a\n", "b\n", "c\n", "a\n", "b\n", "b\n", "a\n"];
        let b = ["c\n", "b\n", "a\n", "b\n", "a\n", "c\n"];
        let edits = myers(&a, &b, 100).unwrap();
        assert_eq!(edits.iter().filter(|e| !matches!(e, Edit::Equal(..))).count(), 5);
    }

    #[test]
    fn too_many_edits_fall_back_to_a_block_replacement() {
        let old: String = (0..50).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..50).map(|i| format!("new {i}\n")).collect();
        let a: Vec<&str> = old.split_inclusive('\n').collect();
        let b: Vec<&str> = new.split_inclusive('\n').collect();
        assert!(myers(&a, &b, 10).is_none());
        assert_eq!(patch(&old, &unified(&old, &new, "m.md", 3)), new);
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
            let a: Vec<&str> = old.split_inclusive('\n').collect();
            let b: Vec<&str> = new.split_inclusive('\n').collect();
            let common = edit_script(&a, &b).iter().filter(|e| matches!(e, Edit::Equal(..))).count();
            prop_assert_eq!(stat(&diff), DiffStat { added: b.len() - common, removed: a.len() - common });
        }
    }
}
