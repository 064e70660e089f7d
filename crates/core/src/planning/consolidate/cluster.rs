//! Neighbours and clusters: which entries each new fact is shown, and which facts belong together.
//!
//! Each new fact gets a ranked list of entries: its top-`neighbor_k` entries by cosine and its
//! top-`lexical_k` entries by shared rare words, fused by reciprocal rank, of which the best
//! `neighbor_k` are kept ([`Links::ranked`]). Rank alone decides: a fact is shown its best
//! entries whatever their cosine, so a paraphrase the embedding scores low still meets its
//! partner. New facts link to each other only when each is among the other's nearest: by
//! cosine, with at least `min_similarity` as well, or by shared rare words (mutual lexical
//! nearest, which takes no floor). Requiring both ends keeps one batch from percolating into a
//! single component through chains of weak fact-to-fact links. Clusters are the connected
//! components of all those links; [`super::pack`] turns them into decision calls. Similarity only
//! proposes candidates here; it never decides anything.
//!
//! Scoring is in memory: vectors are compared with a matrix product in chunks, so a pass is a
//! pure function of the texts and their vectors. It is exact, except among the new facts of a
//! pass of more than 20,000, which find each other through groups ([`grouped_top_k`]).

use std::collections::{BTreeSet, HashMap};

/// Something that can be a neighbour: an entry or a new fact, with its vector and text.
#[derive(Debug, Clone)]
pub struct Node<'a> {
    pub id: &'a str,
    pub text: &'a str,
    pub vector: &'a [f32],
}

/// One connected component: new fact ids and entry ids, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cluster {
    pub facts: Vec<String>,
    pub entries: Vec<String>,
}

/// Parameters of neighbour search.
#[derive(Debug, Clone, Copy)]
pub struct NeighbourParams {
    /// Entries each fact is shown (by fused rank), and cosine candidates per fact.
    pub neighbor_k: usize,
    /// Full-text candidates per fact, fused with the cosine ones.
    pub lexical_k: usize,
    /// Cosine below which two new facts are not linked by their vectors. Entries are chosen by
    /// rank alone; this floor only keeps weak fact-to-fact links from joining a whole batch.
    pub min_similarity: f32,
}

/// Links from each fact (index into `facts`) to entries and to other facts.
#[derive(Debug, Clone, Default)]
pub struct Links {
    /// Per fact: its top-`neighbor_k` entries (indices into `entries`) by fused rank, best first.
    pub ranked: Vec<Vec<usize>>,
    /// Linked pairs of facts `(i, j)`, `i < j`, each listed once.
    pub fact_fact: Vec<(usize, usize)>,
    /// How many (fact, entry) pairs of `ranked` only the aspect lists brought.
    pub from_aspects: usize,
}

impl Links {
    /// Per fact: the facts it is linked to, in index order.
    pub fn related(&self) -> Vec<Vec<usize>> {
        let mut related = vec![Vec::new(); self.ranked.len()];
        for &(i, j) in &self.fact_fact {
            related[i].push(j);
            related[j].push(i);
        }
        for list in &mut related {
            list.sort_unstable();
        }
        related
    }
}

/// The constant of reciprocal rank fusion: a place `r` (from 1) in either list is worth
/// `1 / (RRF_K + r)`, so an entry near the top of both lists beats one at the top of either.
const RRF_K: f64 = 60.0;

