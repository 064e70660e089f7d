//! Repetitive memories, as an agent that logs its work writes them: many facts from a small
//! vocabulary, so every common word is in a large share of all facts. Two vocabularies of
//! different shapes, for the benches that must hold on more than one kind of data.

/// Which small vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vocab {
    /// "Mara inspected the rusty copper valve in the boiler room on day 41." — 12 names,
    /// 10 verbs, 10 adjectives, 120 objects (12 materials × 10 things), 8 places.
    Work,
    /// "The billing service timed out in eu-west during the nightly deploy, build 5120." — 16
    /// services, 9 events, 6 regions, 10 phases.
    Ops,
}

impl Vocab {
    pub fn parse(name: &str) -> Option<Vocab> {
        match name {
            "work" => Some(Vocab::Work),
            "ops" => Some(Vocab::Ops),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Vocab::Work => "work",
            Vocab::Ops => "ops",
        }
    }
}

const NAMES: &[&str] =
    &["Mara", "Jon", "Ilse", "Tomas", "Rhea", "Omar", "Lena", "Paulo", "Greta", "Yusuf", "Noor", "Ben"];
const VERBS: &[&str] =
    &["inspected", "cleaned", "moved", "repaired", "painted", "weighed", "labelled", "replaced", "tested", "stored"];
const ADJECTIVES: &[&str] = &["rusty", "new", "heavy", "small", "broken", "spare", "old", "shiny", "loose", "cold"];
const MATERIALS: &[&str] =
    &["copper", "steel", "brass", "oak", "glass", "rubber", "iron", "nylon", "clay", "tin", "cedar", "zinc"];
const THINGS: &[&str] = &["valve", "pipe", "crate", "hinge", "lamp", "bracket", "drum", "panel", "gear", "spool"];
const PLACES: &[&str] = &[
    "in the boiler room",
    "in the loading bay",
    "on the roof",
    "in the workshop",
    "by the north gate",
    "in the cellar",
    "at the front desk",
    "in the paint shop",
];

const SERVICES: &[&str] = &[
    "billing",
    "search",
    "auth",
    "checkout",
    "inventory",
    "mailer",
    "gateway",
    "ledger",
    "reports",
    "uploads",
    "scheduler",
    "profile",
    "catalog",
    "payments",
    "metrics",
    "notifier",
];
const EVENTS: &[&str] = &[
    "timed out",
    "restarted",
    "ran out of memory",
    "dropped connections",
    "lost its cache",
    "scaled up",
    "returned errors",
    "was rolled back",
    "paged the on-call",
];
const REGIONS: &[&str] = &["eu-west", "eu-north", "us-east", "us-west", "ap-south", "sa-east"];
const PHASES: &[&str] = &[
    "the nightly deploy",
    "the morning peak",
    "a schema migration",
    "the backup window",
    "a load test",
    "the canary rollout",
    "a certificate renewal",
    "the batch import",
    "a failover drill",
    "the weekly restart",
];

/// The i-th of a stream of well-mixed picks.
fn mix(i: u64, salt: u64) -> usize {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 29)) as usize
}

/// `n` different facts of `vocab`, the same for the same `n` (starting at `from`, so a later
/// call continues the stream: new facts for a memory of the first `from`).
pub fn facts(vocab: Vocab, from: usize, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    let mut seen = std::collections::HashSet::new();
    let mut i = from as u64 * 2;
    while out.len() < n {
        i += 1;
        let pick = |list: &[&'static str], salt: u64| list[mix(i, salt) % list.len()];
        let sentence = match vocab {
            Vocab::Work => format!(
                "{} {} the {} {} {} {} on day {}.",
                pick(NAMES, 1),
                pick(VERBS, 2),
                pick(ADJECTIVES, 3),
                pick(MATERIALS, 4),
                pick(THINGS, 5),
                pick(PLACES, 6),
                1 + mix(i, 7) % 400
            ),
            Vocab::Ops => format!(
                "The {} service {} in {} during {}, build {}.",
                pick(SERVICES, 1),
                pick(EVENTS, 2),
                pick(REGIONS, 3),
                pick(PHASES, 4),
                1000 + mix(i, 5) % 9000
            ),
        };
        if seen.insert(sentence.clone()) {
            out.push(sentence);
        }
    }
    out
}

/// `n` searches of three common words of `vocab`, as a person recalls such a log.
pub fn queries(vocab: Vocab, n: usize) -> Vec<String> {
    (0..n as u64)
        .map(|i| {
            let pick = |list: &[&'static str], salt: u64| list[mix(i, salt + 100) % list.len()];
            match vocab {
                Vocab::Work => format!("{} {} {}", pick(NAMES, 1), pick(MATERIALS, 2), pick(THINGS, 3)),
                Vocab::Ops => format!(
                    "{} {} {}",
                    pick(SERVICES, 1),
                    pick(REGIONS, 2),
                    pick(PHASES, 3).rsplit(' ').next().unwrap_or("")
                ),
            }
        })
        .collect()
}
