//! One person's life as test data: the update pairs of `fixtures/updates.tsv` and generated
//! distractor entries about other people and the world.
//!
//! Shared by the integration tests and the consolidate bench (which includes this file by path).

/// An entry as it stands and a later fact that changes it.
#[derive(Debug, Clone)]
pub struct Update {
    pub area: String,
    pub old: String,
    pub new: String,
    /// `update` (the world changed) or `correction` (the entry was wrong).
    pub why: String,
}

/// The pairs of `fixtures/updates.tsv`.
pub fn updates() -> Vec<Update> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/updates.tsv"))
        .expect("fixtures/updates.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), 4, "fixtures/updates.tsv line {}: want 4 columns", i + 2);
            Update { area: cols[0].into(), old: cols[1].into(), new: cols[2].into(), why: cols[3].into() }
        })
        .collect()
}

const PEOPLE: &[&str] = &[
    "Marta", "Oskar", "Yuki", "Babajide", "Ingrid", "Rafael", "Meera", "Tobias", "Zofia", "Kwame", "Elif", "Mateo",
    "Aiko", "Henrik", "Lucia", "Dmitri", "Noor", "Felix", "Amara", "Pavel", "Sigrid", "Tariq", "Camille", "Arjun",
    "Greta", "Hugo", "Leila", "Anton", "Sade", "Viktor",
];
const GROUPS: &[&str] = &[
    "book club",
    "running club",
    "choir next door",
    "allotment society",
    "photography course",
    "chess circle",
    "neighbourhood council",
    "pottery class",
    "hiking group",
    "film society",
    "repair café",
    "quiz team",
];
const MEDIA: &[&str] = &["novel", "podcast", "documentary", "album", "board game", "comic", "short film", "essay"];
const TITLES: &[&str] = &[
    "The Salt Road",
    "Winter Harbour",
    "Small Engines",
    "A Field of Lanterns",
    "Glass Orchards",
    "The Quiet Tide",
    "Northern Kitchens",
    "Paper Moons",
    "The Iron Garden",
    "Seven Bridges",
    "Clockwork Weather",
    "Amber Nights",
];
const PLACES: &[&str] = &[
    "Ghent",
    "Tartu",
    "Kyoto",
    "Valparaíso",
    "Tbilisi",
    "Bergen",
    "Oaxaca",
    "Ljubljana",
    "Hobart",
    "Marrakesh",
    "Reykjavik",
    "Cusco",
    "Trieste",
    "Zanzibar",
    "Bologna",
    "Galway",
];
const VENUES: &[&str] =
    &["museum of maps", "botanical garden", "planetarium", "jazz cellar", "flea market", "ferry terminal"];
const DAYS: &[&str] = &["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const RELATIVES: &[&str] = &["uncle", "grandmother", "cousin", "stepfather", "aunt", "godson"];
const COLLECTIONS: &[&str] = &[
    "antique barometers",
    "matchbox labels",
    "vintage postcards",
    "fossil ammonites",
    "tin toys",
    "old railway maps",
    "seed packets",
    "typewriter ribbons",
];
const ANIMALS: &[&str] =
    &["tortoise", "parrot", "koi carp", "axolotl", "albatross", "lobster", "bowhead whale", "sea anemone"];
const TOPICS: &[&str] = &[
    "glacier retreat",
    "medieval shipbuilding",
    "desert locusts",
    "coral spawning",
    "volcanic islands",
    "Byzantine mosaics",
    "salt marshes",
    "deep-sea vents",
    "monsoon farming",
    "bee navigation",
];
const COUNTRIES: &[&str] =
    &["Iceland", "Chile", "Mongolia", "Namibia", "Vietnam", "Peru", "Georgia", "Madagascar", "Bhutan", "Estonia"];
const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DISHES: &[&str] = &["plum dumplings", "fish stew", "lentil soup", "rye crackers", "apricot jam", "walnut cake"];
const INGREDIENTS: &[&str] = &["flour", "sugar", "butter", "barley", "hazelnuts", "smoked paprika"];
const OBJECTS: &[&str] =
    &["grandfather clock", "sewing machine", "radio set", "rocking chair", "telescope", "accordion"];
const EVENTS: &[&str] = &["lantern parade", "book swap", "folk festival", "kite contest", "night market"];

/// `n` different sentences, the same for the same `n`, none about the person of `updates()`.
pub fn distractors(n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    let mut seen = std::collections::HashSet::new();
    let mut i: u64 = 0;
    while out.len() < n {
        i += 1;
        let h = |salt: u64| -> usize {
            let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x ^= x >> 31;
            x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
            (x ^ (x >> 29)) as usize
        };
        let pick = |list: &[&'static str], salt: u64| list[h(salt) % list.len()];
        let number = 2 + h(99) % 150;
        let sentence = match h(0) % 10 {
            0 => format!(
                "{} from the {} recommended the {} \"{}\".",
                pick(PEOPLE, 1),
                pick(GROUPS, 2),
                pick(MEDIA, 3),
                pick(TITLES, 4)
            ),
            1 => format!(
                "The {} in {} opens at {}:00 on {}s.",
                pick(VENUES, 1),
                pick(PLACES, 2),
                8 + h(5) % 4,
                pick(DAYS, 3)
            ),
            2 => format!("{}'s {} collects {}.", pick(PEOPLE, 1), pick(RELATIVES, 2), pick(COLLECTIONS, 3)),
            3 => format!("Read that a {} can live for up to {number} years.", pick(ANIMALS, 1)),
            4 => format!("Watched a documentary about {} in {}.", pick(TOPICS, 1), pick(COUNTRIES, 2)),
            5 => format!("{} is planning a trip to {} in {}.", pick(PEOPLE, 1), pick(PLACES, 2), pick(MONTHS, 3)),
            6 => format!(
                "{}'s recipe for {} needs {number} grams of {}.",
                pick(PEOPLE, 1),
                pick(DISHES, 2),
                pick(INGREDIENTS, 3)
            ),
            7 => format!("{} repaired an old {} for the {}.", pick(PEOPLE, 1), pick(OBJECTS, 2), pick(GROUPS, 3)),
            8 => format!(
                "A {} in {} holds a {} every {}.",
                pick(VENUES, 1),
                pick(PLACES, 2),
                pick(EVENTS, 3),
                pick(MONTHS, 4)
            ),
            _ => format!(
                "{} and {} argued about {} at the {}.",
                pick(PEOPLE, 1),
                pick(PEOPLE, 2),
                pick(TOPICS, 3),
                pick(GROUPS, 4)
            ),
        };
        if seen.insert(sentence.clone()) {
            out.push(sentence);
        }
    }
    out
}
