//! Word lists and word classes: each list is a rule a person can read and argue with.

use super::super::calendar;
use super::text::Tok;

pub(super) const STOPWORDS: &str = concat!(
    "a an the and or but of to in on at for with by from as into onto about than then so too very really ",
    "just also still even quite i me my mine myself we us our ours you your yours he him his she her hers ",
    "they them their theirs it its this that these those is am are was were be been being do does did ",
    "have has had having will would shall should can could may might must there here some any longer yet ",
    "again actually",
);
pub(super) const NEGATIONS: &str = "not no never none nobody nothing neither nor";
/// Temporal markers: a fact that has one says what is true from now on.
pub(super) const MARKER_WORDS: &str =
    "now currently nowadays anymore moved switched started changed became joined quit stopped";
/// Markers that are time adverbs, not content ("now works at" = "works at").
pub(super) const TIME_ADVERBS: &str = "now currently nowadays anymore";
pub(super) const CORRECTION_WORDS: &str = "correction corrected mistake misspelled typo wrong actually";
pub(super) const ANTONYMS: &[(&str, &str)] = &[
    ("like", "dislike"),
    ("love", "hate"),
    ("like", "hate"),
    ("open", "closed"),
    ("married", "divorced"),
    ("married", "single"),
    ("employed", "unemployed"),
    ("allowed", "forbidden"),
    ("enabled", "disabled"),
    ("available", "unavailable"),
    ("started", "stopped"),
];
/// Head nouns of attributes that hold one value at a time ("my X is Y" replaces the old Y).
pub(super) const ATTRIBUTE_NOUNS: &str = concat!(
    "name surname nickname colour email phone number address age birthday job title role employer salary ",
    "rent timezone hometown height weight manager boss partner wife husband girlfriend boyfriend doctor ",
    "dentist username pronoun",
);
/// Words for a person or an animal that a name right after them (or after "is", "named",
/// "called") names: "my colleague Sydney", "a dog named Rex", "our lodger is a student called
/// Wen". A name so introduced is someone, not a place or a brand.
pub(super) const SOMEONE_NOUNS: &str = concat!(
    "sister brother sibling mum mom mother mam dad father parent son daughter child kid baby niece nephew ",
    "cousin aunt auntie uncle grandma grandmother granny nan nana grandad granddad grandpa grandfather ",
    "grandson granddaughter wife husband partner girlfriend boyfriend fiance fiancee spouse friend mate pal ",
    "buddy colleague coworker boss manager supervisor teacher tutor coach trainer mentor student neighbour ",
    "neighbor landlord landlady lodger tenant flatmate roommate housemate gp doctor dentist vet nurse ",
    "therapist accountant lawyer solicitor babysitter nanny cleaner plumber builder stepson stepdaughter ",
    "dog cat puppy kitten horse pony parrot rabbit bunny hamster tortoise turtle pig fish goldfish ",
    "budgie snake lizard pet boy girl man woman guy lady person chef owner founder captain",
);
/// Verbs of going: a name after "to" following one of them is a place ("flying to Sydney");
/// "to" on its own is not (it gives things to people too).
pub(super) const GOING_WORDS: &str = concat!(
    "go goes going went gone fly flies flying flew flown move moves moving moved travel travels ",
    "travelling traveling travelled traveled drive drives driving drove trip trips back return returns ",
    "returning returned holiday holidays relocate relocated relocating commute commutes commuting",
);
/// People and animals one often has several of: "Our neighbour is called Georgia" names one
/// of them, no new name of a neighbour called Victoria.
pub(super) const SEVERAL_NOUNS: &str = concat!(
    "sister brother sibling son daughter child kid baby niece nephew cousin aunt auntie uncle ",
    "grandma grandmother granny nan nana grandad granddad grandpa grandfather grandson granddaughter ",
    "stepson stepdaughter friend mate pal buddy colleague coworker neighbour neighbor student tenant ",
    "lodger flatmate roommate housemate dog cat puppy kitten horse pony parrot rabbit bunny hamster ",
    "tortoise turtle pig fish goldfish budgie snake lizard pet chicken hen",
);
/// What a name is said to be ("Finding Nemo is the kids' favourite film"): a thing, not
/// someone.
pub(super) const THING_NOUNS: &str = concat!(
    "film movie book novel series show programme program song album podcast game brand company firm ",
    "shop store supermarket restaurant cafe pub app website",
);
/// What a name is said to be when it is a place ("Paris is the city…").
pub(super) const PLACE_NOUNS: &str = "city town village country capital island place destination";
/// Words after which a name is a place: "in Paris", "near Cork", "on Crane Lane", "visit Jordan".
pub(super) const PLACE_WORDS: &str = "in on near visit visits visiting visited around across via outside";
/// Verbs that follow a noun phrase: the word between a name and one of them is a noun the name
/// describes ("Everton mints were…").
pub(super) const AUXILIARIES: &str = concat!(
    "is are was were has have had will would can could may might must shall should does do did ",
    "came went got took made gave",
);
/// Past forms that do not end in "-ed": a word that opens a sentence and is followed by one
/// is its subject ("Biscuit threw a shoe", "Ines sent a postcard").
pub(super) const IRREGULAR_PAST: &str = concat!(
    "ate awoke beat became began bent bet bit bled blew broke brought built burnt bought caught chose ",
    "clung came cost crept cut dealt dug did drew dreamt drank drove fell fed felt fought found fled flew ",
    "forbade forgot forgave froze got gave went ground grew hung had heard hid hit held hurt kept knelt ",
    "knew laid led leant leapt learnt left lent let lay lit lost made meant met paid put quit read rode ",
    "rang rose ran said saw sought sold sent set sewed shook shed shone shot showed shrank shut sang sank ",
    "sat slept slid spoke sped spent spilt spun split spread sprang stood stole stuck stung stank struck ",
    "strung swore swept swam swung took taught tore told thought threw understood woke wore wove wept won ",
    "wound wrote",
);
/// Adverbs that stand between a subject and its verb ("Miso only eats…", "Tom never drives…"),
/// besides those in "-ly" ([`verb_like`] reads them by their ending).
pub(super) const VERB_ADVERBS: &str = "just still only never always often already also even now then sometimes soon";
/// Prepositions that open a phrase saying where someone is from or belongs ("Priya from work
/// wants…", "Tom at the office said…").
pub(super) const PHRASE_WORDS: &str = "from at in of with on near";
/// Lowercase words after a name that are not a noun it describes ("bought a Toyota last week").
pub(super) const NOT_NOUNS: &str = "last next every each ago recently once twice again later soon yet";
/// Verbs of having: what one has can be many things, so "now has X" does not replace "has Y".
pub(super) const POSSESSION_WORDS: &str = "has have had got own owns owned bought adopted";
pub(super) const NUMBER_WORDS: &str = concat!(
    "zero one two three four five six seven eight nine ten eleven twelve twenty hundred thousand million ",
    "once twice",
);
/// Days named by their relation to today (the weekdays are [`calendar::WEEKDAYS`]).
pub(super) const DAY_WORDS: &str = "today tomorrow yesterday tonight";
/// Holidays, written with a capital: a time of year, not a name ("every Christmas", "for
/// Easter"), so two texts that speak of one are not about one thing by it.
pub(super) const HOLIDAYS: &str = "christmas easter halloween hanukkah diwali eid ramadan thanksgiving passover";
/// How a later clause of an entry starts when it is only history of the first one.
pub(super) const HISTORY_OPENERS: &[&str] = &["previously", "formerly", "before that", "until", "used to"];
/// Jaccard over content words required before negation or an antonym can count as a contradiction.
pub(super) const SAME_SUBJECT_JACCARD: f64 = 0.75;

