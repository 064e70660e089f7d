//! The archive, case by case: lines read and written, appends, hand edits.

use super::*;
use crate::Root;
use chrono::NaiveDate;
use std::collections::HashSet;
use std::io::Write;

fn d(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

fn now() -> chrono::NaiveDateTime {
    d("2026-11-22").and_hms_opt(14, 3, 0).unwrap()
}

fn new(text: &str) -> NewFact {
    NewFact { text: text.into(), ..Default::default() }
}

#[test]
fn appended_lines_parse_back_identically() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    let facts = vec![
        new("Moved to Lisbon in October."),
        NewFact { text: "Likes  \n green tea".into(), source: Some("chat --> 7".into()), date: None },
    ];
    let written = append(&root, &facts, now()).unwrap();
    assert_eq!(written[1].text, "Likes green tea");
    let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(read, written);
    let text = std::fs::read_to_string(root.archive_file(d("2026-11-22"))).unwrap();
    assert!(text.starts_with("# 2026-11-22\n\n- 14:03 Moved to Lisbon in October. <!--f {\"id\":\"f-"), "{text}");
}

#[test]
fn a_primed_appender_writes_what_a_fresh_one_would_and_a_change_since_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    let mut primed = Appender::default();
    primed.prime(&root, d("2026-11-22")).unwrap(); // no file yet: nothing to read
    append(&root, &[new("Likes tea"), new("Has a cat")], now()).unwrap();
    primed.prime(&root, d("2026-11-22")).unwrap();
    let path = root.archive_file(d("2026-11-22"));
    let before = std::fs::read_to_string(&path).unwrap();
    let one = primed.append(&root, &[new("Likes tea")], now()).unwrap();
    std::fs::write(&path, &before).unwrap();
    let fresh = Appender::default().append(&root, &[new("Likes tea")], now()).unwrap();
    assert_eq!(one, fresh, "the same id and line as an appender that reads the file");
    // Changed after priming (by hand): read again, not trusted.
    let mut primed = Appender::default();
    primed.prime(&root, d("2026-11-22")).unwrap();
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"- Likes tea\n").unwrap();
    drop(file);
    let after = primed.append(&root, &[new("Likes tea")], now()).unwrap();
    let ids: HashSet<String> = read_day(&root, d("2026-11-22")).unwrap().0.into_iter().map(|f| f.id).collect();
    assert_eq!(ids.len(), 5, "every id distinct: {ids:?}");
    assert!(ids.contains(&after[0].id));
}

#[test]
fn a_remembering_appender_writes_what_a_fresh_read_would() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    let mut appender = Appender::default();
    let mut written = appender.append(&root, &[new("Likes tea"), new("Likes tea")], now()).unwrap();
    // Another writer appends behind the appender's back, by hand and without a newline.
    let path = root.archive_file(d("2026-11-22"));
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"- Likes tea").unwrap();
    drop(file);
    written.extend(appender.append(&root, &[new("Likes tea")], now()).unwrap());
    written.extend(appender.append(&root, &[new("Likes tea"), new("Has a cat")], now()).unwrap());
    let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(read.len(), 6);
    let by_hand = read.iter().find(|f| f.time.is_none()).unwrap().clone();
    let mine: Vec<Fact> = read.into_iter().filter(|f| f.time.is_some()).collect();
    assert_eq!(mine, written, "ids and line numbers match a fresh read");
    assert!(written.iter().all(|f| f.id != by_hand.id));
    // A fresh appender continues the same sequence.
    let next = append(&root, &[new("Likes tea")], now()).unwrap();
    let again = Appender::default().append(&root, &[new("Likes tea")], now()).unwrap();
    assert_ne!(next[0].id, again[0].id);
    assert_eq!(read_day(&root, d("2026-11-22")).unwrap().0.len(), 8);
}

#[test]
fn same_text_twice_gets_two_ids() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    let a = append(&root, &[new("Likes tea")], now()).unwrap();
    let b = append(&root, &[new("Likes tea")], now()).unwrap();
    assert_ne!(a[0].id, b[0].id);
    assert_eq!(read_day(&root, d("2026-11-22")).unwrap().0.len(), 2);
}

#[test]
fn hand_appended_lines_get_stable_ids() {
    let text = "# 2026-11-22\n\n- 09:00 Has a dog named Rex\n* Likes tea\n- Likes tea\n";
    let (a, problems) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
    assert!(problems.is_empty());
    let (b, _) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
    assert_eq!(a, b);
    assert_eq!(a.len(), 3);
    assert_eq!(a[0].time.as_deref(), Some("09:00"));
    assert_eq!(a[0].id, fact_id(d("2026-11-22"), "Has a dog named Rex", 0));
    assert_ne!(a[1].id, a[2].id);
}

