//! The built-in embedder: hashed word and character n-grams, no weights, no network.
//!
//! Text is lower-cased (Unicode), apostrophes are dropped and every other character that is not
//! a letter or digit separates words. The features are word unigrams and bigrams and the
//! character 3- and 4-grams of each word with `<` `>` boundary markers, each hashed (FNV-1a with
//! a murmur finaliser, so vectors are identical across runs and platforms) into one of `dim`
//! buckets with a hash-chosen sign, weighted `1 + ln(tf)` and L2-normalised. Text without a
//! single word maps to the unit vector on bucket 0.
//!
//! It is lexical: near-duplicates and inflections ("fix my car" / "fix my cars") score high,
//! but a paraphrase that shares no words ("works as a nurse" / "cares for patients in a
//! hospital ward") scores near zero. Use `minilm` or `openai` when that matters; consolidation
//! also adds full-text candidates for the same reason.

use futures::future::BoxFuture;

use super::{EmbedError, Embedder};

/// Weights of the feature kinds, before tf and normalisation.
const WORD: f32 = 1.0;
const BIGRAM: f32 = 0.5;
const CHAR3: f32 = 0.5;
const CHAR4: f32 = 0.5;
/// Batches up to this size are embedded on the calling task; larger ones on the blocking pool.
const INLINE_MAX: usize = 32;

/// Hashed n-gram embedder; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalEmbedder {
    dim: usize,
}

impl LocalEmbedder {
    /// An embedder with `dim` buckets (at least 1).
    pub fn new(dim: usize) -> LocalEmbedder {
        LocalEmbedder { dim: dim.max(1) }
    }

    /// The vector of one text.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let normalised = normalise(text);
        let words: Vec<&str> = normalised.split(' ').filter(|w| !w.is_empty()).collect();
        let mut features: Vec<(u64, f32)> = Vec::with_capacity(words.len() * 12);
        let mut chars: Vec<char> = Vec::new();
        for (i, word) in words.iter().enumerate() {
            features.push((Fnv::new(b'w').bytes(word.as_bytes()).finish(), WORD));
            if let Some(next) = words.get(i + 1) {
                features.push((
                    Fnv::new(b'b').bytes(word.as_bytes()).bytes(&[0xff]).bytes(next.as_bytes()).finish(),
                    BIGRAM,
                ));
            }
            chars.clear();
            chars.push('<');
            chars.extend(word.chars());
            chars.push('>');
            for (n, kind, weight) in [(3, b'3', CHAR3), (4, b'4', CHAR4)] {
                for gram in chars.windows(n) {
                    let hash = gram.iter().fold(Fnv::new(kind), |h, c| h.bytes(&u32::from(*c).to_le_bytes()));
                    features.push((hash.finish(), weight));
                }
            }
        }
        let mut v = vec![0.0f32; self.dim];
        features.sort_unstable_by_key(|&(h, _)| h);
        for run in features.chunk_by(|a, b| a.0 == b.0) {
            let (hash, weight) = run[0];
            let value = weight * (1.0 + (run.len() as f32).ln());
            let sign = if hash >> 63 == 1 { -1.0 } else { 1.0 };
            v[(hash % self.dim as u64) as usize] += sign * value;
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            for x in &mut v {
                *x /= norm;
            }
        } else {
            v[0] = 1.0;
        }
        v
    }
}

impl Embedder for LocalEmbedder {
    fn id(&self) -> String {
        format!("local:v1:{}", self.dim)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            if texts.len() <= INLINE_MAX {
                return Ok(texts.iter().map(|t| self.vector(t)).collect());
            }
            let (this, texts) = (*self, texts.to_vec());
            tokio::task::spawn_blocking(move || texts.iter().map(|t| this.vector(t)).collect())
                .await
                .map_err(|e| EmbedError::Model(format!("local embedder task failed: {e}")))
        })
    }
}

