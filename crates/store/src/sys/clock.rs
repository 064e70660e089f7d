//! What time and day it is for memfold: one clock for ingest, planning, the gate and the deciders.
//!
//! Instants are UTC (`DateTime<Utc>`, stored in records and compared by the gate). Days —
//! the archive file a fact goes to, `first_seen`/`updated`/`valid_until`, the watermark, the
//! `HH:MM` stamp of an archive line and the "today" the offline decider reasons with — are
//! dates in one zone: the machine's local zone unless `time.zone` names UTC or a fixed offset.
//! Everything that needs a day asks [`Clock::today`] or [`Clock::day_of`], never
//! `chrono::Local` or `Utc::now().date_naive()` directly, so the two can never disagree; and
//! every instant comes from [`now`], the one read of the system's time
//! (`the_time_is_read_in_one_place`).

use chrono::{DateTime, FixedOffset, Local, NaiveDate, NaiveDateTime, Utc};

/// The current instant. The one place memfold reads the system's time: everything else asks
/// this or a [`Clock`].
pub fn now() -> DateTime<Utc> {
    Utc::now()
}

/// Where days begin and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// The machine's local time zone.
    Local,
    /// A fixed offset from UTC (`"utc"` is `+00:00`).
    Fixed(FixedOffset),
}

impl Zone {
    /// Parse `time.zone`: `local`, `utc`, or an offset such as `+02:00` / `-05:30`.
    pub fn parse(text: &str) -> Result<Zone, String> {
        let text = text.trim();
        match text.to_ascii_lowercase().as_str() {
            "local" | "" => return Ok(Zone::Local),
            "utc" | "z" => return Ok(Zone::Fixed(FixedOffset::east_opt(0).expect("zero offset"))),
            _ => {}
        }
        // chrono reads an offset as `+HH:MM` (also `+HHMM`), and refuses hours past 23.
        text.parse::<FixedOffset>()
            .map(Zone::Fixed)
            .map_err(|_| format!("{text:?} is not \"local\", \"utc\" or an offset like \"+02:00\""))
    }
}

/// The clock: now, and the day an instant falls on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    zone: Zone,
}

impl Default for Clock {
    fn default() -> Self {
        Clock { zone: Zone::Local }
    }
}

impl Clock {
    pub fn new(zone: Zone) -> Clock {
        Clock { zone }
    }

    /// The current instant.
    pub fn now(&self) -> DateTime<Utc> {
        now()
    }

    /// Today, in the configured zone.
    pub fn today(&self) -> NaiveDate {
        self.day_of(self.now())
    }

    /// The wall-clock time of an instant in the configured zone.
    pub fn wall(&self, at: DateTime<Utc>) -> NaiveDateTime {
        match self.zone {
            Zone::Local => at.with_timezone(&Local).naive_local(),
            Zone::Fixed(offset) => at.with_timezone(&offset).naive_local(),
        }
    }

    /// The day an instant falls on, in the configured zone.
    pub fn day_of(&self, at: DateTime<Utc>) -> NaiveDate {
        self.wall(at).date()
    }

    /// The current wall-clock time (archive lines are stamped with it).
    pub fn wall_now(&self) -> NaiveDateTime {
        self.wall(self.now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_parse_and_bad_ones_are_named() {
        assert_eq!(Zone::parse("local").unwrap(), Zone::Local);
        assert_eq!(Zone::parse("UTC").unwrap(), Zone::Fixed(FixedOffset::east_opt(0).unwrap()));
        assert_eq!(Zone::parse("+02:00").unwrap(), Zone::Fixed(FixedOffset::east_opt(7200).unwrap()));
        assert_eq!(Zone::parse("-05:30").unwrap(), Zone::Fixed(FixedOffset::west_opt(19800).unwrap()));
        for bad in ["Europe/Lisbon", "+25:00", "2", "+02"] {
            assert!(Zone::parse(bad).unwrap_err().contains(bad), "{bad}");
        }
    }

    #[test]
    fn the_day_of_an_instant_follows_the_zone() {
        let at: DateTime<Utc> = "2026-11-22T23:30:00Z".parse().unwrap();
        let utc = Clock::new(Zone::parse("utc").unwrap());
        let east = Clock::new(Zone::parse("+01:00").unwrap());
        let west = Clock::new(Zone::parse("-01:00").unwrap());
        assert_eq!(utc.day_of(at).to_string(), "2026-11-22");
        assert_eq!(east.day_of(at).to_string(), "2026-11-23");
        assert_eq!(west.day_of(at).to_string(), "2026-11-22");
        assert_eq!(east.wall(at).format("%H:%M").to_string(), "00:30");
    }
}
