//! Packing: which new facts, with which entries, go into each decision call of a pass.
//!
//! The guarantee: every fact's call holds all of the fact's ranked entries ([`Links::ranked`]),
//! whatever else is packed with it. Nothing is ever dropped to make a call fit; a fact whose
//! entries alone exceed the budget gets a call of its own, over budget. Within that rule calls
//! are sized by what they cost: a call is started from the first fact not yet placed (facts in
//! cluster order), then the fact sharing the most with the call (its ranked entries already in
//! the call, and facts it is linked to) is added while the call stays within the budget and
//! `max_facts`; when no fact shares anything, the next facts in cluster order fill the rest, so
//! small clusters share a call. An entry needed by two calls is in both; the pass decides calls
//! in order against the planner's current state, so the later call sees what the earlier one
//! did (see [`super::pass`]).
//!
//! Sizes are in characters of the call's JSON document, which is what the token estimate
//! ([`memfold_models::llm::estimate_tokens`]) counts.
//!
//! [`Links::ranked`]: super::cluster::Links::ranked

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

/// How a pass's facts were packed into decision calls, and whether each fact met its ranked
/// entries there (`consolidate --json`, and the run record).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Packing {
    /// Decision calls made (in a dry run: that would be made), one per item of `clusters`.
    pub calls: usize,
    /// Per call: candidates plus neighbours in its document.
    pub nodes: Vec<usize>,
    /// Per call: estimated prompt tokens of its request, system prompt included
    /// ([`memfold_models::llm::estimate_tokens`]; counted also when no LLM is configured).
    pub prompt_tokens: Vec<u64>,
    /// `consolidation.call_budget_tokens` as the calls were packed.
    pub budget_tokens: u64,
    /// Calls over that budget: a fact whose ranked entries alone exceed it gets a call of its own.
    pub over_budget: usize,
    /// (new fact, ranked entry) pairs of the pass.
    pub pairs: usize,
    /// Of those, the pairs whose entry (as it then stood) was in the document of the fact's call.
    pub pairs_in_call: usize,
    /// `pairs_in_call / pairs`, 1.0 when there are no pairs. Anything below 1.0 is a bug.
    pub coverage: f64,
}

/// What the packer needs to know about one pass. Facts and entries are indices.
#[derive(Debug, Clone, Copy)]
pub struct PackInput<'a> {
    /// Per fact: its ranked entries.
    pub ranked: &'a [Vec<usize>],
    /// Per fact: the facts it is linked to (symmetric).
    pub related: &'a [Vec<usize>],
    /// Per fact: the characters it takes as a candidate in the document.
    pub fact_chars: &'a [u64],
    /// Per entry: the characters it takes as a neighbour.
    pub entry_chars: &'a [u64],
    /// Per fact: the characters of an entry made from it, kept free in a later call of a fact
    /// linked to it (that call is shown what the earlier one added).
    pub added_chars: &'a [u64],
    /// Every fact once, in the order calls are started and filled (cluster by cluster).
    pub order: &'a [usize],
    /// Characters of document one call may hold.
    pub room: u64,
    /// Most facts in one call.
    pub max_facts: usize,
}

/// One decision call: its facts in the order they were packed, its entries in index order, and
/// the characters the packer counted for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub facts: Vec<usize>,
    pub entries: Vec<usize>,
    pub chars: u64,
}

/// Facts not placed after this many in a row did not fit, when filling a call with facts that
/// share nothing with it (keeps packing linear in the number of facts).
const FILL_TRIES: usize = 64;