/// Lower-case, drop apostrophes, and turn every other non-alphanumeric character into a space.
fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if c != '\'' && c != '\u{2019}' {
            out.push(' ');
        }
    }
    out
}

/// 64-bit FNV-1a over a kind byte and the feature's bytes.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new(kind: u8) -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325).bytes(&[kind])
    }

    fn bytes(self, bytes: &[u8]) -> Fnv {
        Fnv(bytes.iter().fold(self.0, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)))
    }

    /// The murmur3 finaliser, so that every output bit depends on every input bit.
    fn finish(self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;
    use crate::embed::testing::paraphrase_recall;

    fn sim(a: &str, b: &str) -> f32 {
        let e = LocalEmbedder::new(384);
        cosine(&e.vector(a), &e.vector(b))
    }

    #[test]
    fn same_text_same_vector_across_instances() {
        let text = "Moved to Lisbon in October; the cat, Miso, came too.";
        assert_eq!(LocalEmbedder::new(384).vector(text), LocalEmbedder::new(384).vector(text));
        assert_eq!(LocalEmbedder::new(384).id(), "local:v1:384");
    }

    #[test]
    fn vectors_do_not_change_between_releases() {
        // The index keys vectors by `local:v1:<dim>`: changing the features needs a new id.
        let v = LocalEmbedder::new(16).vector("Fix my car");
        let rounded: Vec<i32> = v.iter().map(|x| (x * 1000.0).round() as i32).collect();
        assert_eq!(
            rounded,
            [-209, 0, -209, 209, 0, 209, 417, 0, -209, 209, -417, 417, 0, -209, 0, 417],
            "update this golden vector only together with the id"
        );
    }

    #[test]
    fn vectors_have_unit_norm_even_for_empty_text() {
        let e = LocalEmbedder::new(384);
        for text in ["fix my car", "", "  ...!? ", "Ünïcödé ß and 日本語"] {
            let v = e.vector(text);
            assert_eq!(v.len(), 384);
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "{text:?}: {norm}");
        }
        assert_eq!(e.vector("")[0], 1.0);
    }

    #[test]
    fn near_duplicates_score_high_and_unrelated_low() {
        let near = sim("fix my car", "fix my cat");
        let same = sim("Fix my car!", "fix my car");
        let unrelated = sim("fix my car", "allergic to peanuts");
        let inflected = sim("Allergic to peanuts", "has a peanut allergy");
        println!("fix my car/cat {near:.3}, identical {same:.3}, unrelated {unrelated:.3}, inflected {inflected:.3}");
        assert!(same > 0.999);
        assert!(near > 0.5 && near < 0.95, "{near}");
        assert!(unrelated.abs() < 0.2, "{unrelated}");
        assert!(inflected > 0.25 && inflected < near, "{inflected}");
    }

    #[tokio::test]
    async fn paraphrase_recall_at_3() {
        let recall = paraphrase_recall(&LocalEmbedder::new(384), 3).await;
        println!("local:v1:384 paraphrase recall@3 = {recall:.3}");
        // Measured 0.525: every pair that shares words is found, the others only by chance.
        assert!(recall >= 0.45, "{recall}");
    }

    #[tokio::test]
    async fn large_batches_run_on_the_blocking_pool_in_order() {
        let e = LocalEmbedder::new(64);
        let texts: Vec<String> = (0..100).map(|i| format!("fact number {i}")).collect();
        let vectors = e.embed(&texts).await.unwrap();
        assert_eq!(vectors.len(), 100);
        assert_eq!(vectors[42], e.vector("fact number 42"));
        let many: Vec<String> =
            (0..5000).map(|i| format!("Moved to city number {i} in October with the dog")).collect();
        let started_many = std::time::Instant::now();
        e.embed(&many).await.unwrap();
        let per_sec = 5000.0 / started_many.elapsed().as_secs_f64();
        let build = if cfg!(debug_assertions) { "debug" } else { "release" };
        println!("local embedder: {per_sec:.0} docs/s ({build} build)");
    }
}
