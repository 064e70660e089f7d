//! Who a bearer token lets in ([`Keys`]): each space's token (`.memfold/token` in its root)
//! opens that space and nothing else ([`Access::Space`]); a home's operator token reaches any
//! space a request names ([`Access::Operator`]). The token files are read at start and looked
//! at again at most every [`TOKENS_FRESH`], so a space made while the daemon runs is reachable
//! and a deleted token stops working; a review-page sign-in code is consumed here too.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use super::token;
use memfold_store::config::Config;
use memfold_store::home::Home;
use memfold_store::{Root, content_hash};

/// Who a bearer token lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// One space (by name; the empty name is a lone root), and nothing else.
    Space(String),
    /// A home's operator: any space the request names.
    Operator,
}

/// How long the token table is used before the token files are looked at again.
const TOKENS_FRESH: Duration = Duration::from_secs(1);

/// Who each token lets in, and what the token files looked like when read.
#[derive(Debug, Default)]
struct Tokens {
    /// sha256 of a token → who it lets in.
    by_hash: HashMap<String, Access>,
    /// Each token file read: its stat then, and the hash of its token.
    read: HashMap<std::path::PathBuf, (Option<token::Stamp>, String)>,
    /// When the files were last looked at (None: never, nothing to refresh).
    checked: Option<Instant>,
}

impl Tokens {
    /// Let `hash` in as `access`, unless another holds it already: at start that is refused;
    /// on a refresh the one that held it before keeps it (a folder copied to make a space must
    /// not take the token of the space it was copied from) and the newcomer is left out.
    fn admit(
        &mut self,
        hash: String,
        access: Access,
        path: &std::path::Path,
        before: Option<&Tokens>,
    ) -> Result<(), token::TokenError> {
        let Some(held) = self.by_hash.get(&hash).cloned() else {
            self.by_hash.insert(hash, access);
            return Ok(());
        };
        let name = |a: &Access| match a {
            Access::Space(n) if n.is_empty() => "the root".to_string(),
            Access::Space(n) => format!("space {n}"),
            Access::Operator => "the home (the operator)".to_string(),
        };
        let Some(before) = before else {
            return Err(token::TokenError::Shared {
                first: name(&held),
                second: name(&access),
                path: path.to_path_buf(),
            });
        };
        let keeper = match before.by_hash.get(&hash) {
            Some(was) if *was == access => access.clone(),
            _ => held.clone(),
        };
        let left = if keeper == held { access } else { held };
        tracing::error!(
            token_file = %path.display(),
            "{} holds the token of {}, so it is not reachable by it: delete its token file for a token of its own",
            name(&left),
            name(&keeper)
        );
        self.by_hash.insert(hash, keeper);
        Ok(())
    }
}

/// The tokens of what a daemon serves (a lone root, or a home's spaces and its operator), as
/// the token files said at the last look.
pub struct Keys {
    /// The home served (None: a lone root).
    home: Option<Home>,
    config: Config,
    tokens: RwLock<Tokens>,
    /// Held by the one request that reads the token files again.
    refresh: Mutex<()>,
}

impl Keys {
    pub(super) fn new(home: Option<Home>, config: Config) -> Keys {
        Keys { home, config, tokens: RwLock::new(Tokens::default()), refresh: Mutex::new(()) }
    }

    /// Read every token: each space's (made if missing) and, for a home, the operator's
    /// (or `server.token_env`'s). A lone root with `server.auth = false` needs none. Refused
    /// when two spaces hold the same token (a space folder copied to make another): a space's
    /// token must reach that space alone.
    pub fn load(&self, addr: Option<std::net::SocketAddr>) -> Result<(), token::TokenError> {
        let table = self.read(addr, None)?;
        *self.tokens.write().unwrap_or_else(|e| e.into_inner()) = table;
        Ok(())
    }