/// Pack every fact of `input.order` into calls (see the module docs).
pub fn pack(input: &PackInput) -> Vec<Call> {
    let n = input.ranked.len();
    let mut position = vec![usize::MAX; n];
    for (p, &f) in input.order.iter().enumerate() {
        position[f] = p;
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); input.entry_chars.len()];
    for &f in input.order {
        for &e in &input.ranked[f] {
            users[e].push(f);
        }
    }
    let mut state = State {
        input,
        position,
        users,
        call_of: vec![None; n],
        in_call: vec![NOT; input.entry_chars.len()],
        reserved: vec![NOT; n],
        refused: vec![NOT; n],
        shared: vec![(NOT, 0); n],
    };
    let mut calls = Vec::new();
    let mut cursor = 0;
    loop {
        while cursor < input.order.len() && state.call_of[input.order[cursor]].is_some() {
            cursor += 1;
        }
        let Some(&seed) = input.order.get(cursor) else { break };
        calls.push(state.fill(calls.len(), seed, cursor + 1));
    }
    calls
}

/// A call number no call has: what the per-call marks start as.
const NOT: usize = usize::MAX;

/// The packer's state. Per-call sets are arrays marked with the number of the call they hold
/// for, so a new call starts without clearing anything.
struct State<'a> {
    input: &'a PackInput<'a>,
    position: Vec<usize>,
    /// Per entry: the facts that rank it.
    users: Vec<Vec<usize>>,
    /// The call each fact was placed in.
    call_of: Vec<Option<usize>>,
    /// Per entry: the call it is in.
    in_call: Vec<usize>,
    /// Per fact of an earlier call: the call that keeps room for what it added.
    reserved: Vec<usize>,
    /// Per fact: the call it did not fit in.
    refused: Vec<usize>,
    /// Per unplaced fact: (call, how much it shares with that call).
    shared: Vec<(usize, usize)>,
}

/// A call being filled.
struct Open {
    number: usize,
    facts: Vec<usize>,
    entries: Vec<usize>,
    chars: u64,
    /// (shared, earlier in cluster order, fact); stale items are skipped when popped.
    best: BinaryHeap<(usize, Reverse<usize>, usize)>,
}

