//! Who may use the review page: browser sessions, once a sign-in code
//! (the service keeps them) or the token let them in.
//!
//! **Sessions** live in the daemon's memory, stored by the sha256 of their id (a restart signs
//! everyone out): at most [`MAX_SESSIONS`], each dropped after [`SESSION_IDLE`] without a
//! request. Each has its own CSRF token, which every form carries and every POST must return.

use memfold_store::sys::guard;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::service::Access;
use memfold_core::memory::text::content_hash;
use memfold_store::sys::random_hex;

/// Sessions kept at once; the least recently used goes first.
pub const MAX_SESSIONS: usize = 32;
/// A session unused this long is dropped.
pub const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);

struct Session {
    csrf: String,
    /// Who signed in: a space, or a home's operator.
    access: Access,
    used: Instant,
}

/// The signed-in browsers, by the sha256 of their session id.
#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// A new session of `access`: its id (for the cookie) and its CSRF token.
    pub fn create(&self, access: Access) -> (String, String) {
        let (id, csrf) = (random_hex(), random_hex());
        let mut map = guard(&self.map);
        map.retain(|_, s| s.used.elapsed() < SESSION_IDLE);
        while map.len() >= MAX_SESSIONS {
            let oldest = map.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| k.clone());
            match oldest {
                Some(key) => map.remove(&key),
                None => break,
            };
        }
        map.insert(content_hash(&id), Session { csrf: csrf.clone(), access, used: Instant::now() });
        (id, csrf)
    }

    /// The CSRF token and the access of the session `id`, if it is signed in; marks it used.
    pub fn get(&self, id: &str) -> Option<(String, Access)> {
        let mut map = guard(&self.map);
        let key = content_hash(id);
        match map.get_mut(&key) {
            Some(s) if s.used.elapsed() < SESSION_IDLE => {
                s.used = Instant::now();
                Some((s.csrf.clone(), s.access.clone()))
            }
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_found_by_id_and_bounded() {
        let sessions = Sessions::default();
        let (id, csrf) = sessions.create(Access::Space("me".into()));
        assert_eq!(sessions.get(&id), Some((csrf, Access::Space("me".into()))));
        assert_eq!(sessions.get(&random_hex()), None);
        for _ in 0..MAX_SESSIONS {
            sessions.create(Access::Operator);
        }
        assert_eq!(sessions.get(&id), None, "the least recently used went first");
    }
}
