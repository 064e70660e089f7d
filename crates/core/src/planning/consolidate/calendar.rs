//! The names of months and weekdays, the one list every reader of dates in a text uses: the
//! offline rules (a month or weekday is a date, not a name), the aspect keyer (nobody is called
//! "Monday") and recall (the months a prompt speaks of).

/// The months, lowercase, January first.
pub const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The weekdays, lowercase, Monday first.
pub const WEEKDAYS: [&str; 7] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

/// The month (1–12) a lowercase word names, in full or by its first three letters ("jan",
/// "sep"; "sept" too).
pub fn month(word: &str) -> Option<u32> {
    if word == "sept" {
        return Some(9);
    }
    let short = word.len() == 3;
    MONTHS.iter().position(|m| *m == word || (short && m.starts_with(word))).map(|at| at as u32 + 1)
}

/// Whether a lowercase word is a weekday's name.
pub fn is_weekday(word: &str) -> bool {
    WEEKDAYS.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_named_in_full_or_by_three_letters() {
        assert_eq!(month("january"), Some(1));
        assert_eq!(month("may"), Some(5));
        assert_eq!(month("sep"), Some(9));
        assert_eq!(month("sept"), Some(9));
        assert_eq!(month("dec"), Some(12));
        for not in ["ma", "marc", "mars", "monday", "decade", ""] {
            assert_eq!(month(not), None, "{not}");
        }
        assert!(is_weekday("sunday") && !is_weekday("sun"));
    }
}