impl State<'_> {
    fn fill(&mut self, number: usize, seed: usize, scan_from: usize) -> Call {
        let mut open = Open { number, facts: Vec::new(), entries: Vec::new(), chars: 0, best: BinaryHeap::new() };
        // The first fact goes in whatever it costs: its ranked entries are never cut.
        self.place(&mut open, seed);
        let mut scan = scan_from;
        while open.facts.len() < self.input.max_facts {
            if let Some(f) = self.best_sharing(&mut open) {
                self.place(&mut open, f);
                continue;
            }
            let mut misses = 0;
            let mut found = None;
            while let Some(&f) = self.input.order.get(scan) {
                scan += 1;
                if self.call_of[f].is_some() || self.refused[f] == number {
                    continue;
                }
                if self.fits(&open, f) {
                    found = Some(f);
                    break;
                }
                self.refused[f] = number;
                misses += 1;
                if misses == FILL_TRIES {
                    break;
                }
            }
            match found {
                Some(f) => self.place(&mut open, f),
                None => break,
            }
        }
        open.entries.sort_unstable();
        Call { facts: open.facts, entries: open.entries, chars: open.chars }
    }

    /// The unplaced fact sharing most with the call that fits in it.
    fn best_sharing(&mut self, open: &mut Open) -> Option<usize> {
        while let Some((shared, _, f)) = open.best.pop() {
            if self.call_of[f].is_some() || self.refused[f] == open.number || self.shared[f] != (open.number, shared) {
                continue;
            }
            if self.fits(open, f) {
                return Some(f);
            }
            self.refused[f] = open.number;
        }
        None
    }

    /// Characters `f` would add to the call.
    fn cost(&self, open: &Open, f: usize) -> u64 {
        let input = self.input;
        let entries: u64 = input.ranked[f]
            .iter()
            .filter(|&&e| self.in_call[e] != open.number)
            .map(|&e| input.entry_chars[e] + 1)
            .sum();
        let added: u64 = input.related[f]
            .iter()
            .filter(|&&g| self.call_of[g].is_some_and(|c| c < open.number) && self.reserved[g] != open.number)
            .map(|&g| input.added_chars[g] + 1)
            .sum();
        input.fact_chars[f] + 1 + entries + added
    }

    fn fits(&self, open: &Open, f: usize) -> bool {
        open.chars + self.cost(open, f) <= self.input.room
    }

    fn place(&mut self, open: &mut Open, f: usize) {
        let input = self.input;
        open.chars += self.cost(open, f);
        self.call_of[f] = Some(open.number);
        open.facts.push(f);
        for &e in &input.ranked[f] {
            if self.in_call[e] != open.number {
                self.in_call[e] = open.number;
                open.entries.push(e);
                for i in 0..self.users[e].len() {
                    self.share(open, self.users[e][i]);
                }
            }
        }
        for &g in &input.related[f] {
            match self.call_of[g] {
                Some(c) if c < open.number => self.reserved[g] = open.number,
                Some(_) => {}
                None => self.share(open, g),
            }
        }
    }

    /// `g` shares one more entry or link with the call.
    fn share(&mut self, open: &mut Open, g: usize) {
        if self.call_of[g].is_some() || self.refused[g] == open.number {
            return;
        }
        let (call, shared) = &mut self.shared[g];
        if *call != open.number {
            (*call, *shared) = (open.number, 0);
        }
        *shared += 1;
        open.best.push((*shared, Reverse(self.position[g]), g));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    struct Case {
        ranked: Vec<Vec<usize>>,
        related: Vec<Vec<usize>>,
        fact_chars: Vec<u64>,
        entry_chars: Vec<u64>,
        added_chars: Vec<u64>,
        order: Vec<usize>,
    }

    impl Case {
        fn new(ranked: Vec<Vec<usize>>, entries: usize) -> Case {
            let n = ranked.len();
            Case {
                ranked,
                related: vec![Vec::new(); n],
                fact_chars: vec![50; n],
                entry_chars: vec![100; entries],
                added_chars: vec![100; n],
                order: (0..n).collect(),
            }
        }

        fn pack(&self, room: u64, max_facts: usize) -> Vec<Call> {
            pack(&PackInput {
                ranked: &self.ranked,
                related: &self.related,
                fact_chars: &self.fact_chars,
                entry_chars: &self.entry_chars,
                added_chars: &self.added_chars,
                order: &self.order,
                room,
                max_facts,
            })
        }
    }

    /// Every fact in exactly one call, with all of its ranked entries; calls within `room` unless
    /// they hold a single fact; the counted characters match the call's contents.
    fn assert_guarantee(case: &Case, calls: &[Call], room: u64) {
        let mut placed = vec![0; case.ranked.len()];
        for call in calls {
            for &f in &call.facts {
                placed[f] += 1;
                for e in &case.ranked[f] {
                    assert!(call.entries.binary_search(e).is_ok(), "fact {f} lost ranked entry {e}");
                }
            }
            let needed: HashSet<usize> = call.facts.iter().flat_map(|&f| case.ranked[f].iter().copied()).collect();
            assert_eq!(needed.len(), call.entries.len(), "a call holds only the ranked entries of its facts");
            let counted: u64 = call.facts.iter().map(|&f| case.fact_chars[f] + 1).sum::<u64>()
                + call.entries.iter().map(|&e| case.entry_chars[e] + 1).sum::<u64>();
            assert!(call.chars >= counted, "{} < {counted}", call.chars);
            assert!(call.chars <= room || call.facts.len() == 1, "a call of {} facts over budget", call.facts.len());
        }
        assert!(placed.iter().all(|&p| p == 1), "every fact in exactly one call: {placed:?}");
    }

    /// A deterministic component of 500 facts over 600 entries: facts come in topics of 10, each
    /// fact ranks 8 entries, 6 of its topic's 12 and 2 shared hubs that tie every topic to the
    /// next, so all 500 facts form one connected component.
    fn component_of_500() -> Case {
        let mut ranked = Vec::new();
        for f in 0..500usize {
            let topic = f / 10;
            let mut near: Vec<usize> = (0..6).map(|i| topic * 12 + (f * 7 + i * 5) % 12).collect();
            near.push(((topic + 1) % 50) * 12);
            near.push(600 - 1 - topic % 7);
            near.sort_unstable();
            near.dedup();
            ranked.push(near);
        }
        let mut case = Case::new(ranked, 600);
        for f in 0..500usize {
            case.fact_chars[f] = 40 + (f as u64 * 13) % 60;
            if f % 10 != 9 {
                case.related[f].push(f + 1);
                case.related[f + 1].push(f);
            }
        }
        for e in 0..600usize {
            case.entry_chars[e] = 80 + (e as u64 * 29) % 120;
        }
        case
    }

    #[test]
    fn a_component_of_500_facts_keeps_every_ranked_entry_in_each_facts_call() {
        let case = component_of_500();
        for (room, max_facts) in [(12_000, 25), (4_000, 25), (30_000, 100), (900, 25)] {
            let calls = case.pack(room, max_facts);
            assert_guarantee(&case, &calls, room);
            assert!(calls.iter().all(|c| c.facts.len() <= max_facts));
            // Facts of one topic share their entries, so the packer keeps most of a topic together:
            // no more than twice the calls that every fact and entry, each sent once, would need.
            if room >= 4_000 {
                let distinct: HashSet<usize> = case.ranked.iter().flatten().copied().collect();
                let once: u64 = case.fact_chars.iter().map(|c| c + 1).sum::<u64>()
                    + distinct.iter().map(|&e| case.entry_chars[e] + 1).sum::<u64>();
                let lower = (once.div_ceil(room) as usize).max(500usize.div_ceil(max_facts));
                assert!(calls.len() <= 2 * lower, "{} calls, at least {lower} needed", calls.len());
            }
        }
    }

    #[test]
    fn a_fact_too_big_for_the_budget_gets_a_call_of_its_own_with_all_its_entries() {
        let mut case = Case::new(vec![vec![0, 1, 2], vec![3], vec![4]], 5);
        case.entry_chars[1] = 10_000;
        let calls = case.pack(1_000, 25);
        assert_guarantee(&case, &calls, 1_000);
        assert_eq!(calls[0].facts, [0]);
        assert_eq!(calls[0].entries, [0, 1, 2]);
        assert_eq!(calls[1].facts, [1, 2], "the small facts share the next call");
    }

    #[test]
    fn facts_sharing_entries_are_packed_before_facts_that_come_earlier() {
        // Fact 0 and fact 3 share entries; 1 and 2 share nothing with them. Room for two facts.
        let case = Case::new(vec![vec![0, 1], vec![2], vec![3], vec![0, 1]], 4);
        let calls = case.pack(2 * 51 + 2 * 101 + 50, 25);
        assert_eq!(calls[0].facts, [0, 3]);
        assert_eq!(calls[0].entries, [0, 1]);
        assert_eq!(calls[1].facts, [1, 2]);
    }

    #[test]
    fn linked_facts_join_their_call_and_a_later_call_keeps_room_for_what_they_added() {
        let mut case = Case::new(vec![vec![0], vec![1], vec![2]], 3);
        case.related = vec![vec![2], vec![], vec![0]];
        // Room for one fact with one entry each, so nothing can share.
        let room = 51 + 101;
        let calls = case.pack(room, 25);
        assert_eq!(calls.iter().map(|c| c.facts.clone()).collect::<Vec<_>>(), [vec![0], vec![1], vec![2]]);
        assert_eq!(calls[2].chars, 51 + 101 + 101, "fact 2's call counts the entry fact 0 may have added");
        // With room for two, the linked fact comes before the earlier unrelated one.
        let calls = case.pack(2 * room, 25);
        assert_eq!(calls[0].facts, [0, 2]);
    }

    #[test]
    fn max_facts_caps_a_call() {
        let case = Case::new(vec![vec![0]; 7], 1);
        let calls = case.pack(u64::MAX, 3);
        assert_eq!(calls.iter().map(|c| c.facts.len()).collect::<Vec<_>>(), [3, 3, 1]);
        assert_guarantee(&case, &calls, u64::MAX);
    }
}