    /// The token table as the token files say now: files whose stat is unchanged since
    /// `before` read them are not read again. With `before` (a refresh), a token two spaces
    /// share keeps reaching the space it reached and the other is left out, logged.
    fn read(&self, addr: Option<std::net::SocketAddr>, before: Option<&Tokens>) -> Result<Tokens, token::TokenError> {
        let mut table = Tokens { checked: Some(Instant::now()), ..Tokens::default() };
        let file = |table: &mut Tokens, path: std::path::PathBuf, access: Access| -> Result<(), token::TokenError> {
            let stamp = token::stamp(&path);
            let hash = match before.and_then(|b| b.read.get(&path)) {
                Some((was, hash)) if stamp.is_some() && *was == stamp => hash.clone(),
                _ => content_hash(token::ensure(&path)?),
            };
            table.read.insert(path.clone(), (token::stamp(&path), hash.clone()));
            table.admit(hash, access, &path, before)
        };
        match &self.home {
            None => match token::resolve(&self.config, &Root::new(&self.config.root), addr)? {
                token::Auth::Token { source: token::Source::File(path), .. } => {
                    file(&mut table, path, Access::Space(String::new()))?
                }
                token::Auth::Token { token, .. } => {
                    table.by_hash.insert(content_hash(&token), Access::Space(String::new()));
                }
                token::Auth::Off => {}
            },
            Some(home) => {
                match self.config.server_token_env() {
                    Some(token) => {
                        table.by_hash.insert(content_hash(&token), Access::Operator);
                    }
                    None if !self.config.server.token_env.is_empty() => {
                        return Err(token::TokenError::EnvMissing { var: self.config.server.token_env.clone() });
                    }
                    None => file(&mut table, home.token_file(), Access::Operator)?,
                }
                for name in home.names() {
                    let root = home.space(&name).expect("listed names are valid");
                    if before.is_some() && !root.is_initialized() {
                        continue; // a folder being made or taken away: read at the next look
                    }
                    file(&mut table, root.token_file(), Access::Space(name))?;
                }
            }
        }
        Ok(table)
    }

    /// Read the token files again when the last look is older than [`TOKENS_FRESH`]: a space
    /// made while the daemon runs is reachable, and a token file deleted (or replaced) to
    /// revoke a token stops reaching its space, within that time. One caller reads; the others
    /// use the table as it is meanwhile.
    fn refresh_if_due(&self) {
        let due =
            self.tokens.read().unwrap_or_else(|e| e.into_inner()).checked.is_some_and(|t| t.elapsed() >= TOKENS_FRESH);
        let Ok(_one) = (if due { self.refresh.try_lock() } else { return }) else { return };
        // Requests go on with the table as it is while the files are read.
        let read = {
            let before = self.tokens.read().unwrap_or_else(|e| e.into_inner());
            self.read(None, Some(&before))
        };
        let mut tokens = self.tokens.write().unwrap_or_else(|e| e.into_inner());
        match read {
            Ok(table) => *tokens = table,
            Err(e) => {
                tracing::error!(error = %e, "the token files cannot be read; the tokens as they were stay in use");
                tokens.checked = Some(Instant::now());
            }
        }
    }

    /// Whether requests need a token (every home does; a lone root unless `server.auth = false`).
    pub fn needs_token(&self) -> bool {
        !self.tokens.read().unwrap_or_else(|e| e.into_inner()).by_hash.is_empty()
    }

    /// Who `token` lets in; None for a token no space has (or a missing one where one is needed).
    /// A lone root served without a token lets everyone into its one space.
    pub fn access(&self, token: Option<&str>) -> Option<Access> {
        self.refresh_if_due();
        let tokens = self.tokens.read().unwrap_or_else(|e| e.into_inner());
        if tokens.by_hash.is_empty() {
            return self.home.is_none().then(|| Access::Space(String::new()));
        }
        tokens.by_hash.get(&content_hash(token?.trim())).cloned()
    }

    /// Consume a review-page sign-in code minted for `space` ("" for a lone root's, or a home
    /// operator's): who it signs in, once, while it is fresh. A code is looked up only among
    /// the codes of the space named, so naming another space finds nothing.
    pub async fn sign_in(&self, space: &str, code: &str) -> Option<Access> {
        let (dir, access) = match (&self.home, space) {
            (None, "") => (Root::new(&self.config.root).codes_dir(), Access::Space(String::new())),
            (None, _) => return None,
            (Some(home), "") => (home.codes_dir(), Access::Operator),
            (Some(home), name) => (home.space(name).ok()?.codes_dir(), Access::Space(name.to_string())),
        };
        let code = code.to_string();
        memfold_store::sys::blocking(move || memfold_store::signin::consume_code(&dir, &code)).await.then_some(access)
    }

    /// Space `name` was just made (with its token): its token reaches it from now on.
    pub(super) fn admit_new_space(&self, name: &str, root: &Root) -> Result<(), memfold_core::error::Error> {
        let token = token::ensure(&root.token_file()).map_err(|e| memfold_core::error::Error::Other(e.to_string()))?;
        self.tokens
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .by_hash
            .insert(content_hash(token), Access::Space(name.to_string()));
        Ok(())
    }
}
