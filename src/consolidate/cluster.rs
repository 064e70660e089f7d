//! Neighbours and clusters: which new facts and entries are decided together.
//!
//! Each new fact is linked to its top-`neighbor_k` entries and other new facts by cosine,
//! plus its top-`lexical_k` entries and facts by shared rare words, so a paraphrase the
//! embedding misses still meets its partner. Clusters are the connected components of
//! those links: every entry is in at most one cluster, so ops of different clusters
//! cannot conflict. Similarity only proposes candidates here; it never decides anything.
//!
//! Scoring is exact and in memory: vectors are compared with a matrix product in
//! chunks, so a pass is a pure function of the texts and their vectors.

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
    pub neighbor_k: usize,
    pub lexical_k: usize,
    /// Cosine below which a vector neighbour is not shown to the decider at all. Without a
    /// floor every fact links to k others however unrelated, and components grow to the
    /// whole batch. It limits candidates only; it never merges anything.
    pub min_similarity: f32,
}

/// Links from each fact (index into `facts`) to entries and to other facts.
#[derive(Debug, Clone, Default)]
pub struct Links {
    pub fact_entry: Vec<(usize, usize)>,
    pub fact_fact: Vec<(usize, usize)>,
}

/// Find neighbour links by cosine (vectors are unit length, so cosine = dot product) and by words.
pub fn neighbours(facts: &[Node], entries: &[Node], params: NeighbourParams) -> Links {
    let mut links = Links::default();
    let floor = params.min_similarity;
    for (i, near) in top_k_dot(facts, entries, params.neighbor_k, false, floor).into_iter().enumerate() {
        links.fact_entry.extend(near.into_iter().map(|j| (i, j)));
    }
    for (i, near) in top_k_dot(facts, facts, params.neighbor_k, true, floor).into_iter().enumerate() {
        links.fact_fact.extend(near.into_iter().map(|j| (i, j)));
    }
    if params.lexical_k > 0 {
        let entry_words = WordIndex::new(entries);
        let fact_words = WordIndex::new(facts);
        for (i, fact) in facts.iter().enumerate() {
            links.fact_entry.extend(entry_words.top(fact.text, params.lexical_k, None).into_iter().map(|j| (i, j)));
            links.fact_fact.extend(fact_words.top(fact.text, params.lexical_k, Some(i)).into_iter().map(|j| (i, j)));
        }
    }
    links
}

/// Exact top-k by dot product (at least `floor`) for every query, in chunks to bound memory.
/// With `same_set`, a query is never its own neighbour.
fn top_k_dot(queries: &[Node], targets: &[Node], k: usize, same_set: bool, floor: f32) -> Vec<Vec<usize>> {
    if targets.is_empty() || k == 0 {
        return vec![Vec::new(); queries.len()];
    }
    let dim = targets[0].vector.len();
    let matrix: Vec<f32> = targets.iter().flat_map(|t| pad(t.vector, dim)).collect();
    const CHUNK: usize = 512;
    let mut out = Vec::with_capacity(queries.len());
    for (c, chunk) in queries.chunks(CHUNK).enumerate() {
        let q: Vec<f32> = chunk.iter().flat_map(|n| pad(n.vector, dim)).collect();
        let scores = matmul_t(&q, chunk.len(), &matrix, targets.len(), dim);
        for (r, row) in scores.chunks(targets.len()).enumerate() {
            let me = c * CHUNK + r;
            let mut best: Vec<(f32, usize)> = Vec::with_capacity(k + 1);
            for (j, &s) in row.iter().enumerate() {
                if (same_set && j == me) || s < floor {
                    continue;
                }
                if best.len() < k || s > best[best.len() - 1].0 {
                    let at = best.partition_point(|&(b, bj)| b > s || (b == s && bj < j));
                    best.insert(at, (s, j));
                    best.truncate(k);
                }
            }
            out.push(best.into_iter().map(|(_, j)| j).collect());
        }
    }
    out
}

fn pad(v: &[f32], dim: usize) -> impl Iterator<Item = f32> + '_ {
    v.iter().copied().chain(std::iter::repeat(0.0)).take(dim)
}

/// `a (n×d) · bᵀ (m×d)` → n×m, row-major, using candle's optimised CPU matmul.
fn matmul_t(a: &[f32], n: usize, b: &[f32], m: usize, d: usize) -> Vec<f32> {
    use candle_core::{Device, Tensor};
    let product = (|| -> candle_core::Result<Vec<f32>> {
        let a = Tensor::from_slice(a, (n, d), &Device::Cpu)?;
        let b = Tensor::from_slice(b, (m, d), &Device::Cpu)?;
        a.matmul(&b.t()?)?.flatten_all()?.to_vec1::<f32>()
    })();
    product.unwrap_or_else(|_| {
        // Shapes are built above, so this is unreachable in practice; keep a plain fallback.
        let mut out = vec![0.0; n * m];
        for i in 0..n {
            for j in 0..m {
                out[i * m + j] = (0..d).map(|x| a[i * d + x] * b[j * d + x]).sum();
            }
        }
        out
    })
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

    fn top(&self, text: &str, k: usize, exclude: Option<usize>) -> Vec<usize> {
        let mut scores: HashMap<usize, f64> = HashMap::new();
        for w in words(text) {
            let Some(list) = self.postings.get(&w) else { continue };
            // Words in more than 1% of a large corpus say little about identity, and scoring
            // their long posting lists dominated a pass (10k facts × 50k entries); skip them.
            if list.len() > 50 && list.len() * 100 > self.n {
                continue;
            }
            let idf = ((self.n as f64 + 1.0) / list.len() as f64).ln();
            for &i in list {
                *scores.entry(i).or_default() += idf;
            }
        }
        let mut ranked: Vec<(f64, usize)> =
            scores.into_iter().filter(|(i, _)| Some(*i) != exclude).map(|(i, s)| (s, i)).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        ranked.into_iter().take(k).map(|(_, i)| i).collect()
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
    for &(i, j) in &links.fact_entry {
        union(i, f + j);
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
        let links = neighbours(&facts, &entries, NeighbourParams { neighbor_k: 1, lexical_k: 0, min_similarity: 0.25 });
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
        let links = neighbours(&facts, &entries, NeighbourParams { neighbor_k: 2, lexical_k: 2, min_similarity: 0.0 });
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
        let links = neighbours(&facts, &entries, NeighbourParams { neighbor_k: 1, lexical_k: 1, min_similarity: 0.25 });
        let c = clusters(&facts, &entries, &links);
        assert_eq!(c[0].entries, ["m-1", "m-2"]);
    }

    #[test]
    fn top_k_matches_a_plain_scan() {
        let vs: Vec<Vec<f32>> =
            (0..700).map(|i| unit(&[(i as f32 * 0.37).sin(), (i as f32 * 0.11).cos(), 1.0])).collect();
        let nodes: Vec<Node> = vs.iter().map(|v| Node { id: "x", text: "", vector: v }).collect();
        let got = top_k_dot(&nodes[..600], &nodes[600..], 3, false, -1.0);
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
}
