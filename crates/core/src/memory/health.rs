//! What `memfold doctor` reads of a memory without opening it: the daemon recorded as serving
//! it, the last pass, its size on disk, the embedder the configuration chooses. Each read is
//! cheap and changes nothing.

use std::path::{Path, PathBuf};

use memfold_store::Root;
use memfold_store::config::Config;
use memfold_store::home::Home;
use memfold_store::listening::Listening;
use memfold_store::state::{LastRun, State};

/// The daemon serving `root` (or, with a home, the home's), while one holds its serve lock.
pub fn daemon_of(root: &Root, home: Option<&Home>) -> Option<Listening> {
    match home {
        Some(home) => Listening::read_from(&home.listening_file(), &home.serve_lock()),
        None => Listening::read(root),
    }
}

/// The last pass recorded in `root`'s state (none yet: `Ok(None)`), or why the state does not
/// read.
pub fn last_pass(root: &Root) -> Result<Option<LastRun>, String> {
    State::load(&root.state_json()).map(|state| state.last_run).map_err(|e| e.to_string())
}

/// The bytes of every file under `dir`.
pub fn disk_bytes(dir: &Path) -> u64 {
    memfold_store::tree_bytes(dir)
}

/// The MiniLM folder the configuration chooses (none: another embedder), and the setting that
/// chose it.
pub fn minilm_dir(config: &Config) -> (Option<PathBuf>, String) {
    match memfold_models::embed::chosen(&config.embedding) {
        (memfold_models::embed::Chosen::Minilm(dir), why) => (Some(dir), why),
        (_, why) => (None, why),
    }
}