/// Find neighbour links by cosine (vectors are unit length, so cosine = dot product) and by
/// words; `aspects`, per fact, are more entries it is shown (those sharing an aspect key with
/// it, [`super::aspects::candidates`]), after its ranked ones. Fails only if the matrix product
/// does (out of memory, say).
pub fn neighbours(
    facts: &[Node],
    entries: &[Node],
    aspects: &[Vec<usize>],
    params: NeighbourParams,
) -> candle_core::Result<Links> {
    let k = params.neighbor_k;
    // No floor on entries: a fact always sees its best ones.
    let by_cosine = top_k_dot(facts, entries, k, false, f32::NEG_INFINITY)?;
    // Every pair of a batch is `n²` products: 10k facts take a second, 100k would take over a
    // minute. Past `EXACT_WITHIN_MAX` the batch finds its own pairs through groups instead.
    let near_facts = match facts.len() > EXACT_WITHIN_MAX {
        true => grouped_top_k(facts, k, params.min_similarity, PROBE_GROUPS)?,
        false => top_k_dot(facts, facts, k, true, params.min_similarity)?,
    };
    let (mut by_words, mut near_facts_by_words) = (vec![Vec::new(); facts.len()], vec![Vec::new(); facts.len()]);
    if params.lexical_k > 0 {
        by_words = WordIndex::new(entries).top_of_each(facts, params.lexical_k, false);
        near_facts_by_words = WordIndex::new(facts).top_of_each(facts, params.lexical_k, true);
    }
    let mut from_aspects = 0;
    let ranked = by_cosine
        .iter()
        .zip(&by_words)
        .enumerate()
        .map(|(i, (cos, words))| {
            let mut list = fuse(cos, words, k);
            for &e in aspects.get(i).into_iter().flatten() {
                if !list.contains(&e) {
                    list.push(e);
                    from_aspects += 1;
                }
            }
            list
        })
        .collect();
    let mut fact_fact: BTreeSet<(usize, usize)> = mutual(&near_facts);
    fact_fact.extend(mutual(&near_facts_by_words));
    Ok(Links { ranked, fact_fact: fact_fact.into_iter().collect(), from_aspects })
}

/// The best `k` of two ranked lists by reciprocal rank fusion, best first. Ties (the same place
/// in each list) go to the cosine list, then to the lower index.
fn fuse(cosine: &[usize], words: &[usize], k: usize) -> Vec<usize> {
    let mut scores: HashMap<usize, (f64, usize)> = HashMap::new();
    for (list, tie) in [(cosine, 0), (words, 1)] {
        for (r, &j) in list.iter().enumerate() {
            let score = scores.entry(j).or_insert((0.0, usize::MAX));
            score.0 += 1.0 / (RRF_K + r as f64 + 1.0);
            score.1 = score.1.min(2 * r + tie);
        }
    }
    let mut fused: Vec<(f64, usize, usize)> = scores.into_iter().map(|(j, (s, first))| (s, first, j)).collect();
    fused.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    fused.into_iter().take(k).map(|(_, _, j)| j).collect()
}

/// Pairs `(i, j)`, `i < j`, where each lists the other.
fn mutual(near: &[Vec<usize>]) -> BTreeSet<(usize, usize)> {
    let mut pairs = BTreeSet::new();
    for (i, list) in near.iter().enumerate() {
        for &j in list {
            if i < j && near[j].contains(&i) {
                pairs.insert((i, j));
            }
        }
    }
    pairs
}

/// Query rows scored in one matrix product: 256 rows × 50k targets is a 51 MB score block, big
/// enough for the product to run at full speed, small enough that its memory is reused from
/// block to block.
pub(super) const SCORE_BLOCK: usize = 256;

