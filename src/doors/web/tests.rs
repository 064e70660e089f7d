//! The review page's pieces, case by case.

use chrono::Utc;

use super::*;

/// Memory text and LLM output are untrusted: no template may turn escaping off or carry a
/// script of its own (the CSP would block an inline one anyway).
#[test]
fn templates_escape_everything_and_carry_no_script() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/ui");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for banned in ["|safe", "| safe", "escape = \"none\"", "<script", " on", "javascript:"] {
            let hit = match banned {
                // An inline event handler attribute, such as onclick=.
                " on" => text.match_indices(" on").any(|(at, _)| {
                    text[at + 3..].chars().take_while(|c| c.is_ascii_alphabetic()).count() > 0
                        && text[at + 3..].trim_start_matches(|c: char| c.is_ascii_alphabetic()).starts_with('=')
                }),
                _ => text.contains(banned),
            };
            assert!(!hit, "{} contains {banned:?}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 10, "the templates were found");
}

#[test]
fn only_known_outcomes_are_shown_after_a_redirect() {
    let done =
        |d: &str, run: &str| Done { done: Some(d.into()), run: Some(run.into()), n: None, reveal: false }.message();
    assert_eq!(done("undone", "r-20260101T000000Z-0001").as_deref(), Some("Run r-20260101T000000Z-0001 undone."));
    assert_eq!(done("<b>hi</b>", "r-1"), None);
    assert_eq!(done("undone", "<script>"), None, "a run id that is not one is not shown");
    assert_eq!(ago(Utc::now() - chrono::Duration::minutes(90)), "1 h ago");
}
