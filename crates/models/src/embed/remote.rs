//! Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint.
//!
//! Texts go out in batches of `embedding.batch_size`, one request at a time; each reply item is
//! placed by its `index`, and vectors are L2-normalised here whatever the server does. The
//! dimension is learned from the first reply: [`OpenAiEmbedder::from_config`] makes no request
//! and reports `dim() == 0` until then, while [`OpenAiEmbedder::connect`] probes the endpoint
//! with one text so that `dim()` and `id()` are known before anything is indexed. A reply whose
//! dimension differs from the one learned is an error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{EmbedError, Embedder};
use crate::endpoint::{Endpoint, HttpError};
use memfold_store::config::EmbeddingConfig;

const EMBEDDINGS_PATH: &str = "/embeddings";

/// An [`Embedder`] backed by an OpenAI-compatible HTTP endpoint.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    endpoint: Endpoint,
    model: String,
    batch_size: usize,
    /// 0 until the first reply.
    dim: AtomicUsize,
}

impl OpenAiEmbedder {
    /// The embedder for `cfg`, without any request; the dimension is learned from the first reply.
    pub fn from_config(cfg: &EmbeddingConfig) -> Result<OpenAiEmbedder, EmbedError> {
        let timeout = Duration::from_secs(cfg.timeout_secs.max(1));
        let endpoint = Endpoint::new("embedding", &cfg.base_url, &cfg.api_key_env, timeout, cfg.max_retries)
            .map_err(into_embed_error)?;
        Ok(OpenAiEmbedder {
            endpoint,
            model: cfg.model.clone(),
            batch_size: cfg.batch_size.max(1),
            dim: AtomicUsize::new(0),
        })
    }

    /// [`OpenAiEmbedder::from_config`] plus one probe request, so `dim()` and `id()` are final.
    pub async fn connect(cfg: &EmbeddingConfig) -> Result<OpenAiEmbedder, EmbedError> {
        let embedder = OpenAiEmbedder::from_config(cfg)?;
        embedder.embed_batch(&["dimension probe".to_string()]).await?;
        tracing::info!(url = %embedder.endpoint.base_url(), model = %embedder.model, dim = embedder.dim(),
            "embedding endpoint ready");
        Ok(embedder)
    }

    /// Replace the retry backoff schedule (see [`Endpoint::with_backoff`]).
    #[cfg(test)]
    pub fn with_backoff(mut self, base: Duration, cap: Duration) -> OpenAiEmbedder {
        self.endpoint = self.endpoint.with_backoff(base, cap);
        self
    }

    async fn embed_all(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            vectors.extend(self.embed_batch(batch).await?);
        }
        Ok(vectors)
    }

    async fn embed_batch(&self, batch: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Servers reject empty strings; a blank text gets the vector of a single space.
        let input: Vec<&str> = batch.iter().map(|t| if t.trim().is_empty() { " " } else { t.as_str() }).collect();
        let body = json!({"model": self.model, "input": input});
        let reply = self.endpoint.post_json(EMBEDDINGS_PATH, &body).await.map_err(into_embed_error)?;
        let url = self.endpoint.url(EMBEDDINGS_PATH);
        let vectors =
            read_reply(&reply, batch.len()).map_err(|message| EmbedError::BadReply { url: url.clone(), message })?;
        let dim = vectors.first().map_or(0, Vec::len);
        let known = match self.dim.compare_exchange(0, dim, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => dim,
            Err(known) => known,
        };
        if let Some(other) = vectors.iter().find(|v| v.len() != known) {
            let message = format!("a vector of length {} where {known} was expected", other.len());
            return Err(EmbedError::BadReply { url, message });
        }
        Ok(vectors)
    }
}

impl Embedder for OpenAiEmbedder {
    /// `openai:<model>:<dim>` (dim is 0 before the first reply, see the module docs).
    fn id(&self) -> String {
        format!("openai:{}:{}", self.model, self.dim())
    }

    fn dim(&self) -> usize {
        self.dim.load(Ordering::SeqCst)
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(self.embed_all(texts))
    }
}

/// The vectors of a reply, in input order, normalised.
fn read_reply(reply: &Value, expected: usize) -> Result<Vec<Vec<f32>>, String> {
    let data = reply["data"].as_array().ok_or("no data array")?;
    if data.len() != expected {
        return Err(format!("{} vectors for {expected} inputs", data.len()));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = match item.get("index") {
            None => position,
            Some(index) => index.as_u64().map(|i| i as usize).ok_or_else(|| format!("bad index {index}"))?,
        };
        let slot = slots.get_mut(index).ok_or_else(|| format!("index {index} out of range"))?;
        let values = item["embedding"].as_array().ok_or_else(|| format!("item {index} has no embedding array"))?;
        let mut vector = values
            .iter()
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| format!("item {index} has a non-numeric embedding"))?;
        if vector.is_empty() {
            return Err(format!("item {index} has an empty embedding"));
        }
        normalise(&mut vector);
        if slot.replace(vector).is_some() {
            return Err(format!("index {index} appears twice"));
        }
    }
    // Every slot is filled: `expected` distinct in-range indices were seen.
    Ok(slots.into_iter().flatten().collect())
}