/// The space-separated words of the constant `$list` as a set, built once per list and call
/// site (splitting the list on every lookup was an eighth of a large pass).
macro_rules! word_set {
    ($list:expr) => {{
        static SET: std::sync::LazyLock<rustc_hash::FxHashSet<&'static str>> =
            std::sync::LazyLock::new(|| $list.split(' ').filter(|w| !w.is_empty()).collect());
        &*SET
    }};
}
pub(super) use word_set;

/// The stems ([`word_stem`]) of the space-separated words of the constant `$list` as a set,
/// for lists compared with stemmed words.
macro_rules! stem_set {
    ($list:expr) => {{
        static SET: std::sync::LazyLock<rustc_hash::FxHashSet<String>> = std::sync::LazyLock::new(|| {
            $list
                .split(' ')
                .filter(|w| !w.is_empty())
                .map($crate::planning::consolidate::rules::words::word_stem)
                .collect()
        });
        &*SET
    }};
}
pub(super) use stem_set;

/// Whether `word` is one of the space-separated words of the constant `$list`.
macro_rules! listed {
    ($list:expr, $word:expr) => {
        $crate::planning::consolidate::rules::words::word_set!($list).contains(AsRef::<str>::as_ref($word))
    };
}
pub(super) use listed;

pub(super) fn is_stopword(word: &str) -> bool {
    listed!(STOPWORDS, word)
}

/// A title written before a name ("Dr. Chen", "Mrs. Okafor"): part of the name, never a name
/// of its own (two doctors share no name).
pub(super) fn is_title(word: &str) -> bool {
    matches!(
        word,
        "mr" | "mrs"
            | "ms"
            | "mx"
            | "miss"
            | "dr"
            | "prof"
            | "professor"
            | "sir"
            | "dame"
            | "lord"
            | "lady"
            | "rev"
            | "fr"
            | "st"
            | "sr"
            | "jr"
            | "capt"
            | "col"
            | "gen"
            | "sgt"
            | "judge"
            | "uncle"
            | "aunt"
            | "auntie"
    )
}

pub(super) fn is_negation(word: &str) -> bool {
    listed!(NEGATIONS, word)
}

pub(super) fn is_article(word: &str) -> bool {
    matches!(word, "a" | "an" | "the")
}

pub(super) fn is_number(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_digit()) || listed!(NUMBER_WORDS, word)
}

