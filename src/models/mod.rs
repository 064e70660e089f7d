//! The models memfold asks: text embedders ([`embed`]: local, MiniLM in process, or an
//! OpenAI-compatible endpoint) and the chat client ([`llm`]), over the HTTP plumbing they
//! share ([`endpoint`]).

pub mod embed;
pub mod endpoint;
pub mod llm;