#[test]
fn hand_line_then_memfold_append_continue_the_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    std::fs::create_dir_all(root.archive_dir()).unwrap();
    std::fs::write(root.archive_file(d("2026-11-22")), "- Likes tea").unwrap();
    let added = append(&root, &[new("Likes tea")], now()).unwrap();
    let (facts, problems) = read_day(&root, d("2026-11-22")).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(facts.len(), 2);
    assert_eq!(facts[1], added[0]);
    assert_ne!(facts[0].id, facts[1].id);
}

#[test]
fn malformed_lines_are_reported_and_skipped() {
    let text = "- Fine fact\nstray paragraph\n- Broken <!--f {\"id\":-->\n-  \n<!-- a\nnote -->\n- Also fine\n";
    let (facts, problems) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
    assert_eq!(facts.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(), ["Fine fact", "Also fine"]);
    let places: Vec<_> = problems.iter().map(|p| p.line).collect();
    assert_eq!(places, [2, 3, 4]);
    assert!(problems[0].to_string().starts_with("archive/2026-11-22.md:2: "));
}

#[test]
fn a_fact_written_after_an_unclosed_comment_is_read_and_the_comment_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    append(&root, &[new("Has a dog named Rex.")], now()).unwrap();
    let path = root.archive_dir().join("2026-11-22.md");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("<!-- todo: ask about the cat\n");
    std::fs::write(&path, text).unwrap();
    let written = append(&root, &[new("Has a cat named Miso."), new("Moved to Porto.")], now()).unwrap();
    let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
    assert_eq!(
        read.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(),
        ["Has a dog named Rex.", "Has a cat named Miso.", "Moved to Porto."]
    );
    assert_eq!(read[1..], written[..]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].line, 5);
    assert!(problems[0].message.contains("line 4"), "{}", problems[0].message);
}

#[test]
fn a_comment_that_never_closes_is_reported_with_what_it_hides() {
    let text = "- Kept\n<!-- draft\n- Hidden by hand\nmore words\n";
    let (facts, problems) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
    assert_eq!(facts.len(), 1);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].line, 2);
    assert!(problems[0].message.contains("never closed"), "{}", problems[0].message);
    let closed = "<!-- a\n- commented out\n-->\n- Kept\n";
    let (facts, problems) = parse_day(d("2026-11-22"), closed, "archive/2026-11-22.md");
    assert_eq!(facts.len(), 1);
    assert!(problems.is_empty(), "{problems:?}");
}

/// Parsing a day file's new lines from where the old ones left off gives every fact what
/// parsing the whole file gives it: ids of repeated texts, a copied id, an HTML comment left
/// open across the cut, line numbers, a byte order mark at the start.
#[test]
fn parsing_on_from_a_cut_is_parsing_the_whole_file() {
    let date = d("2026-11-22");
    let mut written = String::from("\u{feff}# 2026-11-22\n\n");
    for text in ["Fed the cat", "Fed the cat", "Watered the ferns"] {
        let fact =
            Fact { id: fact_id(date, text, 0), date, time: None, text: text.into(), src: None, line: 0, edited: false };
        written.push_str(&render_line(&fact));
    }
    let copied = written.lines().nth(2).unwrap().to_string();
    let lines = [
        "- Fed the cat".to_string(),
        "<!-- a draft".to_string(),
        "- hidden by hand".to_string(),
        "-->".to_string(),
        copied,
        "- Fed the cat".to_string(),
        "<!-- left open".to_string(),
        "- also hidden".to_string(),
        "- Watered the ferns".to_string(),
    ];
    let text = format!("{written}{}\n", lines.join("\n"));
    let (whole, whole_problems) = parse_day(date, &text, "archive/2026-11-22.md");
    let line_starts: Vec<usize> = text.match_indices('\n').map(|(at, _)| at + 1).collect();
    for &cut in &line_starts {
        let mut state = DayParse::default();
        let (mut facts, _) = parse_on(date, &text[..cut], "archive/2026-11-22.md", &mut state);
        let (more, _) = parse_on(date, &text[cut..], "archive/2026-11-22.md", &mut state);
        facts.extend(more);
        assert_eq!(facts, whole, "cut after byte {cut}");
    }
    assert_eq!(whole.len(), 6, "{whole:#?}");
    assert_eq!(whole_problems.len(), 3, "two copied ids, and the comment left open: {whole_problems:?}");
}

#[test]
fn a_byte_order_mark_does_not_cost_the_first_fact() {
    let (facts, problems) = parse_day(d("2026-11-22"), "\u{feff}- First fact\n- Second\n", "archive/2026-11-22.md");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(facts.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(), ["First fact", "Second"]);
}

