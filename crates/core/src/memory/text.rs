//! What a door needs to show what the use cases return, and to check what a person typed:
//! secrets masked in any text shown, the diffs between two versions of an entry, the names a
//! text speaks of, an entry block's parts, and the shape of ids and space names. The doors
//! reach the layers below through this and [`super::views`] alone
//! (`doors_reach_the_layers_below_through_the_core`).

pub use crate::planning::consolidate::rules::proper_names;
pub use crate::planning::diff::{WordRun, unified, words};
pub use crate::planning::recall::render_line as recalled_line;
pub use crate::planning::run::records::check_id;
pub use memfold_store::content_hash;
pub use memfold_store::home::check_name;
pub use memfold_store::secrets::{find as find_secrets, mask, mask_json};

/// An entry block as a plan or a run stores it (`EntryChange::before`, `after`), read apart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntryParts {
    pub content: String,
    pub sources: Vec<String>,
    /// "first seen …, updated …", or empty for a block with no header.
    pub dates: String,
}

/// `block` read as an entry: its content and its header's sources and dates (a block that is no
/// entry is its own content).
pub fn entry_parts(block: &str) -> EntryParts {
    let file = memfold_store::entries::EntryFile::parse(block, "plan");
    match file.entries().next() {
        Some(e) => {
            let day = |d: Option<chrono::NaiveDate>| d.map_or("?".into(), |d| d.to_string());
            let dates = format!("first seen {}, updated {}", day(e.meta.first_seen), day(e.meta.updated));
            EntryParts { content: e.content.clone(), sources: e.meta.sources.clone(), dates }
        }
        None => EntryParts { content: block.to_string(), ..EntryParts::default() },
    }
}

/// A hit handed to an agent as context, in the same line a prompt's recall uses (see
/// [`recalled_line`]).
pub fn hit_line(hit: &crate::memory::views::Hit) -> String {
    recalled_line(&hit.text, &hit.id, hit.valid_from, hit.space.as_deref(), hit.related_to.as_deref())
}