/// Exact top-k by dot product (at least `floor`) for every query, in chunks to bound memory.
/// Also used by the aspect keyer.
/// With `same_set`, a query is never its own neighbour.
fn top_k_dot(
    queries: &[Node],
    targets: &[Node],
    k: usize,
    same_set: bool,
    floor: f32,
) -> candle_core::Result<Vec<Vec<usize>>> {
    if targets.is_empty() || k == 0 {
        return Ok(vec![Vec::new(); queries.len()]);
    }
    let dim = targets[0].vector.len();
    let scorer = Scorer::new(targets, dim)?;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = Vec::with_capacity(queries.len());
    for (c, chunk) in queries.chunks(SCORE_BLOCK).enumerate() {
        let q: Vec<f32> = chunk.iter().flat_map(|n| pad(n.vector, dim)).collect();
        scorer.scores(q, chunk.len(), |scores| {
            // Selecting is a scan of every score; split the rows over the cores.
            let rows: Vec<(usize, &[f32])> =
                scores.chunks(targets.len()).enumerate().map(|(r, row)| (c * SCORE_BLOCK + r, row)).collect();
            let per_worker = rows.len().div_ceil(workers).max(1);
            std::thread::scope(|s| {
                let parts: Vec<_> = rows
                    .chunks(per_worker)
                    .map(|part| {
                        s.spawn(move || {
                            part.iter()
                                .map(|&(me, row)| best_of(row, k, floor, same_set.then_some(me)))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                for part in parts {
                    out.extend(part.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
                }
            });
        })?;
    }
    Ok(out)
}

/// New facts of one pass beyond which they find each other through [`grouped_top_k`].
const EXACT_WITHIN_MAX: usize = 20_000;
/// Groups whose nodes each group's nodes are scored against (its own included).
const PROBE_GROUPS: usize = 12;
/// Rounds of k-means that place the groups' centroids.
const KMEANS_ROUNDS: usize = 4;

/// Top-k (at least `floor`) of every node among the other nodes of one large set, in time
/// that grows with `n√n` rather than `n²`: an inverted file. The vectors are grouped around
/// `√n` centroids (spherical k-means, seeded with evenly spaced nodes, a fixed number of
/// rounds, so the result is a function of the input), and the nodes of each group are scored
/// exactly against the nodes of the `probe` groups whose centroids are nearest to their
/// group's. A pair whose vectors fall in groups far apart is missed; such pairs are far apart
/// too, and links between new facts only decide which facts share a call, never what happens
/// to them. `probe` at least the number of groups makes it exact.
fn grouped_top_k(nodes: &[Node], k: usize, floor: f32, probe: usize) -> candle_core::Result<Vec<Vec<usize>>> {
    let n = nodes.len();
    if n < 2 || k == 0 {
        return Ok(vec![Vec::new(); n]);
    }
    let dim = nodes.iter().map(|v| v.vector.len()).max().unwrap_or(0);
    let groups = ((n as f64).sqrt().ceil() as usize).clamp(1, n);
    let mut centroids: Vec<Vec<f32>> = (0..groups).map(|g| pad(nodes[g * n / groups].vector, dim).collect()).collect();
    let mut member_of = nearest_centroid(nodes, &centroids)?;
    for _ in 0..KMEANS_ROUNDS {
        let mut sums = vec![vec![0.0f32; dim]; groups];
        for (node, &g) in nodes.iter().zip(&member_of) {
            for (s, x) in sums[g].iter_mut().zip(node.vector) {
                *s += x;
            }
        }
        for (centroid, sum) in centroids.iter_mut().zip(sums) {
            let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
            // An empty group keeps its centroid.
            if norm > 0.0 {
                *centroid = sum.into_iter().map(|x| x / norm).collect();
            }
        }
        member_of = nearest_centroid(nodes, &centroids)?;
    }
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); groups];
    for (i, &g) in member_of.iter().enumerate() {
        members[g].push(i);
    }
    let centroid_nodes: Vec<Node> = centroids.iter().map(|c| Node { id: "", text: "", vector: c }).collect();
    let probed = top_k_dot(&centroid_nodes, &centroid_nodes, probe.min(groups) - 1, true, f32::NEG_INFINITY)?;

    let mut out = vec![Vec::new(); n];
    for (g, own) in members.iter().enumerate() {
        if own.is_empty() {
            continue;
        }
        let mut targets: Vec<usize> =
            std::iter::once(g).chain(probed[g].iter().copied()).flat_map(|h| members[h].iter().copied()).collect();
        targets.sort_unstable();
        let target_nodes: Vec<Node> = targets.iter().map(|&j| nodes[j].clone()).collect();
        let scorer = Scorer::new(&target_nodes, dim)?;
        // In blocks of rows, as `top_k_dot` does: a large group must not need one huge product.
        for block in own.chunks(SCORE_BLOCK) {
            let q: Vec<f32> = block.iter().flat_map(|&i| pad(nodes[i].vector, dim)).collect();
            scorer.scores(q, block.len(), |scores| {
                for (&i, row) in block.iter().zip(scores.chunks(targets.len())) {
                    let me = targets.binary_search(&i).ok();
                    out[i] = best_of(row, k, floor, me).into_iter().map(|t| targets[t]).collect();
                }
            })?;
        }
    }
    Ok(out)
}

/// For each node, the index of its nearest centroid (ties: the lower index).
fn nearest_centroid(nodes: &[Node], centroids: &[Vec<f32>]) -> candle_core::Result<Vec<usize>> {
    let centroid_nodes: Vec<Node> = centroids.iter().map(|c| Node { id: "", text: "", vector: c }).collect();
    Ok(top_k_dot(nodes, &centroid_nodes, 1, false, f32::NEG_INFINITY)?
        .into_iter()
        .map(|best| best.first().copied().unwrap_or(0))
        .collect())
}

/// The indices of the `k` highest scores of at least `floor`, best first (ties: lower index),
/// leaving out `skip`.
pub(super) fn best_of(row: &[f32], k: usize, floor: f32, skip: Option<usize>) -> Vec<usize> {
    let mut best: Vec<(f32, usize)> = Vec::with_capacity(k + 1);
    let mut bar = floor;
    for (j, &s) in row.iter().enumerate() {
        // Once `best` is full only a score above the k-th can enter, so most scores stop here.
        if s < bar || (best.len() == k && s <= bar) || Some(j) == skip {
            continue;
        }
        let at = best.partition_point(|&(b, bj)| b > s || (b == s && bj < j));
        best.insert(at, (s, j));
        best.truncate(k);
        if best.len() == k {
            bar = bar.max(best[k - 1].0);
        }
    }
    best.into_iter().map(|(_, j)| j).collect()
}

pub(super) fn pad(v: &[f32], dim: usize) -> impl Iterator<Item = f32> + '_ {
    v.iter().copied().chain(std::iter::repeat(0.0)).take(dim)
}

/// Dot products of query vectors with a fixed set of target vectors, using candle's optimised
/// CPU matrix product. The targets become a tensor once, and each block of scores is read
/// where the product wrote it.
pub(super) struct Scorer {
    /// The targets as a `d × m` view, ready to multiply.
    targets: candle_core::Tensor,
    d: usize,
}

impl Scorer {
    pub(super) fn new(targets: &[Node], d: usize) -> candle_core::Result<Scorer> {
        let matrix: Vec<f32> = targets.iter().flat_map(|t| pad(t.vector, d)).collect();
        let targets = candle_core::Tensor::from_vec(matrix, (targets.len(), d), &candle_core::Device::Cpu)?.t()?;
        Ok(Scorer { targets, d })
    }

    /// Call `f` with the `n × m` row-major scores of `n` queries (`q` is `n × d`).
    pub(super) fn scores<T>(&self, q: Vec<f32>, n: usize, f: impl FnOnce(&[f32]) -> T) -> candle_core::Result<T> {
        use candle_core::{Device, Storage, Tensor};
        let product = Tensor::from_vec(q, (n, self.d), &Device::Cpu)?.matmul(&self.targets)?;
        let (storage, layout) = product.storage_and_layout();
        match (&*storage, layout.contiguous_offsets()) {
            (Storage::Cpu(cpu), Some((from, to))) => Ok(f(&cpu.as_slice::<f32>()?[from..to])),
            _ => Err(candle_core::Error::Msg("matrix product left outside CPU memory".into())),
        }
    }
}

/// Lower-cased words of 3+ letters, without a few very common ones.
pub fn words(text: &str) -> BTreeSet<String> {
    const COMMON: &[&str] = &[
        "the", "and", "for", "with", "that", "this", "was", "are", "has", "have", "had", "from", "not", "but", "his",
        "her", "she", "they", "them", "their", "its", "our", "you", "your", "who", "now", "also", "into", "about",
    ];
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .filter(|w| !COMMON.contains(&w.as_str()))
        .collect()
}

/// An inverted index over node texts, scoring by summed inverse document frequency.
struct WordIndex {
    postings: HashMap<String, Vec<usize>>,
    n: usize,
}

impl WordIndex {
    fn new(nodes: &[Node]) -> WordIndex {
        let mut postings: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            for w in words(node.text) {
                postings.entry(w).or_default().push(i);
            }
        }
        WordIndex { postings, n: nodes.len() }
    }

    /// The `k` nodes sharing the most (idf-weighted) words with `text`, best first (ties: the
    /// lower index), leaving out `exclude`. `scores` is scratch of one slot per node, all zero
    /// before and after.
    fn top(&self, text: &str, k: usize, exclude: Option<usize>, scores: &mut Scores) -> Vec<usize> {
        for w in words(text) {
            let Some(list) = self.postings.get(&w) else { continue };
            // Words in more than 1% of a large corpus say little about identity, and scoring
            // their long posting lists dominated a pass (10k facts × 50k entries); skip them.
            if list.len() > 50 && list.len() * 100 > self.n {
                continue;
            }
            let idf = ((self.n as f64 + 1.0) / list.len() as f64).ln();
            for &i in list {
                scores.add(i, idf);
            }
        }
        let mut ranked: Vec<(f64, usize)> =
            scores.drain().filter(|(i, _)| Some(*i) != exclude).map(|(i, s)| (s, i)).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        ranked.into_iter().take(k).map(|(_, i)| i).collect()
    }

    /// [`WordIndex::top`] of every query text (`exclude_self`: a query is never its own hit, the
    /// queries being this index's nodes), split over the cores.
    fn top_of_each(&self, queries: &[Node], k: usize, exclude_self: bool) -> Vec<Vec<usize>> {
        if self.n == 0 {
            return vec![Vec::new(); queries.len()];
        }
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per_worker = queries.len().div_ceil(workers).max(1);
        std::thread::scope(|s| {
            let parts: Vec<_> = queries
                .chunks(per_worker)
                .enumerate()
                .map(|(c, part)| {
                    s.spawn(move || {
                        let mut scores = Scores::new(self.n);
                        part.iter()
                            .enumerate()
                            .map(|(r, q)| self.top(q.text, k, exclude_self.then_some(c * per_worker + r), &mut scores))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            parts.into_iter().flat_map(|p| p.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        })
    }
}

/// Score sums by node, dense: adding is an index, not a hash, and only the nodes touched are
/// visited and reset afterwards.
struct Scores {
    sum: Vec<f64>,
    touched: Vec<usize>,
}

impl Scores {
    fn new(n: usize) -> Scores {
        Scores { sum: vec![0.0; n], touched: Vec::new() }
    }

    fn add(&mut self, i: usize, score: f64) {
        if self.sum[i] == 0.0 {
            self.touched.push(i);
        }
        self.sum[i] += score;
    }

    /// Every touched node with its sum, leaving all sums at zero.
    fn drain(&mut self) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.touched.drain(..).map(|i| (i, std::mem::take(&mut self.sum[i])))
    }
}

/// Connected components of the links; clusters are sorted by their first fact.
pub fn clusters(facts: &[Node], entries: &[Node], links: &Links) -> Vec<Cluster> {
    // Union-find over facts (0..f) and entries (f..f+e).
    let f = facts.len();
    let mut parent: Vec<usize> = (0..f + entries.len()).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut union = |a: usize, b: usize| {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    };
    for (i, near) in links.ranked.iter().enumerate() {
        for &j in near {
            union(i, f + j);
        }
    }
    for &(i, j) in &links.fact_fact {
        union(i, j);
    }
    let mut by_root: std::collections::BTreeMap<usize, Cluster> = Default::default();
    for (i, fact) in facts.iter().enumerate() {
        let r = find(&mut parent, i);
        by_root.entry(r).or_default().facts.push(fact.id.to_string());
    }
    for (j, entry) in entries.iter().enumerate() {
        let r = find(&mut parent, f + j);
        if r < f {
            // Only entries linked to some fact take part.
            by_root.entry(r).or_default().entries.push(entry.id.to_string());
        }
    }
    by_root
        .into_values()
        .map(|mut c| {
            c.facts.sort();
            c.entries.sort();
            c
        })
        .collect()
}

/// Deterministic noise in [-0.5, 0.5) from `seed` (xorshift), for tests that need many vectors.
#[cfg(test)]
pub(super) fn noise(seed: u64) -> impl FnMut() -> f32 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn components_join_facts_sharing_a_neighbour() {
        let va = unit(&[1.0, 0.0, 0.0]);
        let vb = unit(&[0.9, 0.1, 0.0]);
        let vc = unit(&[0.0, 0.0, 1.0]);
        let facts = [
            Node { id: "f-a", text: "works at google", vector: &va },
            Node { id: "f-b", text: "started at microsoft", vector: &vb },
            Node { id: "f-c", text: "has a dog", vector: &vc },
        ];
        let entries = [
            Node { id: "m-job", text: "works at google", vector: &va },
            Node { id: "m-pet", text: "owns a dog named rex", vector: &vc },
        ];
        let links =
            neighbours(&facts, &entries, &[], NeighbourParams { neighbor_k: 1, lexical_k: 0, min_similarity: 0.25 })
                .unwrap();
        let clusters = clusters(&facts, &entries, &links);
        assert_eq!(clusters.len(), 2);
        assert_eq!(clusters[0], Cluster { facts: vec!["f-a".into(), "f-b".into()], entries: vec!["m-job".into()] });
        assert_eq!(clusters[1], Cluster { facts: vec!["f-c".into()], entries: vec!["m-pet".into()] });
    }

    #[test]
    fn every_entry_is_in_at_most_one_cluster() {
        let vs: Vec<Vec<f32>> = (0..40).map(|i| unit(&[(i as f32).sin(), (i as f32).cos(), 0.3])).collect();
        let texts: Vec<String> = (0..40).map(|i| format!("text {i} word{}", i % 7)).collect();
        let ids: Vec<String> = (0..40).map(|i| format!("x-{i}")).collect();
        let facts: Vec<Node> = (0..20).map(|i| Node { id: &ids[i], text: &texts[i], vector: &vs[i] }).collect();
        let entries: Vec<Node> = (20..40).map(|i| Node { id: &ids[i], text: &texts[i], vector: &vs[i] }).collect();
        let links =
            neighbours(&facts, &entries, &[], NeighbourParams { neighbor_k: 2, lexical_k: 2, min_similarity: 0.0 })
                .unwrap();
        let clusters = clusters(&facts, &entries, &links);
        let mut seen = std::collections::HashSet::new();
        for c in &clusters {
            for e in &c.entries {
                assert!(seen.insert(e.clone()), "{e} in two clusters");
            }
        }
        assert_eq!(clusters.iter().map(|c| c.facts.len()).sum::<usize>(), 20, "every fact in exactly one cluster");
    }

    #[test]
    fn lexical_links_catch_what_vectors_miss() {
        let va = unit(&[1.0, 0.0]);
        let vb = unit(&[0.0, 1.0]);
        let facts = [Node { id: "f-1", text: "Relocated to Lisbon", vector: &va }];
        let entries = [
            Node { id: "m-1", text: "Lives in Lisbon", vector: &vb },
            Node { id: "m-2", text: "Unrelated", vector: &va },
        ];
        let links =
            neighbours(&facts, &entries, &[], NeighbourParams { neighbor_k: 2, lexical_k: 1, min_similarity: 0.25 })
                .unwrap();
        let c = clusters(&facts, &entries, &links);
        assert_eq!(c[0].entries, ["m-1", "m-2"]);
    }

    #[test]
    fn a_fact_sees_its_best_entries_whatever_their_cosine() {
        // Every entry points away from the fact: a similarity floor would show it nothing.
        let vf = unit(&[1.0, 0.0, 0.0]);
        let vs: Vec<Vec<f32>> = (0..5).map(|i| unit(&[-1.0, i as f32, 1.0])).collect();
        let facts = [Node { id: "f-1", text: "Sold the old car", vector: &vf }];
        let texts = ["Drives a blue car", "Owns a boat", "Has a cat", "Likes jazz", "Reads poetry"];
        let ids = ["m-0", "m-1", "m-2", "m-3", "m-4"];
        let entries: Vec<Node> = (0..5).map(|i| Node { id: ids[i], text: texts[i], vector: &vs[i] }).collect();
        let links =
            neighbours(&facts, &entries, &[], NeighbourParams { neighbor_k: 3, lexical_k: 2, min_similarity: 0.9 })
                .unwrap();
        // Best by cosine (all negative), the only one sharing a word, second by cosine.
        assert_eq!(links.ranked[0], [4, 0, 3]);
    }

    #[test]
    fn fusion_ranks_an_entry_high_in_both_lists_first_and_keeps_k() {
        assert_eq!(fuse(&[1, 2, 3], &[3, 4], 3), [3, 1, 2], "3 is in both; then by place, cosine first");
        assert_eq!(fuse(&[1, 2], &[], 5), [1, 2]);
        assert_eq!(fuse(&[], &[7, 6], 1), [7]);
    }

    #[test]
    fn facts_link_only_when_each_is_among_the_others_nearest() {
        // A chain a - b - c - d where each link is strong only one way: no mutual pair but (a, b)
        // and (c, d), so the batch does not become one component through b - c.
        let near = vec![vec![1], vec![0, 2], vec![3], vec![2]];
        assert_eq!(mutual(&near).into_iter().collect::<Vec<_>>(), [(0, 1), (2, 3)]);
    }

    #[test]
    fn top_k_matches_a_plain_scan() {
        let vs: Vec<Vec<f32>> =
            (0..700).map(|i| unit(&[(i as f32 * 0.37).sin(), (i as f32 * 0.11).cos(), 1.0])).collect();
        let nodes: Vec<Node> = vs.iter().map(|v| Node { id: "x", text: "", vector: v }).collect();
        let got = top_k_dot(&nodes[..600], &nodes[600..], 3, false, -1.0).unwrap();
        for (i, near) in got.iter().enumerate() {
            let mut scan: Vec<(f32, usize)> = (0..100)
                .map(|j| (nodes[i].vector.iter().zip(nodes[600 + j].vector).map(|(a, b)| a * b).sum(), j))
                .collect();
            scan.sort_by(|a, b| b.0.total_cmp(&a.0));
            let want: Vec<f32> = scan[..3].iter().map(|x| x.0).collect();
            let have: Vec<f32> = near
                .iter()
                .map(|&j| nodes[i].vector.iter().zip(nodes[600 + j].vector).map(|(a, b)| a * b).sum())
                .collect();
            for (w, h) in want.iter().zip(&have) {
                assert!((w - h).abs() < 1e-5, "row {i}: {want:?} vs {have:?}");
            }
        }
    }

    #[test]
    fn within_one_set_a_query_is_never_its_own_neighbour() {
        // More queries than one scoring block, so rows of later blocks are checked too.
        let vs: Vec<Vec<f32>> =
            (0..600).map(|i| unit(&[(i as f32 * 0.37).sin(), (i as f32 * 0.11).cos(), 1.0])).collect();
        let nodes: Vec<Node> = vs.iter().map(|v| Node { id: "x", text: "", vector: v }).collect();
        let dot = |a: usize, b: usize| -> f32 { nodes[a].vector.iter().zip(nodes[b].vector).map(|(x, y)| x * y).sum() };
        let got = top_k_dot(&nodes, &nodes, 2, true, -1.0).unwrap();
        for (i, near) in got.iter().enumerate() {
            assert!(!near.contains(&i), "row {i} lists itself");
            let mut scan: Vec<(f32, usize)> = (0..600).filter(|&j| j != i).map(|j| (dot(i, j), j)).collect();
            scan.sort_by(|a, b| b.0.total_cmp(&a.0));
            let have: Vec<f32> = near.iter().map(|&j| dot(i, j)).collect();
            assert!((scan[0].0 - have[0]).abs() < 1e-5 && (scan[1].0 - have[1]).abs() < 1e-5, "row {i}");
        }
    }

    /// Vectors around `centres` random directions in `dim` dimensions, deterministic.
    fn clustered(n: usize, centres: usize, dim: usize) -> Vec<Vec<f32>> {
        let mut next = noise(0x9e37_79b9_7f4a_7c15);
        let centres: Vec<Vec<f32>> = (0..centres).map(|_| (0..dim).map(|_| next()).collect()).collect();
        (0..n).map(|i| unit(&centres[i % centres.len()].iter().map(|c| c + 0.6 * next()).collect::<Vec<_>>())).collect()
    }

    #[test]
    fn grouped_search_probing_every_group_is_the_exact_one() {
        let vs = clustered(900, 7, 16);
        let nodes: Vec<Node> = vs.iter().map(|v| Node { id: "x", text: "", vector: v }).collect();
        let exact = top_k_dot(&nodes, &nodes, 4, true, 0.1).unwrap();
        assert_eq!(grouped_top_k(&nodes, 4, 0.1, usize::MAX).unwrap(), exact);
    }

    #[test]
    fn grouped_search_finds_nearly_every_exact_neighbour() {
        let vs = clustered(4000, 40, 32);
        let nodes: Vec<Node> = vs.iter().map(|v| Node { id: "x", text: "", vector: v }).collect();
        let exact = top_k_dot(&nodes, &nodes, 8, true, 0.25).unwrap();
        let grouped = grouped_top_k(&nodes, 8, 0.25, PROBE_GROUPS).unwrap();
        let wanted: usize = exact.iter().map(Vec::len).sum();
        let found: usize = exact.iter().zip(&grouped).map(|(e, g)| e.iter().filter(|j| g.contains(j)).count()).sum();
        assert!(wanted > 10_000, "the test set has neighbours to find: {wanted}");
        assert!(found as f64 >= 0.95 * wanted as f64, "found {found} of {wanted}");
        assert!(grouped.iter().enumerate().all(|(i, near)| !near.contains(&i)), "no node is its own neighbour");
    }

    #[test]
    fn best_of_keeps_the_top_scores_above_the_floor() {
        let row = [0.1, 0.9, 0.5, 0.9, 0.2, 0.7];
        assert_eq!(best_of(&row, 3, 0.0, None), [1, 3, 5]);
        assert_eq!(best_of(&row, 3, 0.0, Some(3)), [1, 5, 2]);
        assert_eq!(best_of(&row, 10, 0.6, None), [1, 3, 5]);
        assert!(best_of(&row, 2, 0.95, None).is_empty());
    }
}