#[test]
fn a_hash_line_that_is_no_heading_is_reported() {
    let text = "# 2026-11-22\n#tag not a heading\n####### seven\n- Fact\n";
    let (facts, problems) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
    assert_eq!(facts.len(), 1);
    assert_eq!(problems.iter().map(|p| p.line).collect::<Vec<_>>(), [2, 3]);
}

#[test]
fn facts_with_dates_go_to_their_day() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    let facts = [NewFact { date: Some(d("2026-05-27")), ..new("Works at Google") }, new("Today")];
    let written = append(&root, &facts, now()).unwrap();
    assert_eq!(written[0].date, d("2026-05-27"));
    assert_eq!(written[1].date, d("2026-11-22"));
    let all = read_all(&root).unwrap();
    assert_eq!(all.facts.len(), 2);
    assert_eq!(all.facts[0].text, "Works at Google");
}

#[test]
fn empty_fact_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = append(&Root::new(dir.path()), &[new("ok"), new("  ")], now()).unwrap_err();
    assert_eq!(err.to_string(), "fact 1 is empty");
}

#[test]
fn a_source_or_text_holding_a_fact_comment_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    let facts = [
        NewFact { source: Some("web <!--f x".into()), ..new("Lives in Porto.") },
        NewFact { source: Some("<!--f {\"id\":\"f-000000000000\"}-->".into()), ..new("a <!--f b -->") },
        new("ends like a comment <!--f {\"id\":\"f-111111111111\"}-->"),
    ];
    let written = append(&root, &facts, now()).unwrap();
    let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(read, written);
    assert_eq!(read[0].src.as_deref(), Some("web <!--f x"));
    assert_eq!(read[2].text, "ends like a comment <!--f {\"id\":\"f-111111111111\"}-->");
}

#[test]
fn control_characters_are_appended_visible_and_old_lines_keep_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    let path = root.archive_file(d("2026-11-22"));
    std::fs::create_dir_all(root.archive_dir()).unwrap();
    // A line an earlier version wrote, NUL and all, with the hash of that text.
    let old = Fact {
        id: fact_id(d("2026-11-22"), "old\0line", 0),
        date: d("2026-11-22"),
        time: Some("09:00".into()),
        text: "old\0line".into(),
        src: None,
        line: 3,
        edited: false,
    };
    std::fs::write(&path, format!("# 2026-11-22\n\n{}", render_line(&old))).unwrap();
    let facts = [NewFact { source: Some("tty\u{1b}]0;x\u{7}".into()), ..new("tea\0and\u{1b}[2J\u{7f}\u{9b}") }];
    let written = append(&root, &facts, now()).unwrap();
    assert_eq!(written[0].text, "tea\u{2400}and\u{241b}[2J\u{2421}\u{fffd}");
    assert_eq!(written[0].src.as_deref(), Some("tty\u{241b}]0;x\u{2407}"));
    let bytes = std::fs::read(&path).unwrap();
    let after_old = &bytes[bytes.iter().position(|&b| b == 0).unwrap() + 1..];
    assert!(
        !after_old.iter().any(|&b| b < 0x20 && b != b'\n' || b == 0x7f),
        "{:?}",
        String::from_utf8_lossy(after_old)
    );
    let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(read, [vec![old], written].concat());
}

#[test]
fn a_line_edited_in_place_is_reported_and_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    let written = append(&root, &[new("Lives in Porto."), new("Has a cat.")], now()).unwrap();
    let path = root.archive_file(d("2026-11-22"));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!("\"hash\":\"{}\"", text_hash("Lives in Porto."))), "{text}");
    std::fs::write(&path, text.replace("Porto", "Berlin")).unwrap();
    let (read, problems) = read_day(&root, d("2026-11-22")).unwrap();
    assert_eq!(
        (read[0].id.as_str(), read[0].text.as_str(), read[0].edited),
        (written[0].id.as_str(), "Lives in Berlin.", true)
    );
    assert!(!read[1].edited);
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].to_string().starts_with(&format!(
            "archive/2026-11-22.md:3: fact {} was edited in place: its text no longer matches the hash",
            written[0].id
        )),
        "{}",
        problems[0]
    );
    // Removing the hash accepts the edit; a line without one was never checked.
    let accepted =
        std::fs::read_to_string(&path).unwrap().replace(&format!(",\"hash\":\"{}\"", text_hash("Lives in Porto.")), "");
    let (read, problems) = parse_day(d("2026-11-22"), &accepted, "archive/2026-11-22.md");
    assert!(problems.is_empty() && !read[0].edited, "{problems:?}");
    assert_eq!(read[0].id, written[0].id);
}