fn normalise(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Map an HTTP error into the embedder's error, keeping the URL.
fn into_embed_error(error: HttpError) -> EmbedError {
    let url = error.url().to_string();
    match error {
        HttpError::Unreachable { attempts, message, .. } => {
            EmbedError::Unreachable { url, message: format!("after {attempts} attempts: {message}") }
        }
        HttpError::Status { status, attempts, body, .. } => {
            let message = if attempts > 1 { format!("after {attempts} attempts: {body}") } else { body };
            EmbedError::Status { url, status, message }
        }
        HttpError::BadReply { message, .. } => EmbedError::BadReply { url, message },
        other => EmbedError::Unreachable { url, message: other.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{FakeOpenAi, fake_embedding};

    fn texts(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("fact number {i} about topic {}", i % 7)).collect()
    }

    #[tokio::test]
    async fn batches_keep_input_order() {
        let fake = FakeOpenAi::start().await.with_embedding_dim(32);
        let embedder = OpenAiEmbedder::from_config(&fake.embedding_config()).unwrap();
        assert_eq!(embedder.dim(), 0);
        let texts = texts(130);
        let vectors = embedder.embed(&texts).await.unwrap();
        assert_eq!(fake.embedding_calls(), 3, "130 texts in batches of 64");
        assert_eq!(vectors.len(), 130);
        for (text, vector) in texts.iter().zip(&vectors) {
            let expected = fake_embedding(text, 32);
            assert!(vector.iter().zip(&expected).all(|(a, b)| (a - b).abs() < 1e-5), "{text}");
        }
        assert_eq!(embedder.id(), "openai:fake-embed:32");
        assert!(embedder.embed(&[]).await.unwrap().is_empty());
        assert_eq!(fake.embedding_calls(), 3, "no request for no texts");
    }

    #[tokio::test]
    async fn connect_learns_the_dimension() {
        let fake = FakeOpenAi::start().await.with_embedding_dim(24);
        let embedder = OpenAiEmbedder::connect(&fake.embedding_config()).await.unwrap();
        assert_eq!(embedder.dim(), 24);
        assert_eq!(embedder.id(), "openai:fake-embed:24");
        let vector = &embedder.embed(&[String::new()]).await.unwrap()[0];
        let norm: f32 = vector.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4, "normalised, even for a blank text");
    }

    #[tokio::test]
    async fn transient_failures_are_retried_and_hard_ones_named() {
        let fake = FakeOpenAi::start().await;
        let embedder = OpenAiEmbedder::from_config(&fake.embedding_config())
            .unwrap()
            .with_backoff(Duration::from_millis(5), Duration::from_millis(20));
        fake.fail_embeddings_next(1, 503);
        embedder.embed(&texts(2)).await.unwrap();
        assert_eq!(fake.embedding_calls(), 2);
        fake.fail_embeddings_next(1, 401);
        let err = embedder.embed(&texts(2)).await.unwrap_err();
        assert_eq!(fake.embedding_calls(), 3, "no retry on 401");
        assert!(matches!(err, EmbedError::Status { status: 401, .. }), "{err:?}");
        assert!(err.to_string().contains(&format!("{}/embeddings", fake.base_url())), "{err}");
    }

    #[tokio::test]
    async fn down_endpoint_is_unreachable_and_named() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let cfg =
            EmbeddingConfig { base_url: format!("http://127.0.0.1:{port}/v1"), max_retries: 1, ..Default::default() };
        let err = OpenAiEmbedder::connect(&cfg).await.unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, EmbedError::Unreachable { .. }), "{err:?}");
        assert!(
            msg.starts_with(&format!("embedding endpoint {}/embeddings unreachable: after 2 attempts", cfg.base_url))
        );
    }

    #[test]
    fn malformed_replies_are_rejected() {
        let item = |index: usize| json!({"index": index, "embedding": [3.0, 4.0]});
        let ok = read_reply(&json!({"data": [item(1), item(0)]}), 2).unwrap();
        assert_eq!(ok, vec![vec![0.6, 0.8], vec![0.6, 0.8]]);
        assert_eq!(read_reply(&json!({"data": [item(0), item(0)]}), 2).unwrap_err(), "index 0 appears twice");
        assert_eq!(read_reply(&json!({"data": [item(2), item(0)]}), 2).unwrap_err(), "index 2 out of range");
        assert_eq!(read_reply(&json!({"data": [item(0)]}), 2).unwrap_err(), "1 vectors for 2 inputs");
        assert_eq!(read_reply(&json!({"error": "x"}), 1).unwrap_err(), "no data array");
    }
}