/// ISO and numeric dates, ordinals ("3rd"), month names and holidays (capitalised), weekdays,
/// "today".
pub(super) fn is_date(t: &Tok) -> bool {
    let w = t.word.as_str();
    if !w.bytes().any(|b| b.is_ascii_digit()) {
        // No ordinal or numeric date, then (most words: checked without splitting them).
        let capitalised = t.raw.chars().next().is_some_and(char::is_uppercase);
        return (capitalised && (calendar::month(w).is_some() || listed!(HOLIDAYS, w)))
            || calendar::is_weekday(w)
            || listed!(DAY_WORDS, w);
    }
    let ordinal = ["st", "nd", "rd", "th"]
        .iter()
        .any(|s| w.strip_suffix(s).is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit())));
    let parts: Vec<&str> = w.split(['-', '/']).collect();
    let numeric = (2..=3).contains(&parts.len())
        && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && (parts[0].len() == 4 || parts.iter().rev().skip(1).all(|p| p.len() <= 2));
    ordinal || numeric
}

/// A proper name: capitalised and not the first word of a sentence, or all capitals ("NASA").
pub(super) fn is_name(t: &Tok) -> bool {
    if t.word == "i" {
        return false;
    }
    let (mut letters, mut all_upper) = (0, true);
    for c in t.raw.chars().filter(|c| c.is_alphabetic()) {
        letters += 1;
        all_upper &= c.is_uppercase();
    }
    let all_caps = letters >= 2 && all_upper;
    (all_caps || (!t.start && t.raw.chars().next().is_some_and(char::is_uppercase))) && !is_date(t)
}

/// A capitalised word of letters that opens a sentence ("Alice is…", but also "Walks…").
pub(super) fn opens_capitalised(t: &Tok) -> bool {
    t.start
        && t.raw.chars().next().is_some_and(char::is_uppercase)
        && t.word.len() > 1
        && t.word.chars().all(char::is_alphabetic)
}

/// Whether a word can follow a sentence's subject: a verb ([`verb_like`]) or a conjunction
/// joining another subject ("Tom and Ana…"). A noun, an article or a preposition cannot ("Fig
/// jam…", "Chase the invoice…", "Zoom in on…").
pub(super) fn follows_a_subject(t: &Tok) -> bool {
    verb_like(t) || matches!(t.word.as_str(), "and" | "or" | "not")
}

/// Whether a word reads as a verb or the adverb before one: in the third person or the past
/// ("hates", "escaped", "threw"), an auxiliary or modal ("is", "can"), "only", "never",
/// "usually".
pub(super) fn verb_like(t: &Tok) -> bool {
    let w = t.word.as_str();
    (w.ends_with('s') && !w.ends_with("ss"))
        || w.ends_with("ed")
        || w.ends_with("ly")
        || listed!(AUXILIARIES, w)
        || listed!(IRREGULAR_PAST, w)
        || listed!(VERB_ADVERBS, w)
}

/// A capitalised first word that may be a name ("Alice is my sister"); used only to veto.
pub(super) fn maybe_name(t: &Tok) -> bool {
    opens_capitalised(t)
        && !["s", "ed", "ing"].iter().any(|s| t.word.ends_with(s))
        && !is_stopword(&t.word)
        && !is_negation(&t.word)
        && !listed!(MARKER_WORDS, &t.word)
}

pub(super) fn person(word: &str) -> Option<&'static str> {
    Some(match word {
        "i" | "me" | "my" | "mine" | "myself" => "first",
        "we" | "us" | "our" | "ours" => "we",
        "you" | "your" | "yours" => "you",
        "he" | "him" | "his" => "he",
        "she" | "her" | "hers" => "she",
        "they" | "them" | "their" | "theirs" => "they",
        _ => return None,
    })
}

/// One spelling for the words with two ("favorite" and "fave" are "favourite", "color" is
/// "colour").
pub(super) fn spelled(word: &str) -> &str {
    match word {
        "favorite" | "fave" => "favourite",
        "color" => "colour",
        _ => word,
    }
}

/// A word's stem for comparing texts ([`super::super::stem`]), after its one spelling.
pub(super) fn word_stem(word: &str) -> String {
    super::super::stem::stem(spelled(word))
}

/// A few verbs that name the same slot in different words ("works at" / "started at" → `@work`).
/// Matched on the word as written: "used" (as in "used to") names no slot.
pub(super) fn frame(word: &str, next: Option<&Tok>) -> Option<&'static str> {
    let after = next.map_or("", |t| t.word.as_str());
    match word {
        "work" | "works" | "working" | "worked" | "employed" | "started" if matches!(after, "at" | "for" | "with") => {
            Some("@work")
        }
        "joined" if after == "at" || next.is_some_and(is_name) => Some("@work"),
        "live" | "lives" | "living" | "lived" | "based" | "moved" | "relocated"
            if matches!(after, "in" | "to" | "into" | "near") =>
        {
            Some("@home")
        }
        "use" | "uses" | "using" => Some("@use"),
        "switched" if after == "to" => Some("@use"),
        _ => None,
    }
}