#[test]
fn facts_over_the_limit_are_refused_whole() {
    let long = "x".repeat(101);
    let facts = [new("fine"), NewFact { source: Some(long.clone()), ..new("fine too") }];
    let err = check_new(&facts, 100).unwrap_err();
    assert_eq!(
        err.to_string(),
        "fact 1 has 101 bytes of source, more than ingest.max_fact_bytes = 100; nothing was stored"
    );
    assert!(matches!(check_new(&[new(&long)], 100), Err(ArchiveError::TooLong { index: 0, field: "text", .. })));
    // Measured as stored: runs of whitespace count once.
    check_new(&[new(&format!("{}   {}", "x".repeat(49), "y".repeat(50)))], 100).unwrap();
    assert!(matches!(check_new(&[new("ok"), new(" \n ")], 100), Err(ArchiveError::EmptyFact { index: 1 })));
}

#[test]
fn concurrent_appenders_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    std::thread::scope(|s| {
        for t in 0..4 {
            let root = &root;
            s.spawn(move || {
                for i in 0..100 {
                    append(root, &[new(&format!("thread {t} fact {i}")), new("shared text")], now()).unwrap();
                }
            });
        }
    });
    let all = read_all(&root).unwrap();
    assert!(all.problems.is_empty(), "{:?}", all.problems);
    assert_eq!(all.facts.len(), 800);
    let ids: HashSet<_> = all.facts.iter().map(|f| &f.id).collect();
    assert_eq!(ids.len(), 800);
}

/// Text biased to what could end a fact line early or forge its comment.
fn awkward() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        2 => "[a-zA-Z0-9]{1,6}",
        3 => prop::sample::select(vec![
            "<!--f ", "<!--f {\"id\":\"f-000000000000\"}-->", "-->", "<!--", "<pre>", "```", "`", "[x]: y",
            "---", "===", "# ", "- ", "* ", "14:03 ", "    ", "\t", "\n", "\r", "\r\n", "\0", "\"", "\\", "}", "🙂",
        ])
        .prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..10).prop_map(|p| p.concat())
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn any_text_and_source_read_back_as_exactly_one_fact(text in awkward(), source in proptest::option::of(awkward())) {
        prop_assume!(!clean_text(&text).is_empty());
        let date = d("2026-11-22");
        let src = source.as_deref().map(clean_text).filter(|s| !s.is_empty());
        let fact = Fact {
            id: fact_id(date, &text, 0),
            date,
            time: Some("14:03".into()),
            text: clean_text(&text),
            src,
            line: 3,
            edited: false,
        };
        let day = format!("# {date}\n\n{}", render_line(&fact));
        let (read, problems) = parse_day(date, &day, "archive/2026-11-22.md");
        prop_assert!(problems.is_empty(), "{:?}\n{}", problems, day);
        prop_assert_eq!(read, vec![fact], "{}", day);
    }

    /// Whatever a person left in a day file, a fact memfold appends after it is read back.
    #[test]
    fn a_fact_appended_after_any_hand_text_is_read_back(hand in prop::collection::vec(awkward(), 0..6), text in "[a-z]{1,8}( [a-z]{1,8}){0,3}") {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        std::fs::create_dir_all(root.archive_dir()).unwrap();
        let path = root.archive_file(d("2026-11-22"));
        std::fs::write(&path, hand.join("\n")).unwrap();
        let written = append(&root, &[new(&text)], now()).unwrap();
        let (read, _) = read_day(&root, d("2026-11-22")).unwrap();
        let back = read.iter().find(|f| f.id == written[0].id);
        prop_assert_eq!(back.map(|f| f.text.as_str()), Some(text.as_str()), "{:?}", std::fs::read_to_string(&path));
    }
}

#[test]
fn ids_are_told_apart_exactly_whatever_their_form() {
    let text = "- one <!--f {\"id\":\"f-abcdef012345\"}-->\n- two <!--f {\"id\":\"f-ABCDEF012345\"}-->\n\
                - three <!--f {\"id\":\"f-custom\"}-->\n- four <!--f {\"id\":\"f-custom\"}-->\n- one\n- one\n";
    let (facts, problems) = parse_day(d("2026-11-22"), text, "archive/2026-11-22.md");
    let ids: Vec<&str> = facts.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(&ids[..3], ["f-abcdef012345", "f-ABCDEF012345", "f-custom"]);
    assert_eq!(problems.len(), 1, "only the second f-custom: {problems:?}");
    assert!(problems[0].message.contains("appears twice"));
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), 6, "the copies of `one` get ids of their own: {ids:?}");
}
