//! The models memfold asks: text embedders ([`embed`]: local, MiniLM in process, or an
//! OpenAI-compatible endpoint) and the chat client ([`llm`]), over the HTTP plumbing they
//! share ([`endpoint`]).

pub mod embed;
pub mod endpoint;
pub mod llm;

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

use memfold_store::sys::guard;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use embed::{EmbedError, Embedder};
use llm::{ChatClient, LlmError};
use memfold_store::config::{EmbeddingConfig, LlmConfig};

/// The models a process shares among the roots it serves (a daemon's spaces): one embedder
/// model per embedding configuration, loaded or connected once (MiniLM's weights are held once
/// however many spaces use them), and one chat client per LLM configuration, so its connection
/// pool and what it learned of the server are shared. Each root still keeps its own cache of
/// vectors.
#[derive(Default)]
pub struct Models {
    embedders: tokio::sync::Mutex<HashMap<String, Arc<dyn Embedder>>>,
    chats: Mutex<HashMap<String, Option<ChatClient>>>,
}

impl Models {
    /// The embedder for `cfg`, with `cache_dir` as its vector cache (the model shared); an
    /// endpoint's requests are masked and recorded in `egress`.
    pub async fn embedder(
        &self,
        cfg: &EmbeddingConfig,
        cache_dir: &Path,
        egress: memfold_store::egress::Egress,
    ) -> Result<Arc<dyn Embedder>, EmbedError> {
        let key = serde_json::to_string(cfg).expect("a configuration serialises");
        let model = {
            let mut embedders = self.embedders.lock().await;
            match embedders.get(&key) {
                Some(model) => model.clone(),
                None => {
                    let model = embed::model(cfg).await?;
                    embedders.insert(key, model.clone());
                    model
                }
            }
        };
        let model = match cfg.provider {
            memfold_store::config::EmbeddingProvider::Openai => embed::recorded(model, egress, &cfg.base_url),
            _ => model,
        };
        embed::cached(model, cache_dir)
    }

    /// The chat client for `cfg` (none without a base URL).
    pub fn chat(&self, cfg: &LlmConfig) -> Result<Option<ChatClient>, LlmError> {
        let key = serde_json::to_string(cfg).expect("a configuration serialises");
        let mut chats = guard(&self.chats);
        if let Some(chat) = chats.get(&key) {
            return Ok(chat.clone());
        }
        let chat = ChatClient::from_config(cfg)?;
        chats.insert(key, chat.clone());
        Ok(chat)
    }
}
